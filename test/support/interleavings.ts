import fc from 'fast-check';
import { type DiscardedMessage, planDiscard, settleByHand } from '../../cli/dlq-discard.ts';
import { lateRefunds } from '../../cli/late-refunds.ts';
import { isStuckAdd, repairStuckAdd, STUCK_ADD_AFTER_MS } from '../../cli/stuck.ts';
import { DAY_MS } from '../../shared/accept/due.ts';
import { type AcceptDeps, runAccept, UNCONFIRMED_SETTLE_MS } from '../../shared/accept/job.ts';
import type { Conversion } from '../../shared/affiliate/schemas.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { ConnectorEvent, type ConnectorEventInput } from '../../shared/domain/events.ts';
import { PermanentError, TransientError } from '../../shared/errors.ts';
import { submitFinanceRefund } from '../../shared/finance.ts';
import {
  countedRefunds,
  ledgerKey,
  type OrderRecord,
  type RefundReservations,
  refundOf,
} from '../../shared/ledger.ts';
import type {
  AcceptIndex,
  AddConversionInput,
  ConversionBackend,
  FailureAttributes,
  Ledger,
  PlatformConversion,
  ReservationLedger,
} from '../../shared/ports.ts';
import { messageGroupId } from '../../shared/queueing.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { type BatchDeps, processBatch, type RecordReport } from '../../shared/worker/batch.ts';
import { CANCELLATION_REFUND_ID } from '../../shared/worker/flow.ts';
import { CLICK } from './events.ts';
import { fifoRecord } from './sqs-records.ts';

/**
 * A model-based check of docs/exactly-once.md under interleavings: several worker instances (and
 * finance's `POST /refunds`) act at once on ONE ledger and ONE platform, every ledger call, platform
 * call and DLQ send waiting for fast-check's scheduler to let it happen, with faults injected at those
 * calls (the worker dies before or after a call takes effect, a call's answer is lost, a 429/503 or a
 * throttled ledger). What no invocation acknowledged is delivered again, epoch after epoch (the clock
 * jumps past leases and verification windows between them), then one by one without faults until
 * the queue is quiet, parked messages replayed once; then `verdict` compares the platform and the
 * ledger with what the queued events say.
 */

export const PROGRAM = '5ad000000000000000000101';
export const NOW = Date.parse('2026-05-01T10:00:00.000Z');
const SOURCE = SourceConfig.parse({
  id: 'shop',
  platform: 'generic',
  program: PROGRAM,
  rule: '5ad000000000000000000201',
  secretRef: 'SHOP_SECRET',
});
/** The return window of the source in scenarios with the accept job; every order is older than it. */
const ACCEPT_AFTER_DAYS = 30;
const ACCEPTING_SOURCE = SourceConfig.parse({ ...SOURCE, acceptAfterDays: ACCEPT_AFTER_DAYS });
const ORDER_DATE = new Date(NOW - (ACCEPT_AFTER_DAYS + 1) * DAY_MS).toISOString();

/** The scenario's source: with a return window when the accept job runs in it. */
function sourceOf(scenario: Pick<Scenario, 'accepts'>): SourceConfig {
  return scenario.accepts.length > 0 ? ACCEPTING_SOURCE : SOURCE;
}
const FINANCE_KEY = 'finance-key-for-interleavings-0123456789';
const LEASE_MS = 60_000;
const SETTLE_MS = 10_000;
const VERIFY_MS = 600_000;
/** Between epochs: SQS hides a failed message for its backoff; leases and verification windows pass. */
const EPOCH_JUMP_MS = LEASE_MS + VERIFY_MS + SETTLE_MS + 60_000;
/**
 * Between epochs on the local stack's timing: its queue hands a message out again after 30 s
 * (infra/local/emulators.ts), within the hold of a worker's marks (`LEASE_MS`) and its add lease.
 */
export const LOCAL_EPOCH_JUMP_MS = 30_000;
const MAX_RECEIVES = 6;
/** Rounds of fault-free deliveries after the epochs before the queue must be quiet. */
const DRAIN_ROUNDS = 12;

/**
 * What a fault does at the call it hits: `crash-before` the worker dies before the call takes effect;
 * `crash-after` the call takes effect and the worker dies before it reads the answer; `lost-answer`
 * the call takes effect and its answer is lost (a timeout: ambiguous to the worker); `no-answer` the
 * same timeout for a call that never took effect; `unavailable` nothing is done and the worker is told
 * so (the platform's 429 or 503, a throttled ledger, SQS refusing the DLQ send).
 */
export type Fault = 'crash-before' | 'crash-after' | 'lost-answer' | 'no-answer' | 'unavailable';
export const FAULTS: readonly Fault[] = [
  'crash-before',
  'crash-after',
  'lost-answer',
  'no-answer',
  'unavailable',
];

/** A fault of one invocation: at its `at`-th call (ledger, platform or DLQ), counted from 0. */
export interface InvocationFault {
  readonly at: number;
  readonly fault: Fault;
}

/** One order and the refunds of it the shop sends (each at most once as an event; deliveries repeat). */
export interface OrderPlan {
  /** Minor units of EUR. */
  readonly amount: number;
  /** Whether the order itself is delivered at all (a refund may come for an order never seen). */
  readonly placed: boolean;
  /** Partial refunds `r1`, `r2`…, minor units each. */
  readonly partials: readonly number[];
  /** A full refund (`rf`). */
  readonly full: boolean;
  readonly cancelled: boolean;
}

/** Finance's `POST /refunds`: a partial refund of order `order`, run beside the first epoch's workers. */
export interface FinancePlan {
  readonly order: number;
  readonly amount: number;
  /** `fin-1`, or a shop refund's id (`r1`) resent through finance at that refund's amount. */
  readonly sameAsShop: boolean;
}

/**
 * A run of the accept job (`runAccept`), the return window of every order already passed: beside
 * the workers of epoch `at` (counted from 0), or, `at` past the epochs, between the drain's rounds.
 */
export interface AcceptRun {
  readonly at: number;
  /** The run's faults, at its calls (ledger, platform, DLQ) counted from 0. */
  readonly faults: readonly InvocationFault[];
}

export interface Scenario {
  readonly orders: readonly OrderPlan[];
  /** Copies of each event (`eventsOf`), 1 or 2: a shop's resend is a new SQS message. */
  readonly copies: readonly number[];
  /** Sort keys of the deliveries: the order the shop's webhooks are queued in. */
  readonly arrival: readonly number[];
  readonly finance: FinancePlan | null;
  readonly workers: number;
  /** Epochs of concurrent, faulty delivery before the fault-free drain. */
  readonly epochs: number;
  readonly lookupBeforeAdd: boolean;
  /** Whether the platform refuses a second add of an externalId (409) or records a second conversion. */
  readonly duplicates: 'allow' | 'reject';
  /** The add's answer carries no conversion id. */
  readonly bareAdds: boolean;
  /** The faults of each invocation, in the order invocations start; none past the end. */
  readonly faults: readonly (readonly InvocationFault[])[];
  /**
   * The accept job's runs (none, one or two); with any, the source has a return window and every
   * order's has passed, and one more run, without faults, follows the drain.
   */
  readonly accepts: readonly AcceptRun[];
  /**
   * An operator's `connector reconcile --repair`: an order whose worker died mid-add (its record left
   * `adding` under that worker's lease) has its message purged, as a local stack's crash without
   * LOCAL_DATA_DIR loses it; the first delivery of the first order dies at its `at`-th call (`after`
   * it took effect, or before). The repair runs beside the last epoch's workers (that epoch starts
   * past the stuck-add age) and, without faults, before each of the drain's rounds; an order it leaves
   * without a conversion, or with refunds held for it, the operator sends again, as it says.
   */
  readonly repair: { readonly at: number; readonly after: boolean } | null;
  /**
   * The refund (and cancellation) events the shop sends only later, from this place among the
   * scenario's refund events on: their deliveries are queued at the start of the last epoch (of the
   * drain, with one epoch), after the accept job's runs of the epochs before.
   */
  readonly sentLater: number | null;
  /**
   * The refund (or cancellation) event, by its place among the scenario's refund events, whose first
   * message is on its queue's last receive with the platform answering 429 to it: parked in the DLQ.
   * An operator settles it by hand on the platform and discards it (`connector dlq discard`) beside
   * the next epoch's workers or in the drain, when discard would record it settled by hand; else
   * it is replayed.
   */
  readonly settledByHand: number | null;
  /**
   * An accepted conversion is locked at once (its waiting period, 20 days by default, over): a full
   * refund or the cancellation can no longer refuse it either, and is late too.
   */
  readonly locks: boolean;
}

const orderPlan: fc.Arbitrary<OrderPlan> = fc.record({
  amount: fc.integer({ min: 10, max: 90 }).map((n) => n * 100),
  placed: fc.nat({ max: 9 }).map((n) => n < 8),
  partials: fc.array(
    fc.integer({ min: 1, max: 40 }).map((n) => n * 100),
    { maxLength: 2 },
  ),
  full: fc.nat({ max: 9 }).map((n) => n < 2),
  cancelled: fc.nat({ max: 9 }).map((n) => n < 2),
});

/** One or two runs of the accept job, at most one fault each. */
const acceptRuns = fc.array(
  fc.record({
    at: fc.nat({ max: 3 }),
    faults: fc.array(fc.record({ at: fc.nat({ max: 5 }), fault: fc.constantFrom(...FAULTS) }), {
      maxLength: 1,
    }),
  }),
  { minLength: 1, maxLength: 2 },
);

const scenarioFields = {
  orders: fc.array(orderPlan, { minLength: 1, maxLength: 2 }),
  copies: fc.array(
    fc.nat({ max: 3 }).map((n) => (n === 0 ? 2 : 1)),
    { minLength: 10, maxLength: 10 },
  ),
  arrival: fc.array(fc.nat({ max: 99 }), { minLength: 20, maxLength: 20 }),
  finance: fc.option(
    fc.record({
      order: fc.nat({ max: 1 }),
      amount: fc.integer({ min: 1, max: 40 }).map((n) => n * 100),
      sameAsShop: fc.boolean(),
    }),
    { freq: 2 },
  ),
  workers: fc.integer({ min: 2, max: 3 }),
  epochs: fc.integer({ min: 1, max: 2 }),
  lookupBeforeAdd: fc.boolean(),
  duplicates: fc.constantFrom('allow' as const, 'reject' as const),
  bareAdds: fc.boolean(),
  faults: fc.array(
    fc.array(fc.record({ at: fc.nat({ max: 7 }), fault: fc.constantFrom(...FAULTS) }), { maxLength: 2 }),
    { maxLength: 24 },
  ),
  accepts: fc.oneof({ weight: 1, arbitrary: fc.constant([]) }, { weight: 2, arbitrary: acceptRuns }),
  repair: fc.option(fc.record({ at: fc.nat({ max: 3 }), after: fc.boolean() }), { freq: 3 }),
  sentLater: fc.option(fc.nat({ max: 3 }), { freq: 2 }),
  settledByHand: fc.option(fc.nat({ max: 3 }), { freq: 3 }),
  locks: fc.nat({ max: 3 }).map((n) => n === 0),
};

/**
 * Scenarios of one or two orders, two or three workers, faults at up to two calls per invocation;
 * in most the accept job, a stuck add's repair, a refund sent later or one settled by hand.
 */
export const scenarios: fc.Arbitrary<Scenario> = fc.record(scenarioFields);

/**
 * Scenarios where the accept job runs and a refund comes after its first runs: what it must never
 * accept, and the refunds that reach an accepted (or locked) conversion.
 */
export const acceptScenarios: fc.Arbitrary<Scenario> = fc.record({
  ...scenarioFields,
  accepts: acceptRuns,
  sentLater: fc.nat({ max: 3 }),
});

/** The events of the scenario's orders, each once, in plan order (`Scenario.copies` is indexed so). */
export function eventsOf(scenario: Scenario, tag: string): ConnectorEvent[] {
  const events: ConnectorEvent[] = [];
  scenario.orders.forEach((plan, o) => {
    const externalId = externalIdOf(tag, o);
    const event = (fields: Partial<ConnectorEventInput> & Pick<ConnectorEventInput, 'type'>) =>
      ConnectorEvent.parse({
        eventId: `${externalId}-${events.length}`,
        source: SOURCE.id,
        platform: 'generic',
        externalId,
        receivedAt: new Date(NOW).toISOString(),
        ...fields,
      });
    if (plan.placed) {
      events.push(
        event({
          type: 'OrderPlaced',
          amount: plan.amount,
          currency: 'EUR',
          clickIds: [CLICK],
          buyerIp: '198.51.100.4',
          ...(scenario.accepts.length > 0 ? { orderDate: ORDER_DATE } : {}),
        }),
      );
    }
    plan.partials.forEach((amount, i) => {
      events.push(event({ type: 'OrderRefunded', refundId: `r${i + 1}`, amount, currency: 'EUR' }));
    });
    if (plan.full) events.push(event({ type: 'OrderRefunded', refundId: 'rf', full: true, currency: 'EUR' }));
    if (plan.cancelled) events.push(event({ type: 'OrderCancelled', reason: 'changed their mind' }));
  });
  return events;
}

export function externalIdOf(tag: string, order: number): string {
  return `${tag}-${1001 + order}`;
}

/** The shop's deliveries: every event in its copies, in the order of their arrival keys. */
function deliveriesOf(scenario: Scenario, events: readonly ConnectorEvent[]): ConnectorEvent[] {
  const keyed: { key: number; event: ConnectorEvent }[] = [];
  events.forEach((event, i) => {
    const copies = scenario.copies[i] ?? 1;
    for (let c = 0; c < copies; c++) {
      const slot = keyed.length;
      keyed.push({ key: (scenario.arrival[slot % scenario.arrival.length] ?? 0) * 100 + slot, event });
    }
  });
  return keyed.sort((a, b) => a.key - b.key).map((k) => k.event);
}

// The platform.

interface StoredConversion {
  readonly id: string;
  readonly externalId: string;
  amount: number;
  readonly currency: string;
  status: 'pending' | 'accepted' | 'refused';
  /** Its amount when it was accepted. */
  acceptedAmount?: number;
}

/** The commission the platform gives with a conversion: a tenth of its amount. */
function commissionOf(amount: number): number {
  return Math.round(amount / 10);
}

/**
 * The platform's conversions as the sandbox keeps them (sandbox/actions.ts): Conversion info gives
 * the oldest of an externalId; the amount changes only while pending (422 else: an accepted one's
 * amount never changes); a second refusal is a 422, an accepted one can be refused until it locks
 * (the platform's 20 days; at once with `Scenario.locks`, then a 422 too); only a pending one can be
 * accepted (422 else, a second accept too); a second add of an externalId is a 409 (`reject`) or a
 * second conversion (`allow`).
 */
export class ModelPlatform {
  readonly conversions: StoredConversion[] = [];
  readonly #options: Pick<Scenario, 'duplicates' | 'bareAdds'> & Partial<Pick<Scenario, 'locks'>>;

  constructor(options: Pick<Scenario, 'duplicates' | 'bareAdds'> & Partial<Pick<Scenario, 'locks'>>) {
    this.#options = options;
  }

  add(input: AddConversionInput): { id: string | undefined } {
    if (
      this.#options.duplicates === 'reject' &&
      this.conversions.some((c) => c.externalId === input.externalId)
    ) {
      throw new PermanentError(`conversions.add answered 409: externalId ${input.externalId} exists`, {
        status: 409,
      });
    }
    const id = `c${String(this.conversions.length + 1).padStart(23, '0')}`;
    this.conversions.push({
      id,
      externalId: input.externalId,
      amount: input.amount,
      currency: input.currency,
      status: 'pending',
    });
    return { id: this.#options.bareAdds ? undefined : id };
  }

  find(externalId: string): PlatformConversion | undefined {
    const found = this.conversions.find((c) => c.externalId === externalId);
    if (!found) return undefined;
    const { acceptedAmount: _, ...shown } = found;
    return { ...shown, isLocked: this.#locked(found), commission: commissionOf(found.amount) };
  }

  /** Whether accepted conversions lock at once (`Scenario.locks`). */
  get locks(): boolean {
    return this.#options.locks === true;
  }

  /** Accepted, and its waiting period over when the scenario says so (`Scenario.locks`). */
  #locked(c: StoredConversion): boolean {
    return this.#options.locks === true && c.status === 'accepted';
  }

  updateAmount(id: string, amount: number): void {
    const c = this.#byId(id);
    if (c.status !== 'pending') {
      throw new PermanentError(
        `conversions.update answered 422: conversion ${id} is ${c.status}: its amount can only be updated while pending`,
        { status: 422 },
      );
    }
    c.amount = amount;
  }

  accept(id: string): void {
    const c = this.#byId(id);
    if (this.#locked(c)) {
      throw new PermanentError(
        `conversions.accept answered 422: conversion ${id} is locked and can no longer be accepted`,
        { status: 422 },
      );
    }
    if (c.status === 'refused') {
      throw new PermanentError(
        `conversions.accept answered 422: conversion ${id} is refused and can no longer be accepted`,
        { status: 422 },
      );
    }
    if (c.status === 'accepted') {
      throw new PermanentError(
        `conversions.accept answered 422: conversion ${id} is already accepted: only a pending conversion can be accepted`,
        { status: 422 },
      );
    }
    c.status = 'accepted';
    c.acceptedAmount = c.amount;
  }

  refuse(id: string): void {
    const c = this.#byId(id);
    if (this.#locked(c)) {
      throw new PermanentError(
        `conversions.refuse answered 422: conversion ${id} is locked and can no longer be refused`,
        { status: 422 },
      );
    }
    if (c.status === 'refused') {
      throw new PermanentError(`conversions.refuse answered 422: conversion ${id} is already refused`, {
        status: 422,
      });
    }
    c.status = 'refused';
  }

  of(externalId: string): StoredConversion[] {
    return this.conversions.filter((c) => c.externalId === externalId);
  }

  #byId(id: string): StoredConversion {
    const c = this.conversions.find((x) => x.id === id);
    if (!c) throw new PermanentError(`answered 404: no conversion ${id}`, { status: 404 });
    return c;
  }
}

/**
 * `platform` as a worker's or the accept job's backend, with nothing in between; `faults` are thrown
 * by the next calls of their route, first in, first out, before the call takes effect.
 */
export function modelBackend(
  platform: ModelPlatform,
  faults: Partial<Record<'find' | 'update' | 'refuse' | 'accept', Error[]>> = {},
): ConversionBackend {
  const call = <T>(route: 'find' | 'update' | 'refuse' | 'accept', op: () => T): Promise<T> => {
    const fault = faults[route]?.shift();
    return fault ? Promise.reject(fault) : Promise.resolve(op());
  };
  return {
    add: async (input) => platform.add(input),
    find: (_program, externalId) => call('find', () => platform.find(externalId)),
    updateAmount: (_program, id, amount) => call('update', () => platform.updateAmount(id, amount)),
    refuse: (_program, id) => call('refuse', () => platform.refuse(id)),
    accept: (_program, id) => call('accept', () => platform.accept(id)),
  };
}

// The scheduling of every call.

/**
 * Where each call waits for the scheduler. A call's own I/O (dynalite over HTTP) runs alone: the
 * scheduler's `act` lets the next task go only once no call is in flight, so the interleaving is the
 * scheduler's, not the sockets'.
 */
export class Gate {
  readonly #scheduler: fc.Scheduler | undefined;
  #inflight = 0;
  #idle: (() => void)[] = [];

  constructor(scheduler: fc.Scheduler | undefined) {
    this.#scheduler = scheduler;
  }

  async pass(label: string): Promise<void> {
    if (this.#scheduler) await this.#scheduler.schedule(Promise.resolve(), label);
  }

  async io<T>(op: () => Promise<T> | T): Promise<T> {
    this.#inflight += 1;
    try {
      return await op();
    } finally {
      this.#inflight -= 1;
      if (this.#inflight === 0) for (const resolve of this.#idle.splice(0)) resolve();
    }
  }

  /** For the scheduler's `act`: after a task, until its call's I/O is done and its caller waits again. */
  readonly act = async (release: () => Promise<void>): Promise<void> => {
    await release();
    await macrotask();
    while (this.#inflight > 0) {
      await new Promise<void>((resolve) => this.#idle.push(resolve));
      await macrotask();
    }
  };
}

const macrotask = () => new Promise<void>((resolve) => setImmediate(resolve));
const never = <T>(): Promise<T> => new Promise<T>(() => {});

/** One invocation of the worker (or one request to the door): its calls, its fault, its death. */
class Invocation {
  readonly name: string;
  readonly #faults: readonly InvocationFault[];
  readonly #gate: Gate;
  readonly #trace: string[];
  readonly #died: () => void;
  #calls = 0;
  #dead = false;

  constructor(
    name: string,
    faults: readonly InvocationFault[],
    gate: Gate,
    trace: string[],
    died: () => void,
  ) {
    this.name = name;
    this.#faults = faults;
    this.#gate = gate;
    this.#trace = trace;
    this.#died = died;
  }

  /** Runs `op` when the scheduler says, with this invocation's fault if one falls on this call. */
  async call<T>(kind: 'ledger' | 'platform' | 'sqs', label: string, op: () => Promise<T> | T): Promise<T> {
    await this.#gate.pass(`${this.name} ${label}`);
    if (this.#dead) return never();
    const index = this.#calls++;
    const fault = this.#faults.find((f) => f.at === index)?.fault;
    const line = `${this.name} ${label}`;
    if (fault === 'crash-before') return this.#die(`${line}: died before it`);
    if (fault === 'unavailable') {
      this.#trace.push(`${line}: unavailable`);
      throw unavailable(kind, label);
    }
    if (fault === 'no-answer') {
      this.#trace.push(`${line}: no answer, not done`);
      throw lostAnswer(kind, label);
    }
    let result: T;
    try {
      result = await this.#gate.io(op);
    } catch (error) {
      this.#trace.push(`${line}: ${(error as Error).message}`);
      throw error;
    }
    this.#trace.push(`${line} → ${shown(result)}`);
    if (fault === 'crash-after') return this.#die(`${line}: died before its answer`);
    if (fault === 'lost-answer') {
      this.#trace.push(`${line}: answer lost`);
      throw lostAnswer(kind, label);
    }
    return result;
  }

  #die(line: string): Promise<never> {
    this.#dead = true;
    this.#trace.push(line);
    this.#died();
    return never();
  }
}

function shown(result: unknown): string {
  if (result === undefined) return 'nothing';
  if (typeof result === 'boolean') return String(result);
  if (typeof result === 'object' && result !== null && 'state' in result && 'version' in result) {
    const r = result as OrderRecord;
    return `${r.state} v${r.version} ${r.currentAmount}`;
  }
  return JSON.stringify(result);
}

function unavailable(kind: 'ledger' | 'platform' | 'sqs', label: string): Error {
  if (kind === 'platform') {
    return new TransientError(`${label} answered 503: Service Unavailable`, { status: 503 });
  }
  return Object.assign(new Error(`${label}: throughput exceeded`), {
    name: 'ProvisionedThroughputExceededException',
    $metadata: {},
  });
}

function lostAnswer(kind: 'ledger' | 'platform' | 'sqs', label: string): Error {
  if (kind === 'platform') {
    return new TransientError(`${label}: no answer in time`, { ambiguous: true });
  }
  return Object.assign(new Error(`${label}: socket timed out`), { name: 'TimeoutError', $metadata: {} });
}

/**
 * The ledger as one invocation sees it. A write whose answer is lost leaves the caller's record as a
 * timed-out SDK call does: not bumped to the version it wrote.
 */
function ledgerOf(
  inner: Ledger & ReservationLedger,
  inv: Invocation,
  /** Told of each record written, as the write takes effect. */
  written: (record: OrderRecord) => void = () => {},
): Ledger & ReservationLedger {
  const write = async (
    label: string,
    record: { version: number; updatedAt?: string },
    op: () => Promise<boolean>,
  ) => {
    const before = { version: record.version, updatedAt: record.updatedAt };
    try {
      return await inv.call('ledger', label, op);
    } catch (error) {
      Object.assign(record, before);
      throw error;
    }
  };
  return {
    get: (key) => inv.call('ledger', `ledger.get ${shortKey(key)}`, () => inner.get(key)),
    create: (record) =>
      write(`ledger.create ${record.externalId} ${record.state}`, record, () => inner.create(record)),
    update: (record) =>
      write(`ledger.update ${record.externalId} v${record.version} ${record.state}`, record, async () => {
        const done = await inner.update(record);
        if (done) written(record);
        return done;
      }),
    list: (program) => inner.list(program),
    reservationsOf: (key) =>
      inv.call('ledger', `reservations.get ${shortKey(key)}`, () => inner.reservationsOf(key)),
    saveReservations: (reservations: RefundReservations) =>
      write(`reservations.save v${reservations.version}`, reservations, () =>
        inner.saveReservations(reservations),
      ),
  };
}

/**
 * The ledger as the accept job sees it in one invocation: its due-date index read through the gate
 * and limited to this run's orders (every run of a property shares the ledger), `leased` told of each
 * write of the job's lease (`acceptLeaseUntil` set) as it takes effect.
 */
function acceptLedgerOf(
  inner: Ledger & ReservationLedger & AcceptIndex,
  inv: Invocation,
  keys: ReadonlySet<string>,
  leased: (record: OrderRecord) => void,
): AcceptDeps['ledger'] {
  const gated = ledgerOf(inner, inv, (record) => {
    if (record.acceptLeaseUntil !== undefined) leased(record);
  });
  return {
    get: gated.get,
    update: gated.update,
    dueForAccept: (source, dueBy, page) =>
      inv.call('ledger', 'dueForAccept', async () => {
        const due = await inner.dueForAccept(source, dueBy, page);
        return { ...due, keys: due.keys.filter((key) => keys.has(key)) };
      }),
  };
}

function shortKey(key: string): string {
  return key.slice(key.indexOf('#') + 1);
}

/** The platform as one invocation sees it; `throttled`: every call answered 429, nothing done. */
function backendOf(platform: ModelPlatform, inv: Invocation, throttled = false): ConversionBackend {
  const call = <T>(label: string, op: () => T) =>
    inv.call('platform', label, () => {
      if (throttled) throw new TransientError(`${label} answered 429: rate limited`, { status: 429 });
      return op();
    });
  return {
    add: (input) => call(`add ${input.externalId} ${input.amount}`, () => platform.add(input)),
    find: (_program, externalId) => call(`find ${externalId}`, () => platform.find(externalId)),
    updateAmount: (_program, id, amount) =>
      call(`update ${id.slice(-2)} ${amount}`, () => platform.updateAmount(id, amount)),
    refuse: (_program, id) => call(`refuse ${id.slice(-2)}`, () => platform.refuse(id)),
    accept: (_program, id) => call(`accept ${id.slice(-2)}`, () => platform.accept(id)),
  };
}

// The queue, the workers and the runs.

interface Message {
  readonly id: string;
  readonly event: ConnectorEvent;
  receives: number;
  /** The platform answers 429 to each of this message's calls (`Scenario.settledByHand`). */
  throttled?: boolean;
  /** Lost from the queue with its worker (`Scenario.repair`). */
  purged?: boolean;
}

interface Parked {
  readonly message: Message;
  readonly failure: FailureAttributes;
  /** Gone from the DLQ: replayed, or settled by hand and discarded. */
  replayed: boolean;
}

/** What a run left: the platform, the ledger's records, what was queued, parked, and the trace. */
export interface RunResult {
  readonly platform: ModelPlatform;
  readonly records: ReadonlyMap<string, OrderRecord | undefined>;
  readonly queued: readonly ConnectorEvent[];
  readonly parked: readonly Parked[];
  /** Messages never done with: still in the queue after the drain. */
  readonly left: readonly Message[];
  /** Every message queued, the replays from the DLQ included. */
  readonly messages: readonly Message[];
  /** The worker's last report of each message id. */
  readonly reports: ReadonlyMap<string, RecordReport>;
  readonly trace: readonly string[];
  /** What the door answered finance, when it was asked. */
  readonly financeStatus?: number;
  /** The accept job ran, the last time after the drain: every live conversion is due. */
  readonly accepting: boolean;
  /** What the accept job parked in the DLQ (a conversion it would not accept). */
  readonly acceptParked: readonly FailureAttributes[];
  /** What broke a rule as it happened (the accept job's lease taken on a record it must not accept). */
  readonly seen: readonly string[];
  /** The refunds (`externalId refundId`) whose parked message an operator discarded. */
  readonly discarded: ReadonlySet<string>;
}

/** How far past a stuck add's lease `connector reconcile --repair` takes it as stuck. */
const REPAIR_JUMP_MS = LEASE_MS + STUCK_ADD_AFTER_MS + 60_000;

/**
 * Plays `scenario` on `ledger` (fresh keys: `tag` names this run's orders) and a fresh platform, the
 * epochs' calls in the order `scheduler` picks (undefined: the calls' own order, for a replayed
 * scenario), then drains the queue without faults.
 */
export async function playScenario(
  scenario: Scenario,
  ledger: Ledger & ReservationLedger & AcceptIndex,
  tag: string,
  scheduler: fc.Scheduler | undefined,
  /** How far the clock moves between epochs (the drain's rounds always pass every window). */
  epochJumpMs = EPOCH_JUMP_MS,
): Promise<RunResult> {
  const platform = new ModelPlatform(scenario);
  const source = sourceOf(scenario);
  const sources = new Map([[source.id, source]]);
  const keys = new Set(scenario.orders.map((_, o) => ledgerKey(PROGRAM, externalIdOf(tag, o))));
  const trace: string[] = [];
  const reports = new Map<string, RecordReport>();
  const parked: Parked[] = [];
  const queued: ConnectorEvent[] = [];
  const acceptParked: FailureAttributes[] = [];
  const seen: string[] = [];
  /** Orders whose message was purged after their worker died mid-add. */
  const purged = new Set<string>();
  const discarded = new Set<string>();
  let clock = NOW;
  let messageNo = 0;
  let invocationNo = 0;
  let later: Message[] = [];
  const messages: Message[] = [];
  const enqueue = (event: ConnectorEvent, into: Message[]) => {
    queued.push(event);
    const message: Message = { id: `m${++messageNo}`, event, receives: 0 };
    messages.push(message);
    into.push(message);
    return message;
  };

  /** One receive of `message` by worker instance `name`; resolves once it is done, given back or lost. */
  const deliver = async (message: Message, name: string, gate: Gate, faults: readonly InvocationFault[]) => {
    const died = Promise.withResolvers<'died'>();
    const inv = new Invocation(name, faults, gate, trace, () => died.resolve('died'));
    message.receives += 1;
    trace.push(
      `${name} receives ${message.id} (${describe(message.event)}), receive ${message.receives}${message.throttled ? ', the platform answering it 429' : ''}`,
    );
    const deps: BatchDeps = {
      ledger: ledgerOf(ledger, inv),
      sources,
      backendFor: () => backendOf(platform, inv, message.throttled),
      now: () => clock,
      workerId: name,
      leaseMs: LEASE_MS,
      settleMs: SETTLE_MS,
      verifyMs: VERIFY_MS,
      failures: {
        park: (_body, failure) =>
          inv.call('sqs', `park ${message.id}`, () => {
            parked.push({ message, failure, replayed: false });
          }),
        delay: async () => {},
      },
      sleep: async () => {},
      random: () => 0.5,
      maxReceiveCount: MAX_RECEIVES,
      observe: (report) => {
        reports.set(report.messageId, report);
        trace.push(
          `${name} ${report.messageId}: ${report.status}${report.outcome ? ` ${report.outcome.result}` : ''}${report.reason ? ` (${report.reason.slice(0, 160)})` : ''}`,
        );
      },
    };
    const record = fifoRecord(message.event, {
      messageId: message.id,
      program: PROGRAM,
      sentAt: NOW,
      receiveCount: message.receives,
    });
    const done = processBatch(deps, [record], clock + 30_000).then((answer) =>
      answer.batchItemFailures.length > 0 ? ('again' as const) : ('done' as const),
    );
    const how = await Promise.race([done, died.promise]);
    if (how === 'died' && scenario.repair && message.event.type === 'OrderPlaced') {
      // Its worker died mid-add: the record is left `adding` under its lease, and the message is lost.
      // Not one whose lease it gave back (a 429 to its add): the repair dates that from the record's
      // `updatedAt`, which the ledger writes from the wall clock, not from this run's.
      const left = await gate.io(() => ledger.get(ledgerKey(PROGRAM, message.event.externalId)));
      if (left?.state === 'adding' && left.leaseOwner === name && (left.leaseUntil ?? 0) > 0) {
        trace.push(`${message.id} purged from the queue: its worker ${name} died mid-add`);
        message.purged = true;
        purged.add(message.event.externalId);
        return how;
      }
    }
    if (how !== 'done') later.push(message);
    return how;
  };

  const financeRequest = async (gate: Gate, plan: FinancePlan, into: Message[]) => {
    const inv = new Invocation('door', [], gate, trace, () => {});
    const o = plan.order < scenario.orders.length ? plan.order : 0;
    const externalId = externalIdOf(tag, o);
    const shopAmount = scenario.orders[o]?.partials[0];
    const [refundId, amount] =
      plan.sameAsShop && shopAmount !== undefined ? ['r1', shopAmount] : ['fin-1', plan.amount];
    const answer = await submitFinanceRefund(
      {
        sources,
        ledger: ledgerOf(ledger, inv),
        reservations: ledgerOf(ledger, inv),
        queue: {
          send: async (event) => enqueue(event, into).id,
        },
        secrets: new EnvSecretStore({ FINANCE_API_KEY: FINANCE_KEY }),
        keyRef: 'FINANCE_API_KEY',
        now: () => new Date(clock),
      },
      { 'x-api-key': FINANCE_KEY },
      Buffer.from(
        JSON.stringify({ externalId, refundId, amountCents: amount, currency: 'EUR', source: SOURCE.id }),
      ),
    );
    trace.push(`door: POST /refunds ${externalId} ${refundId} ${amount} → ${answer.status}`);
    return answer.status;
  };

  /**
   * Where the accept job takes its lease (a write that sets `acceptLeaseUntil`): the record as written
   * must be one it may accept, and the platform must show what that record says.
   */
  const leaseTaken = (record: OrderRecord) => {
    const say = (what: string) =>
      seen.push(`order ${record.externalId}: the accept job took its lease ${what}`);
    for (const r of Object.values(record.refunds)) {
      if (r.status === 'pending') say(`with refund ${r.refundId} pending`);
      if (r.status === 'applied' && r.unconfirmedSend)
        say(`with the send of refund ${r.refundId} unconfirmed`);
    }
    if (record.unconfirmedSend) say("with the order's own send unconfirmed");
    const [conversion] = platform.of(record.externalId);
    if (conversion && (conversion.status === 'refused' || conversion.amount !== ledgerAmount(record))) {
      say(
        `while the platform shows it ${conversion.status} at ${conversion.amount}, the ledger at ${ledgerAmount(record)}`,
      );
    }
  };

  /** One run of the accept job (`runAccept`), the return window of every order passed. */
  const acceptRun = async (name: string, gate: Gate, faults: readonly InvocationFault[]) => {
    const died = Promise.withResolvers<'died'>();
    const inv = new Invocation(name, faults, gate, trace, () => died.resolve('died'));
    trace.push(`${name}: the accept job runs at +${(clock - NOW) / 1000} s`);
    const deps: AcceptDeps = {
      ledger: acceptLedgerOf(ledger, inv, keys, leaseTaken),
      sources,
      backendFor: () => backendOf(platform, inv),
      failures: {
        park: (_message, failure) =>
          inv.call('sqs', 'park the accept', () => {
            acceptParked.push(failure);
          }),
      },
      now: () => clock,
      leaseMs: LEASE_MS,
    };
    const run = runAccept(deps, { limit: 10 }).then(
      (summary) => {
        const items = summary.items.map(
          (i) => `${i.externalId} ${i.result}${i.detail ? ` (${i.detail.slice(0, 160)})` : ''}`,
        );
        trace.push(`${name}: ${items.join('; ') || 'nothing due'}`);
      },
      (error: unknown) => {
        // The scheduled function fails; its next run takes the orders again.
        trace.push(`${name}: the run failed: ${(error as Error).message}`);
      },
    );
    await Promise.race([run, died.promise]);
  };

  /**
   * `connector reconcile --repair --yes` of this run's stuck adds; an order it leaves without a
   * conversion (`failed`), or with refunds held for it that no message applies, is sent again.
   */
  const repairRun = async (name: string, gate: Gate, into: Message[]) => {
    const inv = new Invocation(name, [], gate, trace, () => {});
    const gated = ledgerOf(ledger, inv);
    const client = {
      conversionInfo: ({ externalId }: { externalId?: string | undefined }) =>
        inv.call('platform', `conversionInfo ${externalId}`, () =>
          externalId === undefined ? undefined : (platform.find(externalId) as Conversion | undefined),
        ),
    };
    for (const externalId of purged) {
      const record = await gated.get(ledgerKey(PROGRAM, externalId));
      if (!record || !isStuckAdd(record, clock)) continue;
      const repair = await repairStuckAdd(gated, client, record, clock, true);
      trace.push(`${name}: reconcile --repair ${externalId} → ${repair.action}`);
      const held =
        repair.action === 'added' && Object.values(repair.record.refunds).some((r) => r.status === 'pending');
      const order = eventsOf(scenario, tag).find(
        (e) => e.type === 'OrderPlaced' && e.externalId === externalId,
      );
      if (order && (repair.action === 'failed' || held)) {
        const message = enqueue(order, into);
        trace.push(`${name}: sends order ${externalId} again as ${message.id}`);
      }
    }
  };

  /**
   * An operator settling a parked refund by hand: `dlq discard` is asked first (its prompt says what
   * it records); when it would record the refund settled by hand, the operator sets the conversion on
   * the platform to what the ledger's refunds imply, this one counted, then discards the message.
   * Else (or when the platform no longer takes the change: accepted) the message is replayed.
   */
  const settleRun = async (name: string, gate: Gate, p: Parked) => {
    const inv = new Invocation(name, [], gate, trace, () => {});
    const gated = ledgerOf(ledger, inv);
    const event = p.message.event;
    const entry: DiscardedMessage = {
      groupId: messageGroupId(PROGRAM, event.externalId),
      externalId: event.externalId,
      source: event.source,
      eventType: event.type,
      body: JSON.stringify(event),
    };
    const plan = await planDiscard({ ledger: () => gated, programs: () => [PROGRAM] }, entry);
    if (plan.kind !== 'settle') {
      trace.push(
        `${name}: dlq discard of ${p.message.id} would settle nothing (${plan.kind === 'delete' ? plan.why : plan.kind}): left for a replay`,
      );
      return;
    }
    const record = await gated.get(plan.key);
    const conversion = await inv.call('platform', `find ${event.externalId}`, () =>
      platform.find(event.externalId),
    );
    if (record && conversion && conversion.status !== 'refused') {
      const counted = countedRefunds(record);
      const target = record.originalAmount - counted.reduce((sum, r) => sum + r.amount, 0);
      const refuse = counted.some((r) => r.full) || target <= 0;
      // The platform's 422 (a worker beside the operator refused it, or the job accepted it): the
      // operator looks again, and replays the message unless the conversion is refused as wanted.
      const byHand = () =>
        inv
          .call(
            'platform',
            `by hand: ${refuse ? 'refuse' : `update ${target}`} ${conversion.id.slice(-2)}`,
            () => (refuse ? platform.refuse(conversion.id) : platform.updateAmount(conversion.id, target)),
          )
          .then(
            () => true,
            () => refuse && platform.find(event.externalId)?.status === 'refused',
          );
      if (!(await byHand())) {
        trace.push(`${name}: the platform would not take it by hand: left for a replay`);
        return;
      }
    }
    const settled = await settleByHand(gated, plan, new Date(clock));
    if (settled.kind === 'conflict') {
      trace.push(`${name}: dlq discard of ${p.message.id}: the record kept changing, nothing discarded`);
      return;
    }
    if (settled.kind === 'unchanged') {
      // A worker applied the refund while the operator worked: their change by hand may have landed
      // over the worker's. `connector status` says whether the two differ; the operator puts the
      // platform at the ledger's amount, unless a refund is being applied (its worker sets it).
      const now = await gated.get(plan.key);
      const shown = await inv.call('platform', `find ${event.externalId}`, () =>
        platform.find(event.externalId),
      );
      const quiet = now?.state === 'added' && !Object.values(now.refunds).some((r) => r.status === 'pending');
      if (now && quiet && shown?.status === 'pending' && shown.amount !== ledgerAmount(now)) {
        const amount = ledgerAmount(now);
        await inv
          .call('platform', `by hand: update ${amount} ${shown.id.slice(-2)}`, () =>
            platform.updateAmount(shown.id, amount),
          )
          .catch(() => undefined);
      }
    }
    p.replayed = true;
    discarded.add(`${event.externalId} ${plan.refundId}`);
    trace.push(
      `${name}: dlq discard of ${p.message.id} → ${settled.kind === 'settled' ? `refund ${plan.refundId} manual` : settled.why}`,
    );
  };
  const toSettleByHand = () => parked.filter((p) => !p.replayed && p.message.throttled === true);

  let faultNo = 0;
  let financeStatus: number | undefined;
  const events = eventsOf(scenario, tag);
  const refundEvents = events.filter((e) => e.type !== 'OrderPlaced');
  const nth = (n: number | null) => (n === null ? undefined : refundEvents[n % refundEvents.length]);
  const byHand = nth(scenario.settledByHand);
  const sentLater = new Set<ConnectorEvent>(
    scenario.sentLater === null ? [] : refundEvents.slice(scenario.sentLater % refundEvents.length),
  );
  const withheld: ConnectorEvent[] = [];
  const sendLater = (into: Message[]) => {
    for (const event of withheld.splice(0)) {
      const message = enqueue(event, into);
      trace.push(`the shop sends ${describe(event)} now: ${message.id}`);
    }
  };
  // The first delivery of the first order, when it is to die mid-add (`Scenario.repair`).
  const firstOrder = events.find((e) => e.type === 'OrderPlaced');
  let dying = scenario.repair && firstOrder ? firstOrder : undefined;
  for (const event of deliveriesOf(scenario, events)) {
    if (sentLater.has(event)) {
      withheld.push(event);
      continue;
    }
    const message = enqueue(event, later);
    if (event === byHand && !messages.some((m) => m.throttled)) {
      // Received 5 times before, each answered 429: this receive is its queue's last.
      message.receives = MAX_RECEIVES - 1;
      message.throttled = true;
    }
  }

  for (let epoch = 0; epoch < scenario.epochs; epoch++) {
    trace.push(`— epoch ${epoch + 1} at +${(clock - NOW) / 1000} s`);
    const gate = new Gate(scheduler);
    const queue = later;
    later = [];
    if (epoch > 0 && epoch === scenario.epochs - 1) sendLater(queue);
    const worker = async (w: number) => {
      for (let message = queue.shift(); message; message = queue.shift()) {
        let faults = scenario.faults[faultNo++] ?? [];
        if (scenario.repair && message.event === dying) {
          dying = undefined;
          faults = [
            { at: scenario.repair.at, fault: scenario.repair.after ? 'crash-after' : 'crash-before' },
          ];
        }
        await deliver(message, `w${w}.${++invocationNo}`, gate, faults);
      }
    };
    const actors: Promise<unknown>[] = Array.from({ length: scenario.workers }, (_, w) => worker(w + 1));
    if (epoch === 0 && scenario.finance) {
      actors.push(
        financeRequest(gate, scenario.finance, queue).then((status) => {
          financeStatus = status;
        }),
      );
    }
    scenario.accepts.forEach((run, i) => {
      if (run.at === epoch) actors.push(acceptRun(`accept${i + 1}`, gate, run.faults));
    });
    if (scenario.repair && epoch > 0 && epoch === scenario.epochs - 1) {
      actors.push(repairRun('repair', gate, queue));
    }
    for (const p of toSettleByHand()) actors.push(settleRun('operator', gate, p));
    const all = Promise.all(actors);
    await (scheduler ? scheduler.waitFor(all, gate.act) : all);
    later.push(...queue);
    // The last epoch of a scenario with a repair starts once a stuck add is old enough for it.
    clock +=
      scenario.repair && epoch === scenario.epochs - 2 ? Math.max(epochJumpMs, REPAIR_JUMP_MS) : epochJumpMs;
  }

  const calm = new Gate(undefined);
  // The accept job's runs in the drain, each before its round (those past the last one after it).
  const acceptsLeft = scenario.accepts
    .map((run, i) => ({ ...run, name: `accept${i + 1}` }))
    .filter((run) => run.at >= scenario.epochs);
  const acceptsBefore = async (round: number) => {
    for (const run of acceptsLeft.filter((r) => r.at - scenario.epochs <= round)) {
      acceptsLeft.splice(acceptsLeft.indexOf(run), 1);
      await acceptRun(run.name, calm, run.faults);
    }
  };
  for (let round = 0; round < DRAIN_ROUNDS; round++) {
    await acceptsBefore(round);
    sendLater(later);
    // A scheduled `reconcile --repair --yes`: it takes a stuck add once it is old enough.
    if (scenario.repair) await repairRun(`repair.d${round + 1}`, calm, later);
    if (later.length === 0) {
      for (const p of toSettleByHand()) await settleRun(`operator.d${round + 1}`, calm, p);
    }
    if (later.length === 0) {
      const toReplay = parked.filter((p) => !p.replayed);
      // A stuck add waits for its repair, which takes it once it is old enough.
      const stuck = await stuckAdds(ledger, purged);
      if (toReplay.length === 0 && !stuck) break;
      for (const p of toReplay) {
        p.replayed = true;
        trace.push(
          `— replay of ${p.message.id} from the DLQ (${p.failure.failureClass}: ${p.failure.reason.slice(0, 160)})`,
        );
        const replay = { id: `m${++messageNo}`, event: p.message.event, receives: 0 };
        messages.push(replay);
        later.push(replay);
      }
    }
    trace.push(`— drain ${round + 1} at +${(clock - NOW) / 1000} s`);
    const queue = later;
    later = [];
    for (const message of queue) await deliver(message, `d${round + 1}`, calm, []);
    clock += EPOCH_JUMP_MS;
  }
  const accepting = scenario.accepts.length > 0;
  if (accepting) {
    // The hourly run after all that, past any hold of a send left unconfirmed: every live order is due.
    await acceptsBefore(Number.POSITIVE_INFINITY);
    clock += UNCONFIRMED_SETTLE_MS;
    await acceptRun('accept.last', calm, []);
  }

  const records = new Map<string, OrderRecord | undefined>();
  for (let o = 0; o < scenario.orders.length; o++) {
    const externalId = externalIdOf(tag, o);
    records.set(externalId, await ledger.get(ledgerKey(PROGRAM, externalId)));
  }
  return {
    platform,
    records,
    queued,
    parked,
    left: later,
    messages,
    reports,
    trace,
    ...(financeStatus === undefined ? {} : { financeStatus }),
    accepting,
    acceptParked,
    seen,
    discarded,
  };
}

/**
 * Where the ledger says a live conversion's amount is: its `currentAmount`, or, once a refund was
 * settled by hand (which sets no amount: see `RefundStatus`), the order's less its counted refunds.
 */
function ledgerAmount(record: OrderRecord): number {
  if (!Object.values(record.refunds).some((r) => r.status === 'manual')) return record.currentAmount;
  return record.originalAmount - countedRefunds(record).reduce((sum, r) => sum + r.amount, 0);
}

/** Whether a purged order's record is still `adding`: its repair is yet to come. */
async function stuckAdds(ledger: Ledger, purged: ReadonlySet<string>): Promise<boolean> {
  for (const externalId of purged) {
    if ((await ledger.get(ledgerKey(PROGRAM, externalId)))?.state === 'adding') return true;
  }
  return false;
}

function describe(event: ConnectorEvent): string {
  switch (event.type) {
    case 'OrderPlaced':
      return `order ${event.externalId} ${event.amount}`;
    case 'OrderCancelled':
      return `cancellation of ${event.externalId}`;
    case 'OrderRefunded':
      return `refund ${event.refundId} of ${event.externalId} ${event.full ? 'full' : event.amount}${event.origin === 'finance' ? ' (finance)' : ''}`;
  }
}

/**
 * What the queued events say of each order, against the platform and the ledger: one conversion per
 * order, at the order's amount less its refunds (each refund id once), or refused (or never added)
 * when a refund is full, the order cancelled or its refunds reach its amount; the ledger agreeing,
 * no lease or unconfirmed send left; every queued refund id in the ledger; nothing left in the queue
 * and nothing parked for good. With the accept job: it took no lease on an order with a refund
 * pending, a send unconfirmed or the platform elsewhere than the ledger (`RunResult.seen`); an
 * accepted conversion keeps the amount it was accepted at, the ledger's, and the partial refunds
 * that came after are recorded `late` (only there) at that amount and listed once by
 * `late-refunds`; after its last run every live conversion is accepted, nothing parked. The
 * violations, empty when none.
 */
export function verdict(result: RunResult): string[] {
  const problems: string[] = [...result.seen];
  const byOrder = new Map<string, ConnectorEvent[]>();
  for (const event of result.queued) {
    byOrder.set(event.externalId, [...(byOrder.get(event.externalId) ?? []), event]);
  }
  for (const [externalId, record] of result.records) {
    const events = byOrder.get(externalId) ?? [];
    const conversions = result.platform.of(externalId);
    const placed = events.find((e) => e.type === 'OrderPlaced');
    const refunds = new Map<string, { full: boolean; amount: number }>();
    for (const e of events) {
      if (e.type === 'OrderCancelled') refunds.set(CANCELLATION_REFUND_ID, { full: true, amount: 0 });
      if (e.type === 'OrderRefunded' && !refunds.has(e.refundId)) {
        refunds.set(e.refundId, { full: e.full, amount: e.full ? 0 : (e.amount ?? 0) });
      }
    }
    const say = (what: string) => problems.push(`order ${externalId}: ${what}`);
    const shownConversions = conversions.map((c) => `${c.status} ${c.amount}`).join(', ') || 'none';
    if (conversions.length > 1)
      say(`${conversions.length} conversions on the platform (${shownConversions})`);
    if (!record) {
      if (events.length > 0) say('no ledger record, though events of it were queued');
      if (conversions.length > 0) say(`conversions without a ledger record: ${shownConversions}`);
      continue;
    }
    const ids = Object.keys(record.refunds);
    for (const id of refunds.keys()) if (!ids.includes(id)) say(`refund ${id} queued, not in the ledger`);
    for (const id of ids) if (!refunds.has(id)) say(`refund ${id} in the ledger, never queued`);
    // A mark holds the accept of a live conversion; on a refused one nothing sent can move it. The
    // mark of a refund whose parked message an operator discarded outlives that message: only the
    // accept job's look-up clears it then (and holds the conversion should the platform be off). A
    // late refund's holds nothing: its conversion no longer changes, and only the marks of refunds
    // applied are read (by the accept job's look-up, by a delivery again).
    const live = record.state === 'added';
    if (live && record.unconfirmedSend) say('the record keeps an unconfirmed send');
    for (const r of Object.values(record.refunds)) {
      const gone =
        r.status === 'late' || (!result.accepting && result.discarded.has(`${externalId} ${r.refundId}`));
      if (live && r.unconfirmedSend && !gone) say(`refund ${r.refundId} keeps an unconfirmed send`);
      if ((r.status === 'skipped' || r.status === 'rejected') && !r.outcome)
        say(`refund ${r.refundId} ${r.status} with no reason`);
    }
    if (record.leaseOwner !== undefined || record.state === 'adding') {
      say(`left ${record.state} under a lease of ${record.leaseOwner}`);
    }
    if (!placed) {
      if (record.state !== 'awaiting') say(`state ${record.state}, its order never came (awaiting expected)`);
      if (conversions.length > 0) say(`conversions though the order never came: ${shownConversions}`);
      for (const r of Object.values(record.refunds)) {
        if (r.status !== 'pending')
          say(`refund ${r.refundId} ${r.status}, its order never came (held expected)`);
      }
      continue;
    }
    const [conversion] = conversions;
    // Partial refunds that came after the accept are late (the amount no longer changes): counted
    // nowhere on the platform, listed for finance.
    const late = Object.values(record.refunds).filter((r) => r.status === 'late');
    const acceptedAmount = conversion?.acceptedAmount;
    if (late.length > 0 && acceptedAmount === undefined) {
      say(`refunds ${late.map((r) => r.refundId).join(', ')} late, though the conversion was never accepted`);
    }
    const because = result.platform.locks ? 'locked' : 'accepted';
    for (const r of late) {
      if (r.late?.because !== because || r.late.conversionAmount !== acceptedAmount) {
        say(
          `late refund ${r.refundId} recorded ${r.late?.because} at ${r.late?.conversionAmount}, the conversion accepted at ${acceptedAmount}`,
        );
      }
    }
    const listed = lateRefunds([record]).map((row) => row.refundId);
    for (const r of late) {
      const times = listed.filter((id) => id === r.refundId).length;
      if (times !== 1) say(`late refund ${r.refundId} listed ${times} times by late-refunds`);
    }
    if (record.acceptedAt !== undefined && acceptedAmount === undefined) {
      say('the ledger says accepted, the platform never accepted it');
    }
    if (record.acceptError !== undefined) say(`the accept job gave up: ${record.acceptError}`);
    if (
      acceptedAmount !== undefined &&
      conversion?.status === 'accepted' &&
      conversion.amount !== acceptedAmount
    ) {
      say(`accepted at ${acceptedAmount}, changed to ${conversion.amount} since`);
    }

    const amount = placed.amount;
    const partial = [...refunds]
      .filter(([id, r]) => !r.full && refundOf(record, id)?.status !== 'late')
      .reduce((sum, [, r]) => sum + r.amount, 0);
    const covered =
      [...refunds].some(([id, r]) => r.full && refundOf(record, id)?.status !== 'late') || partial >= amount;
    if (covered) {
      const neverAdded = record.state === 'skipped' && conversions.length === 0;
      const refused = record.state === 'refused' && conversion?.status === 'refused';
      if (!neverAdded && !refused) {
        say(`refunded in full or cancelled: ledger ${record.state}, platform ${shownConversions}`);
      }
    } else {
      const expected = amount - partial;
      if (record.state !== 'added' || ledgerAmount(record) !== expected) {
        say(
          `ledger ${record.state} at ${ledgerAmount(record)}, ${expected} expected (${amount} − ${partial})`,
        );
      }
      // After the accept job's last run every live conversion is accepted, at its amount.
      const status = result.accepting ? 'accepted' : 'pending';
      if (conversion?.status !== status || conversion.amount !== expected) {
        say(`platform ${shownConversions}, ${status} at ${expected} expected (${amount} − ${partial})`);
      }
      if (result.accepting && record.acceptedAt === undefined) {
        say('not accepted in the ledger after the accept job ran with nothing left in the queue');
      }
    }
    if (conversion && record.conversionId !== undefined && record.conversionId !== conversion.id) {
      say(`ledger names conversion ${record.conversionId}, the platform's is ${conversion.id}`);
    }
    for (const r of Object.values(record.refunds)) {
      if (r.status === 'pending') say(`refund ${r.refundId} still pending`);
    }
  }
  for (const message of result.left) {
    problems.push(`${message.id} (${describe(message.event)}) still in the queue after the drain`);
  }
  // Each message's last word: done (applied, a duplicate, held for its order…), parked, or late.
  for (const message of result.messages.filter((m) => !m.purged)) {
    const last = result.reports.get(message.id)?.status;
    if (last !== 'done' && last !== 'parked' && last !== 'late_refund') {
      problems.push(`${message.id} (${describe(message.event)}) ended ${last ?? 'unreported'}`);
    }
  }
  // Every fault injected is one a retry gets past: none is a reason to park a message for good.
  for (const p of result.parked.filter((x) => x.failure.failureClass !== 'transient')) {
    problems.push(
      `${p.message.id} (${describe(p.message.event)}) parked as ${p.failure.failureClass}: ${p.failure.reason}`,
    );
  }
  for (const failure of result.acceptParked) {
    problems.push(`the accept job parked order ${failure.externalId}: ${failure.reason}`);
  }
  for (const p of result.parked.filter((x) => !x.replayed)) {
    problems.push(`${p.message.id} (${describe(p.message.event)}) parked for good: ${p.failure.reason}`);
  }
  return problems;
}

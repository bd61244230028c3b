import fc from 'fast-check';
import { SourceConfig } from '../../shared/config/sources.ts';
import { ConnectorEvent, type ConnectorEventInput } from '../../shared/domain/events.ts';
import { PermanentError, TransientError } from '../../shared/errors.ts';
import { submitFinanceRefund } from '../../shared/finance.ts';
import { ledgerKey, type OrderRecord, type RefundReservations } from '../../shared/ledger.ts';
import type {
  AddConversionInput,
  ConversionBackend,
  FailureAttributes,
  Ledger,
  PlatformConversion,
  ReservationLedger,
} from '../../shared/ports.ts';
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

/** Scenarios of one or two orders, two or three workers, faults at up to two calls per invocation. */
export const scenarios: fc.Arbitrary<Scenario> = fc.record({
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
  status: 'pending' | 'refused';
}

/**
 * The platform's conversions as the sandbox keeps them (sandbox/actions.ts): Conversion info gives
 * the oldest of an externalId; the amount changes only while pending (422 else); a second refusal is
 * a 422; a second add of an externalId is a 409 (`reject`) or a second conversion (`allow`).
 */
export class ModelPlatform {
  readonly conversions: StoredConversion[] = [];
  readonly #options: Pick<Scenario, 'duplicates' | 'bareAdds'>;

  constructor(options: Pick<Scenario, 'duplicates' | 'bareAdds'>) {
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
    return found ? { ...found, isLocked: false } : undefined;
  }

  updateAmount(id: string, amount: number): void {
    const c = this.#byId(id);
    if (c.status !== 'pending') {
      throw new PermanentError(`conversions.update answered 422: conversion ${id} is ${c.status}`, {
        status: 422,
      });
    }
    c.amount = amount;
  }

  refuse(id: string): void {
    const c = this.#byId(id);
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
function ledgerOf(inner: Ledger & ReservationLedger, inv: Invocation): Ledger & ReservationLedger {
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
      write(`ledger.update ${record.externalId} v${record.version} ${record.state}`, record, () =>
        inner.update(record),
      ),
    list: (program) => inner.list(program),
    reservationsOf: (key) =>
      inv.call('ledger', `reservations.get ${shortKey(key)}`, () => inner.reservationsOf(key)),
    saveReservations: (reservations: RefundReservations) =>
      write(`reservations.save v${reservations.version}`, reservations, () =>
        inner.saveReservations(reservations),
      ),
  };
}

function shortKey(key: string): string {
  return key.slice(key.indexOf('#') + 1);
}

function backendOf(platform: ModelPlatform, inv: Invocation): ConversionBackend {
  return {
    add: (input) =>
      inv.call('platform', `add ${input.externalId} ${input.amount}`, () => platform.add(input)),
    find: (_program, externalId) =>
      inv.call('platform', `find ${externalId}`, () => platform.find(externalId)),
    updateAmount: (_program, id, amount) =>
      inv.call('platform', `update ${id.slice(-2)} ${amount}`, () => platform.updateAmount(id, amount)),
    refuse: (_program, id) => inv.call('platform', `refuse ${id.slice(-2)}`, () => platform.refuse(id)),
    accept: async () => {
      throw new Error('no accept in this model');
    },
  };
}

// The queue, the workers and the runs.

interface Message {
  readonly id: string;
  readonly event: ConnectorEvent;
  receives: number;
}

interface Parked {
  readonly message: Message;
  readonly failure: FailureAttributes;
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
}

/**
 * Plays `scenario` on `ledger` (fresh keys: `tag` names this run's orders) and a fresh platform, the
 * epochs' calls in the order `scheduler` picks (undefined: the calls' own order, for a replayed
 * scenario), then drains the queue without faults.
 */
export async function playScenario(
  scenario: Scenario,
  ledger: Ledger & ReservationLedger,
  tag: string,
  scheduler: fc.Scheduler | undefined,
  /** How far the clock moves between epochs (the drain's rounds always pass every window). */
  epochJumpMs = EPOCH_JUMP_MS,
): Promise<RunResult> {
  const platform = new ModelPlatform(scenario);
  const trace: string[] = [];
  const reports = new Map<string, RecordReport>();
  const parked: Parked[] = [];
  const queued: ConnectorEvent[] = [];
  let clock = NOW;
  let messageNo = 0;
  let invocationNo = 0;
  let later: Message[] = [];
  const messages: Message[] = [];
  const enqueue = (event: ConnectorEvent, into: Message[]) => {
    queued.push(event);
    const message = { id: `m${++messageNo}`, event, receives: 0 };
    messages.push(message);
    into.push(message);
    return message.id;
  };

  /** One receive of `message` by worker instance `name`; resolves once it is done, given back or lost. */
  const deliver = async (message: Message, name: string, gate: Gate, faults: readonly InvocationFault[]) => {
    const died = Promise.withResolvers<'died'>();
    const inv = new Invocation(name, faults, gate, trace, () => died.resolve('died'));
    message.receives += 1;
    trace.push(`${name} receives ${message.id} (${describe(message.event)}), receive ${message.receives}`);
    const deps: BatchDeps = {
      ledger: ledgerOf(ledger, inv),
      sources: new Map([[SOURCE.id, SOURCE]]),
      backendFor: () => backendOf(platform, inv),
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
        sources: new Map([[SOURCE.id, SOURCE]]),
        ledger: ledgerOf(ledger, inv),
        reservations: ledgerOf(ledger, inv),
        queue: {
          send: async (event) => enqueue(event, into),
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

  let faultNo = 0;
  let financeStatus: number | undefined;
  for (const event of deliveriesOf(scenario, eventsOf(scenario, tag))) enqueue(event, later);

  for (let epoch = 0; epoch < scenario.epochs; epoch++) {
    trace.push(`— epoch ${epoch + 1} at +${(clock - NOW) / 1000} s`);
    const gate = new Gate(scheduler);
    const queue = later;
    later = [];
    const worker = async (w: number) => {
      for (let message = queue.shift(); message; message = queue.shift()) {
        const faults = scenario.faults[faultNo++] ?? [];
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
    const all = Promise.all(actors);
    await (scheduler ? scheduler.waitFor(all, gate.act) : all);
    later.push(...queue);
    clock += epochJumpMs;
  }

  const calm = new Gate(undefined);
  for (let round = 0; round < DRAIN_ROUNDS; round++) {
    if (later.length === 0) {
      const toReplay = parked.filter((p) => !p.replayed);
      if (toReplay.length === 0) break;
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
  };
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
 * and nothing parked for good. The violations, empty when none.
 */
export function verdict(result: RunResult): string[] {
  const problems: string[] = [];
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
    // A mark holds the accept of a live conversion; on a refused one nothing sent can move it.
    const live = record.state === 'added';
    if (live && record.unconfirmedSend) say('the record keeps an unconfirmed send');
    for (const r of Object.values(record.refunds)) {
      if (live && r.unconfirmedSend) say(`refund ${r.refundId} keeps an unconfirmed send`);
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
    const amount = placed.amount;
    const partial = [...refunds.values()].filter((r) => !r.full).reduce((sum, r) => sum + r.amount, 0);
    const covered = [...refunds.values()].some((r) => r.full) || partial >= amount;
    const [conversion] = conversions;
    if (covered) {
      const neverAdded = record.state === 'skipped' && conversions.length === 0;
      const refused = record.state === 'refused' && conversion?.status === 'refused';
      if (!neverAdded && !refused) {
        say(`refunded in full or cancelled: ledger ${record.state}, platform ${shownConversions}`);
      }
    } else {
      const expected = amount - partial;
      if (record.state !== 'added' || record.currentAmount !== expected) {
        say(
          `ledger ${record.state} at ${record.currentAmount}, ${expected} expected (${amount} − ${partial})`,
        );
      }
      if (conversion?.status !== 'pending' || conversion.amount !== expected) {
        say(`platform ${shownConversions}, pending at ${expected} expected (${amount} − ${partial})`);
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
  for (const message of result.messages) {
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
  for (const p of result.parked.filter((x) => !x.replayed)) {
    problems.push(`${p.message.id} (${describe(p.message.event)}) parked for good: ${p.failure.reason}`);
  }
  return problems;
}

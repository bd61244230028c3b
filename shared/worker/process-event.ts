import type { SourceConfig } from '../config/sources.ts';
import {
  type ConnectorEvent,
  connectorRefundId,
  type OrderCancelled,
  type OrderPlaced,
  type OrderRefunded,
} from '../domain/events.ts';
import { isConnectorError, PermanentError, TransientError } from '../errors.ts';
import {
  countedRefunds,
  ledgerKey,
  type OrderRecord,
  type RefundRecord,
  recordRefund,
  refundOf,
} from '../ledger.ts';
import { formatMinor } from '../money.ts';
import type { CallOptions, ConversionBackend, Ledger, PlatformConversion } from '../ports.ts';
import { decideAttribution, toApiDate } from './attribution.ts';

export interface WorkerDeps {
  readonly ledger: Ledger;
  readonly sources: ReadonlyMap<string, SourceConfig>;
  readonly backendFor: (source: SourceConfig) => ConversionBackend;
  /** Epoch ms. */
  readonly now: () => number;
  /** Identifies this worker in leases. */
  readonly workerId: string;
  /**
   * How long a lease on an in-flight add lasts. It must outlast any add call (bounded by the
   * invocation's deadline): a worker that died is detected when its lease expires.
   */
  readonly leaseMs: number;
  /**
   * How long the lease is kept after an add that failed without a clear answer (no answer in time,
   * the connection lost after sending, a 500/502/504): the platform may still be recording it, and
   * Conversion info would not show it yet. After this the order is looked up before any new add.
   * Use `settleMsFor(the client's timeoutMs)`. @default `settleMsFor(5000)` (10 s)
   */
  readonly settleMs?: number;
  /**
   * The verification window after an add without a clear answer: no new add for the order until the
   * platform has been asked (Conversion info) and has shown nothing for this long after that add. A
   * slow platform may record an add minutes after the connector gave up on it. Spent with the
   * message hidden (SQS visibility) and the order leased in the ledger, never asleep in a Lambda.
   * @default 600000 (10 minutes)
   */
  readonly verifyMs?: number;
}

/** Default verification window: see `WorkerDeps.verifyMs`. */
export const DEFAULT_VERIFY_MS = 600_000;

/** Shortest settle period: a platform's write may land a little after its answer was due. */
const MIN_SETTLE_MS = 5_000;

/**
 * The settle period for a client whose requests time out after `clientTimeoutMs`: twice that, and at
 * least 5 s. It narrows the window for a duplicate add, and cannot close it: only a uniqueness check
 * on the platform does, should it take longer than this to record an add.
 */
export function settleMsFor(clientTimeoutMs: number): number {
  return Math.max(2 * clientTimeoutMs, MIN_SETTLE_MS);
}

/**
 * Leeway for this worker's own lease: the wait it asked for comes back as a timer that may fire a
 * hair early. Far below any add's duration, so it never cuts into an add still in flight.
 */
const OWN_LEASE_LEEWAY_MS = 100;

/** Reason a partial refund of a conversion imported without an amount is parked. */
export const NO_PLATFORM_AMOUNT =
  "the platform's conversion has no amount: cannot compute the amount after a partial refund; apply it by hand " +
  '(a full refund or a cancellation can still refuse the conversion), then discard this message';

export type OutcomeResult =
  | 'added'
  | 'reconciled'
  | 'duplicate'
  | 'skipped'
  | 'refund_applied'
  | 'refused'
  | 'refund_duplicate'
  | 'refund_skipped'
  /** Held in the ledger until its order is added (it came first, or the order is in the DLQ). */
  | 'refund_waiting'
  | 'already_refused';

export interface Outcome {
  readonly result: OutcomeResult;
  readonly detail?: string;
  readonly conversionId?: string;
  readonly amount?: number;
}

/** The refund a cancellation counts as: an id no shop or finance refund can carry. */
const CANCELLATION_REFUND_ID = connectorRefundId('cancellation');

/** Applies one event to the platform, exactly once, using the ledger. Throws classified errors. */
export async function processEvent(
  deps: WorkerDeps,
  received: ConnectorEvent,
  call: CallOptions = {},
): Promise<Outcome> {
  const source = deps.sources.get(received.source);
  if (!source) throw new PermanentError(`source "${received.source}" is not configured`);
  const event = withPrefix(source, received);
  switch (event.type) {
    case 'OrderPlaced':
      return placeOrder(deps, source, event, call);
    case 'OrderRefunded':
      return refundOrder(deps, source, event, call);
    case 'OrderCancelled':
      return refundOrder(deps, source, asCancellationRefund(event), call);
  }
}

/** The shop's order id as the platform and the ledger know it. Finance already names that id. */
function withPrefix(source: SourceConfig, event: ConnectorEvent): ConnectorEvent {
  if (!source.externalIdPrefix) return event;
  if (event.type === 'OrderRefunded' && event.origin === 'finance') return event;
  return { ...event, externalId: `${source.externalIdPrefix}${event.externalId}` };
}

function asCancellationRefund(event: OrderCancelled): OrderRefunded {
  return {
    ...event,
    type: 'OrderRefunded',
    refundId: CANCELLATION_REFUND_ID,
    full: true,
    origin: 'shop',
    reason: event.reason ? `order cancelled: ${event.reason}` : 'order cancelled',
  };
}

async function placeOrder(
  deps: WorkerDeps,
  source: SourceConfig,
  event: OrderPlaced,
  call: CallOptions,
): Promise<Outcome> {
  const backend = deps.backendFor(source);
  const key = ledgerKey(source.program, event.externalId);
  const iso = () => new Date(deps.now()).toISOString();

  // Up to three rounds: a lost race on the conditional write re-reads and decides again.
  for (let round = 0; round < 3; round++) {
    const existing = await deps.ledger.get(key);
    let record: OrderRecord;

    if (existing && existing.state !== 'awaiting' && existing.source !== source.id && !existing.imported) {
      throw new PermanentError(
        `order ${event.externalId} from source "${source.id}" has the externalId of an order from source ` +
          `"${existing.source}" in program ${source.program}: set "externalIdPrefix" on one of the two ` +
          'sources to keep their order ids apart, then replay this message',
      );
    }
    if (existing && existing.state !== 'awaiting') {
      if (existing.state === 'added' || existing.state === 'skipped' || existing.state === 'refused') {
        return {
          result: 'duplicate',
          detail: `order already ${existing.state}`,
          conversionId: existing.conversionId,
        };
      }
      if (existing.state === 'adding' && !leaseOver(deps, existing)) {
        throw new TransientError(
          existing.leaseOwner === deps.workerId
            ? 'the last Conversion Add for this order got no clear answer: waiting for the platform to settle'
            : 'a Conversion Add for this order is in flight in another worker',
          { retryAfterMs: (existing.leaseUntil ?? 0) - deps.now() },
        );
      }
      // An expired lease (a worker died mid-call, or an unclear add settled) or an earlier failure:
      // take the lease, then ask the platform whether the add went through before adding again.
      record = {
        ...existing,
        state: 'adding',
        leaseOwner: deps.workerId,
        leaseUntil: deps.now() + deps.leaseMs,
      };
      if (!(await deps.ledger.update(record))) continue;
      const found = await backend
        .find(source.program, event.externalId, call)
        .catch(async (error: unknown) => {
          await releaseLease(deps, record);
          throw error;
        });
      if (found) {
        const outcome = await settleAdded(deps, record, found.id, 'reconciled');
        // Refunds recorded while the order sat in the DLQ apply now, to the conversion found.
        if (outcome.result === 'reconciled' && countedRefunds(record).some((r) => r.status === 'pending')) {
          return applyRefunds(deps, backend, source, record, undefined, call);
        }
        return { ...outcome, detail: 'conversion found on the platform after an interrupted add' };
      }
      // A lease that ended without an answer (a worker died mid-add) is as unclear as a timeout.
      const unclearAt =
        record.unclearAddAt ?? (existing.state === 'adding' ? existing.leaseUntil : undefined);
      const verifyMs = deps.verifyMs ?? DEFAULT_VERIFY_MS;
      const left = unclearAt === undefined || verifyMs <= 0 ? 0 : unclearAt + verifyMs - deps.now();
      if (left > 0) {
        // An add may still land: ask again when the window ends, the message hidden until then.
        record.unclearAddAt = unclearAt;
        record.leaseUntil = deps.now() + left;
        await deps.ledger.update(record).catch(() => undefined);
        throw new TransientError(
          `the last Conversion Add for this order got no clear answer and the platform shows nothing yet: no new add before ${new Date(deps.now() + left).toISOString()} (verification window)`,
          { retryAfterMs: left, ambiguous: true },
        );
      }
      record.unclearAddAt = undefined;
      // Nothing on the platform: the add goes out with this event's data (a corrected order replayed
      // after a failure), written to the ledger first so the ledger always holds what was sent.
      const decision = decideAttribution(event, source.unattributed);
      if (decision.kind !== 'skip') takeOrder(record, event, decision.kind);
      if (!(await deps.ledger.update(record))) continue;
    } else {
      const decision = decideAttribution(event, source.unattributed);
      const base: OrderRecord = existing
        ? { ...existing, source: source.id, state: 'adding' }
        : {
            key,
            program: source.program,
            externalId: event.externalId,
            source: source.id,
            state: 'adding',
            version: 0,
            originalAmount: event.amount,
            currentAmount: event.amount,
            currency: event.currency,
            refunds: {},
            createdAt: iso(),
            updatedAt: iso(),
          };
      if (decision.kind === 'skip') {
        const skipped: OrderRecord = {
          ...base,
          state: 'skipped',
          skipReason: decision.reason,
          originalAmount: event.amount,
          currentAmount: event.amount,
          currency: event.currency,
        };
        settleHeldRefunds(
          skipped,
          'skipped',
          `order was skipped (${decision.reason}): no conversion to change`,
          iso(),
        );
        if (!(await (existing ? deps.ledger.update(skipped) : deps.ledger.create(skipped)))) continue;
        return { result: 'skipped', detail: decision.reason };
      }
      record = { ...base, leaseOwner: deps.workerId, leaseUntil: deps.now() + deps.leaseMs };
      takeOrder(record, event, decision.kind);
      if (existing) {
        rejectForeignRefunds(record, event, iso());
        const cancelled = refundsCoverOrder(record);
        if (cancelled) {
          record.state = 'skipped';
          record.skipReason = cancelled;
          record.currentAmount = 0;
          record.leaseOwner = undefined;
          record.leaseUntil = undefined;
          settleHeldRefunds(record, 'applied', cancelled, iso());
          if (!(await deps.ledger.update(record))) continue;
          return { result: 'skipped', detail: cancelled };
        }
      }
      if (!(await (existing ? deps.ledger.update(record) : deps.ledger.create(record)))) continue;
    }

    return addConversion(deps, backend, source, event, record, call);
  }
  throw new TransientError('the ledger record kept changing under this worker; will retry');
}

/**
 * Writes the order's data into the record, as the add will send it: the amount is the order's minus
 * the refunds already recorded against it (refunds that came before the order).
 */
function takeOrder(record: OrderRecord, event: OrderPlaced, kind: 'tracking' | 'manual'): void {
  record.kind = kind;
  record.originalAmount = event.amount;
  record.currency = event.currency;
  record.currentAmount = event.amount - countedRefunds(record).reduce((sum, r) => sum + r.amount, 0);
}

/**
 * Held refunds the order shows were not its own: a shop refund from another source, or one in
 * another currency. They are rejected with the reason; the order goes ahead.
 */
function rejectForeignRefunds(record: OrderRecord, event: OrderPlaced, at: string): void {
  for (const refund of countedRefunds(record)) {
    if (refund.status !== 'pending') continue;
    let why: string | undefined;
    if (refund.origin === 'shop' && refund.source !== undefined && refund.source !== event.source) {
      why = `refund from source "${refund.source}" for an order of source "${event.source}": not applied`;
    } else if (refund.currency && refund.currency !== event.currency) {
      why = `refund currency ${refund.currency} differs from the order's ${event.currency}`;
    }
    if (why) {
      refund.status = 'rejected';
      refund.outcome = why;
      refund.appliedAt = at;
    }
  }
  record.currentAmount = record.originalAmount - countedRefunds(record).reduce((sum, r) => sum + r.amount, 0);
}

/** Why an order whose refunds came first is never added (a cancellation, or refunds of it all), if so. */
function refundsCoverOrder(record: OrderRecord): string | undefined {
  const counted = countedRefunds(record);
  if (counted.some((r) => r.refundId === CANCELLATION_REFUND_ID))
    return 'cancelled before the order arrived: never added';
  if (counted.some((r) => r.full) || (counted.length > 0 && record.currentAmount <= 0)) {
    return 'refunded in full before the order arrived: never added';
  }
  return undefined;
}

/** Closes the refunds an order held when it turns out to need no conversion. */
function settleHeldRefunds(
  record: OrderRecord,
  status: 'applied' | 'skipped',
  outcome: string,
  at: string,
): void {
  for (const refund of Object.values(record.refunds)) {
    if (refund.status !== 'pending') continue;
    refund.status = status;
    refund.outcome = outcome;
    refund.appliedAt = at;
    if (status === 'applied') refund.resultingAmount = 0;
  }
  record.awaitingSince = undefined;
}

async function addConversion(
  deps: WorkerDeps,
  backend: ConversionBackend,
  source: SourceConfig,
  event: OrderPlaced,
  record: OrderRecord,
  call: CallOptions,
): Promise<Outcome> {
  const decision = decideAttribution(event, source.unattributed);
  if (decision.kind === 'skip') {
    // A failed record re-read under a policy that now skips: settle it as skipped.
    record.state = 'skipped';
    record.skipReason = decision.reason;
    await deps.ledger.update(record);
    return { result: 'skipped', detail: decision.reason };
  }
  let id: string | undefined;
  try {
    const answer = await backend.add(
      {
        program: source.program,
        rule: source.rule,
        externalId: event.externalId,
        kind: decision.kind,
        // What the ledger holds (written before this call), never the event's own figures.
        amount: record.currentAmount,
        currency: record.currency ?? event.currency,
        ...(decision.kind === 'tracking'
          ? { cids: decision.cids, ip: decision.ip }
          : { affiliateTrackingId: decision.affiliateTrackingId }),
        customerId: event.customerId,
        voucher: event.vouchers[0],
        products: event.productIds.length > 0 ? event.productIds : undefined,
        paymentMethod: event.paymentMethod,
        date: toApiDate(event.orderDate),
        subId: event.subId,
      },
      call,
    );
    id = answer.id;
  } catch (error) {
    if (isConnectorError(error) && error.failureClass === 'permanent' && error.status === 409) {
      // The platform already has this externalId: adopt that conversion.
      const found = await backend.find(source.program, event.externalId, call);
      if (found) return settleAdded(deps, record, found.id, 'reconciled');
    }
    if (isConnectorError(error) && error.failureClass !== 'transient') {
      record.state = 'failed';
      record.lastError = error.message;
    }
    if (isConnectorError(error) && error.ambiguous) {
      // The platform may still be recording this add: Conversion info would not show it yet, and an
      // add now would record it twice. Keep the lease until it settles; the message comes back then
      // and looks the order up first.
      const settleMs = deps.settleMs ?? settleMsFor(5_000);
      record.unclearAddAt = deps.now();
      record.leaseOwner = deps.workerId;
      record.leaseUntil = deps.now() + settleMs;
      await deps.ledger.update(record).catch(() => undefined);
      throw new TransientError(
        `${error.message}; the order is looked up on the platform in ${settleMs} ms before any new add`,
        {
          status: error.status,
          platformMessage: error.platformMessage,
          retryAfterMs: settleMs,
          ambiguous: true,
          cause: error,
        },
      );
    }
    // Nothing reached the platform (429, 503, connection refused), or the add failed for good: expire
    // the lease so that the next attempt goes ahead at once, through Conversion info.
    await releaseLease(deps, record);
    throw error;
  }
  // The add is done: a failed id lookup must not undo that. Without an id, refunds look it up later.
  id ??= (await backend.find(source.program, event.externalId, call).catch(() => undefined))?.id;
  const outcome = await settleAdded(deps, record, id, 'added');
  if (outcome.result === 'added' && countedRefunds(record).some((r) => r.status === 'pending')) {
    // The add already subtracted the refunds that came first: this records them as applied.
    await applyRefunds(deps, backend, source, record, undefined, call);
  }
  return outcome;
}

/**
 * Over: past its time, or this worker's own lease about to end (it waited for it, see
 * `OWN_LEASE_LEEWAY_MS`). An expired lease may be taken over, its add looked up first.
 */
function leaseOver(deps: WorkerDeps, record: OrderRecord): boolean {
  const left = (record.leaseUntil ?? 0) - deps.now();
  return left <= 0 || (record.leaseOwner === deps.workerId && left <= OWN_LEASE_LEEWAY_MS);
}

/** Expires our lease so the next attempt reconciles through Conversion info instead of waiting. */
async function releaseLease(deps: WorkerDeps, record: OrderRecord): Promise<void> {
  record.leaseUntil = 0;
  await deps.ledger.update(record).catch(() => undefined);
}

async function settleAdded(
  deps: WorkerDeps,
  record: OrderRecord,
  conversionId: string | undefined,
  result: 'added' | 'reconciled',
): Promise<Outcome> {
  record.state = 'added';
  record.conversionId = conversionId;
  record.leaseOwner = undefined;
  record.leaseUntil = undefined;
  record.lastError = undefined;
  record.unclearAddAt = undefined;
  if (!(await deps.ledger.update(record))) {
    // Our lease expired and another worker took over; it reconciles through Conversion info.
    return { result: 'duplicate', detail: 'lease taken over by another worker', conversionId };
  }
  return { result, conversionId, amount: record.currentAmount };
}

async function refundOrder(
  deps: WorkerDeps,
  source: SourceConfig,
  event: OrderRefunded,
  call: CallOptions,
): Promise<Outcome> {
  const backend = deps.backendFor(source);
  const key = ledgerKey(source.program, event.externalId);
  const iso = new Date(deps.now()).toISOString();

  for (let round = 0; round < 3; round++) {
    let record = await deps.ledger.get(key);
    if (!record) {
      const found = await backend.find(source.program, event.externalId, call);
      // No conversion and no record: the order has not come yet (shops do not deliver in order). The
      // ledger holds the refund and the message is done, so it never blocks its order's FIFO group.
      record = found ? importFromPlatform(deps, source, event, found) : awaitingRecord(deps, source, event);
      if (!found) {
        recordRefund(record, refundEntry(event, source, iso));
        if (!(await deps.ledger.create(record))) continue;
        return waiting(event);
      }
      if (!(await deps.ledger.create(record))) continue;
    }
    if (record.state === 'adding') {
      throw new TransientError('the order’s conversion is still being added; the refund waits for it');
    }
    if (event.origin === 'shop' && record.source !== source.id && record.state !== 'awaiting') {
      throw new PermanentError(
        `refund from source "${source.id}" for order ${event.externalId} of source "${record.source}": a shop ` +
          'may only refund its own orders; check which shop this order belongs to, or refund it through ' +
          'finance (POST /refunds)',
      );
    }

    const known = refundOf(record, event.refundId);
    if (record.state === 'awaiting' || record.state === 'failed') {
      // The order is yet to come, or parked in the DLQ: its arrival or replay applies this refund.
      if (known) return waiting(event, `refund ${event.refundId} already ${known.status}`);
      recordRefund(record, refundEntry(event, source, iso));
      record.awaitingSince ??= iso;
      if (!(await deps.ledger.update(record))) continue;
      return waiting(event);
    }
    if (known && known.status !== 'pending') {
      return { result: 'refund_duplicate', detail: `refund ${event.refundId} already ${known.status}` };
    }
    if (!known) {
      const entry = refundEntry(event, source, iso);
      if (record.state === 'skipped') {
        entry.status = 'skipped';
        entry.outcome = `order was skipped (${record.skipReason ?? 'no affiliate signal'}): no conversion to change`;
      } else if (record.state === 'refused') {
        entry.status = 'skipped';
        entry.outcome = 'conversion already refused';
      } else if (event.currency && record.currency && event.currency !== record.currency) {
        entry.status = 'rejected';
        entry.outcome = `refund currency ${event.currency} differs from the order's ${record.currency}`;
      } else if (!event.full && event.amount === undefined) {
        entry.status = 'rejected';
        entry.outcome = 'refund has neither an amount nor full';
      } else if (!event.full && record.amountUnknown) {
        entry.status = 'rejected';
        entry.outcome = NO_PLATFORM_AMOUNT;
      }
      recordRefund(record, entry);
      if (!(await deps.ledger.update(record))) continue;
      if (entry.status === 'skipped') return { result: 'refund_skipped', detail: entry.outcome };
      if (entry.status === 'rejected') throw new PermanentError(entry.outcome ?? 'refund rejected');
    }
    return applyRefunds(deps, backend, source, record, event, call);
  }
  throw new TransientError('the ledger record kept changing under this worker; will retry');
}

function waiting(event: OrderRefunded, detail?: string): Outcome {
  return {
    result: 'refund_waiting',
    detail: detail ?? `refund ${event.refundId} held until order ${event.externalId} is added`,
  };
}

function refundEntry(event: OrderRefunded, source: SourceConfig, receivedAt: string): RefundRecord {
  return {
    refundId: event.refundId,
    amount: event.full ? 0 : (event.amount ?? 0),
    full: event.full,
    origin: event.origin,
    source: source.id,
    ...(event.currency ? { currency: event.currency } : {}),
    reason: event.reason,
    receivedAt,
    status: !event.full && event.amount === undefined ? 'rejected' : 'pending',
    ...(!event.full && event.amount === undefined
      ? { outcome: 'refund has neither an amount nor full' }
      : {}),
  };
}

/** A record holding refunds of an order that has not arrived: no conversion, nothing to compare. */
function awaitingRecord(deps: WorkerDeps, source: SourceConfig, event: OrderRefunded): OrderRecord {
  const iso = new Date(deps.now()).toISOString();
  return {
    key: ledgerKey(source.program, event.externalId),
    program: source.program,
    externalId: event.externalId,
    source: source.id,
    state: 'awaiting',
    version: 0,
    originalAmount: 0,
    currentAmount: 0,
    refunds: {},
    awaitingSince: iso,
    createdAt: iso,
    updatedAt: iso,
  };
}

/** An order the connector never saw (placed before it existed): adopt the platform's conversion. */
function importFromPlatform(
  deps: WorkerDeps,
  source: SourceConfig,
  event: OrderRefunded,
  found: PlatformConversion,
): OrderRecord {
  const iso = new Date(deps.now()).toISOString();
  return {
    key: ledgerKey(source.program, event.externalId),
    program: source.program,
    externalId: event.externalId,
    source: source.id,
    state: found.status === 'refused' ? 'refused' : 'added',
    version: 0,
    conversionId: found.id,
    originalAmount: found.amount ?? 0,
    currentAmount: found.amount ?? 0,
    currency: found.currency,
    refunds: {},
    imported: true,
    ...(found.amount === undefined ? { amountUnknown: true } : {}),
    createdAt: iso,
    updatedAt: iso,
  };
}

/**
 * Brings the platform to the state the recorded refunds imply: the original amount minus every
 * counted refund, as an absolute Update conversion amount, or a refusal when a refund is full or the
 * amount reaches zero. Absolute targets make a repeat (or a replay after a DLQ stay) harmless.
 */
async function applyRefunds(
  deps: WorkerDeps,
  backend: ConversionBackend,
  source: SourceConfig,
  record: OrderRecord,
  event: OrderRefunded | undefined,
  call: CallOptions,
): Promise<Outcome> {
  const counted = countedRefunds(record);
  // Held refunds applied by their order's arrival are described by the last of them.
  const described = event ?? counted.filter((r) => r.status === 'pending').at(-1) ?? counted.at(-1);
  const refundedTotal = counted.reduce((sum, r) => sum + r.amount, 0);
  const target = record.originalAmount - refundedTotal;
  const refuse = counted.some((r) => r.full) || target <= 0;
  const conversionId =
    record.conversionId ?? (await backend.find(source.program, record.externalId, call))?.id;
  if (!conversionId) throw new PermanentError(`no conversion for externalId ${record.externalId}`);
  record.conversionId = conversionId;

  const reason = described
    ? refundReason(described, refuse, target, record.currency)
    : 'refunds recorded before the order';
  if (refuse) {
    await refuseOnce(backend, source.program, record.externalId, conversionId, reason, call);
  } else if (target !== record.currentAmount) {
    await backend.updateAmount(source.program, conversionId, target, reason, call);
  }

  const at = new Date(deps.now()).toISOString();
  const resultingAmount = refuse ? 0 : target;
  for (const refund of counted) {
    if (refund.status !== 'pending') continue;
    refund.status = 'applied';
    refund.appliedAt = at;
    refund.resultingAmount = resultingAmount;
    if (target < 0)
      refund.outcome = `refunds exceed the conversion amount by ${formatMinor(-target, record.currency)}: conversion refused`;
  }
  record.currentAmount = resultingAmount;
  record.awaitingSince = undefined;
  if (refuse) record.state = 'refused';
  if (!(await deps.ledger.update(record))) {
    // The platform already has the absolute target; a concurrent writer will record it on its turn.
    throw new TransientError('ledger changed while recording an applied refund; will re-check');
  }
  return refuse
    ? { result: 'refused', conversionId, amount: 0, detail: reason }
    : { result: 'refund_applied', conversionId, amount: target };
}

async function refuseOnce(
  backend: ConversionBackend,
  program: string,
  externalId: string,
  conversionId: string,
  reason: string,
  call: CallOptions,
): Promise<void> {
  try {
    await backend.refuse(program, conversionId, reason, call);
  } catch (error) {
    // A refusal repeated after a crash is answered as an error by the platform: check before failing.
    if (isConnectorError(error) && error.failureClass === 'permanent') {
      const current = await backend.find(program, externalId, call).catch(() => undefined);
      if (current?.id === conversionId && current.status === 'refused') return;
    }
    throw error;
  }
}

function refundReason(
  event: Pick<RefundRecord, 'refundId' | 'reason' | 'full'>,
  refuse: boolean,
  target: number,
  currency: string | undefined,
): string {
  const why = event.reason ? `: ${event.reason}` : '';
  if (event.refundId === CANCELLATION_REFUND_ID) return (event.reason ?? 'order cancelled').slice(0, 250);
  if (refuse) {
    return (
      event.full
        ? `order fully refunded (refund ${event.refundId})${why}`
        : `refunds reached the order amount${why}`
    ).slice(0, 250);
  }
  return `partial refund ${event.refundId}: amount now ${formatMinor(target, currency)}${why}`.slice(0, 250);
}

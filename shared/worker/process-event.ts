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
  type Ledger,
  ledgerKey,
  type OrderRecord,
  type RefundRecord,
  recordRefund,
  refundOf,
} from '../ledger.ts';
import { formatMinor } from '../money.ts';
import { decideAttribution, toApiDate } from './attribution.ts';
import type { CallOptions, ConversionBackend } from './backend.ts';

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
}

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
  event: ConnectorEvent,
  call: CallOptions = {},
): Promise<Outcome> {
  const source = deps.sources.get(event.source);
  if (!source) throw new PermanentError(`source "${event.source}" is not configured`);
  switch (event.type) {
    case 'OrderPlaced':
      return placeOrder(deps, source, event, call);
    case 'OrderRefunded':
      return refundOrder(deps, source, event, call);
    case 'OrderCancelled':
      return refundOrder(deps, source, asCancellationRefund(event), call);
  }
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

    if (existing) {
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
        record.state = 'added';
        record.conversionId = found.id;
        record.leaseOwner = undefined;
        record.leaseUntil = undefined;
        await deps.ledger.update(record);
        return {
          result: 'reconciled',
          conversionId: found.id,
          detail: 'conversion found on the platform after an interrupted add',
        };
      }
    } else {
      const decision = decideAttribution(event, source.unattributed);
      const base: OrderRecord = {
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
        if (!(await deps.ledger.create({ ...base, state: 'skipped', skipReason: decision.reason }))) continue;
        return { result: 'skipped', detail: decision.reason };
      }
      record = {
        ...base,
        kind: decision.kind,
        leaseOwner: deps.workerId,
        leaseUntil: deps.now() + deps.leaseMs,
      };
      if (!(await deps.ledger.create(record))) continue;
    }

    return addConversion(deps, backend, source, event, record, call);
  }
  throw new TransientError('the ledger record kept changing under this worker; will retry');
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
        amount: event.amount,
        currency: event.currency,
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
  return settleAdded(deps, record, id, 'added');
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
  if (!(await deps.ledger.update(record))) {
    // Our lease expired and another worker took over; it reconciles through Conversion info.
    return { result: 'duplicate', detail: 'lease taken over by another worker', conversionId };
  }
  return { result, conversionId, amount: record.originalAmount };
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
      record = await importFromPlatform(deps, backend, source, event, call);
      if (!(await deps.ledger.create(record))) continue;
    }
    if (record.state === 'adding') {
      throw new TransientError('the order’s conversion is still being added; the refund waits for it');
    }
    if (record.state === 'failed') {
      throw new PermanentError(
        `the order’s conversion was never added (${record.lastError ?? 'unknown reason'}): replay the order first`,
      );
    }

    const known = refundOf(record, event.refundId);
    if (known && known.status !== 'pending') {
      return { result: 'refund_duplicate', detail: `refund ${event.refundId} already ${known.status}` };
    }
    if (!known) {
      const entry: RefundRecord = {
        refundId: event.refundId,
        amount: event.full ? 0 : (event.amount ?? 0),
        full: event.full,
        origin: event.origin,
        reason: event.reason,
        receivedAt: iso,
        status: 'pending',
      };
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

/** An order the connector never saw (placed before it existed): adopt the platform's conversion. */
async function importFromPlatform(
  deps: WorkerDeps,
  backend: ConversionBackend,
  source: SourceConfig,
  event: OrderRefunded,
  call: CallOptions,
): Promise<OrderRecord> {
  const found = await backend.find(source.program, event.externalId, call);
  if (!found) throw new PermanentError(`no conversion for externalId ${event.externalId}`);
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
  event: OrderRefunded,
  call: CallOptions,
): Promise<Outcome> {
  const counted = countedRefunds(record);
  const refundedTotal = counted.reduce((sum, r) => sum + r.amount, 0);
  const target = record.originalAmount - refundedTotal;
  const refuse = counted.some((r) => r.full) || target <= 0;
  const conversionId =
    record.conversionId ?? (await backend.find(source.program, record.externalId, call))?.id;
  if (!conversionId) throw new PermanentError(`no conversion for externalId ${record.externalId}`);
  record.conversionId = conversionId;

  const reason = refundReason(event, refuse, target);
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

function refundReason(event: OrderRefunded, refuse: boolean, target: number): string {
  const why = event.reason ? `: ${event.reason}` : '';
  if (event.refundId === CANCELLATION_REFUND_ID) return (event.reason ?? 'order cancelled').slice(0, 250);
  if (refuse) {
    return (
      event.full
        ? `order fully refunded (refund ${event.refundId})${why}`
        : `refunds reached the order amount${why}`
    ).slice(0, 250);
  }
  return `partial refund ${event.refundId}: amount now ${formatMinor(target, event.currency)}${why}`.slice(
    0,
    250,
  );
}

import type { SourceConfig } from '../config/sources.ts';
import { connectorRefundId } from '../domain/events.ts';
import { foreignMessage } from '../errors.ts';
import { ledgerKey, type OrderRecord, type RefundRecord } from '../ledger.ts';
import { formatMinor, otherCurrency } from '../money.ts';
import type { ConversionBackend, Ledger, PlatformConversion } from '../ports.ts';

/** What the order flow (`orders.ts`) and the refund flow (`refunds.ts`) share. */

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
  | 'already_refused'
  /** A shadow source's order: recorded in the ledger as what the add would have sent; nothing sent. */
  | 'shadowed'
  /** A refund of a shadow source's order: recorded, nothing sent. */
  | 'refund_shadowed';

export interface Outcome {
  readonly result: OutcomeResult;
  readonly detail?: string;
  readonly conversionId?: string;
  readonly amount?: number;
}

/** The refund a cancellation counts as: an id no shop or finance refund can carry. */
/** The outcome's detail when a settling write finds another worker took the lease over. */
export const LEASE_LOST = 'lease taken over by another worker';

export const CANCELLATION_REFUND_ID = connectorRefundId('cancellation');

/** A new ledger record of `source`'s order `externalId`, created now, with no refunds yet. */
export function newRecord(
  deps: Pick<WorkerDeps, 'now'>,
  source: SourceConfig,
  externalId: string,
  fields: Pick<OrderRecord, 'state' | 'originalAmount' | 'currentAmount'> & Partial<OrderRecord>,
): OrderRecord {
  const iso = new Date(deps.now()).toISOString();
  return {
    key: ledgerKey(source.program, externalId),
    program: source.program,
    externalId,
    source: source.id,
    version: 0,
    refunds: {},
    createdAt: iso,
    updatedAt: iso,
    ...fields,
  };
}

/**
 * Why a refund held for an order of `source` in `currency` is not the order's own: a shop's refund
 * from another source, or one in another currency. Undefined when it is. The rule by which the
 * order's delivery rejects the refunds held for it, and by which the refunds of the shadow period are
 * judged once the pixel's conversion of an order shadow mode skipped is adopted.
 */
export function foreignRefundReason(
  refund: RefundRecord,
  source: string,
  currency: string | undefined,
): string | undefined {
  if (refund.origin === 'shop' && refund.source !== undefined && refund.source !== source) {
    return `refund from source "${refund.source}" for an order of source "${source}": not applied`;
  }
  if (otherCurrency(refund.currency, currency)) {
    return `refund currency ${refund.currency} differs from the order's ${currency}`;
  }
  return undefined;
}

/**
 * Why the platform's conversion `found` cannot be taken as `record`'s order: it is in another
 * currency than the ledger's, so its minor units are other money (USD 49.90 is not EUR 49.90) and
 * the refunds held for the order would be computed against it. The conversion may be the shop's
 * pixel or a hand-made one in the buyer's currency, or another shop's order with the same id.
 * Undefined when it may be adopted: the same currency, or either side without one (the platform may
 * leave it out).
 */
export function otherCurrencyReason(record: OrderRecord, found: PlatformConversion): string | undefined {
  if (!record.currency || !found.currency || !otherCurrency(record.currency, found.currency))
    return undefined;
  const theirs = foreignMessage(found.currency.trim().toUpperCase(), 16);
  const amount =
    found.amount === undefined
      ? 'no amount given'
      : Number.isSafeInteger(found.amount)
        ? formatMinor(found.amount, theirs)
        : `${theirs} ${found.amount}`;
  return (
    `the platform's conversion ${found.id} for order ${record.externalId} is in ${theirs} (${amount}), ` +
    `the order in ${record.currency} (${formatMinor(record.originalAmount, record.currency)}): not adopted; ` +
    'check which is right and fix it on the platform, then replay this message'
  );
}

/**
 * The ledger: one record per order (program + externalId), the connector's memory of what it did on
 * the platform. Every write is conditional on the record's version, so two workers never both win.
 */

export type OrderState =
  /** A Conversion Add is (or may be) in flight; `leaseUntil` says until when it is held. */
  | 'adding'
  | 'added'
  /** No affiliate signal: no conversion, and later refunds are skipped too. */
  | 'skipped'
  | 'refused'
  /** The add failed permanently; the message is in the DLQ and a replay may try again. */
  | 'failed'
  /**
   * A refund or cancellation came before its order (shops do not deliver in order): the record holds
   * it, with no conversion yet, and the order applies it when it arrives.
   */
  | 'awaiting';

export type RefundStatus = 'pending' | 'applied' | 'skipped' | 'rejected';

export interface RefundRecord {
  readonly refundId: string;
  /** Net refunded amount in minor units (0 for a full refund or cancellation). */
  readonly amount: number;
  readonly full: boolean;
  readonly origin: 'shop' | 'finance';
  /** The source whose webhook sent it (absent on records written before sources were checked). */
  readonly source?: string;
  /** The refund's currency when it named one, checked against the order's when that arrives later. */
  readonly currency?: string;
  readonly reason?: string;
  readonly receivedAt: string;
  status: RefundStatus;
  /** The conversion amount after this refund, when applied. */
  resultingAmount?: number;
  appliedAt?: string;
  /** Why it was skipped or rejected, or a remark (over-refund). */
  outcome?: string;
}

export interface OrderRecord {
  readonly key: string;
  readonly program: string;
  readonly externalId: string;
  /** Source (shop) the order came from. */
  source: string;
  state: OrderState;
  version: number;
  kind?: 'tracking' | 'manual';
  conversionId?: string;
  /** Amount of the conversion as added (minor units), the base refunds are subtracted from. */
  originalAmount: number;
  currentAmount: number;
  currency?: string;
  /** By refund id. Ids are free-form: read it with `refundOf` and write it with `recordRefund`. */
  refunds: Record<string, RefundRecord>;
  leaseOwner?: string;
  /** Epoch ms; a lease past this time is expired and its add must be reconciled before retrying. */
  leaseUntil?: number;
  skipReason?: string;
  lastError?: string;
  /**
   * Epoch ms of the last Conversion Add that got no clear answer (timeout, connection lost, 500/502/
   * 504). No new add is sent until the platform has shown nothing for the verification window after it.
   */
  unclearAddAt?: number;
  /** When the first refund waiting for this order (state `awaiting`, or `failed`) was recorded. */
  awaitingSince?: string;
  /** The record was created from the platform's data (order placed before the connector). */
  imported?: boolean;
  /**
   * Imported from a conversion the platform gave without an amount: `originalAmount` is unknown (0),
   * so no partial refund can be turned into an absolute amount.
   */
  amountUnknown?: boolean;
  /**
   * When the conversion is due for acceptance (order time + the source's `acceptAfterDays`); set at
   * the add, only for sources with a return window. The accept job's index key (see shared/accept/).
   */
  acceptDueAt?: string;
  /** When the connector accepted the conversion on the platform. */
  acceptedAt?: string;
  /** Epoch ms: an accept call is in flight until then (the accept job's lease). */
  acceptLeaseUntil?: number;
  /** Why the platform would not accept it (parked in the DLQ); the job no longer offers it. */
  acceptError?: string;
  createdAt: string;
  updatedAt: string;
}

export function ledgerKey(program: string, externalId: string): string {
  return `${program}#${externalId}`;
}

/** Refunds that count towards the conversion amount: recorded and not rejected or skipped. */
export function countedRefunds(record: OrderRecord): RefundRecord[] {
  return Object.values(record.refunds).filter((r) => r.status === 'pending' || r.status === 'applied');
}

/**
 * The refund recorded under `refundId`, if any. Own properties only: an id such as `constructor` or
 * `toString` must not find what every object inherits.
 */
export function refundOf(record: OrderRecord, refundId: string): RefundRecord | undefined {
  return Object.hasOwn(record.refunds, refundId) ? record.refunds[refundId] : undefined;
}

/**
 * Records `refund` under its id. Defined, not assigned: assigning the id `__proto__` would replace the
 * map's prototype instead of adding an entry. (JSON and structured clones keep such an own key.)
 */
export function recordRefund(record: OrderRecord, refund: RefundRecord): void {
  Object.defineProperty(record.refunds, refund.refundId, {
    value: refund,
    enumerable: true,
    writable: true,
    configurable: true,
  });
}

/** A refund or cancellation held in the ledger until its order's conversion exists. */
export interface WaitingRefund {
  readonly program: string;
  readonly externalId: string;
  readonly refundId: string;
  /** `awaiting`: the order has not arrived; `failed`: it is parked in the DLQ. */
  readonly ledgerState: 'awaiting' | 'failed';
  readonly since: string;
  readonly source?: string;
}

/** The pending refunds of the records that wait for their order (see `WaitingRefund`). */
export function waitingRefunds(records: Iterable<OrderRecord>): WaitingRefund[] {
  const out: WaitingRefund[] = [];
  for (const record of records) {
    if (record.state !== 'awaiting' && record.state !== 'failed') continue;
    for (const refund of Object.values(record.refunds)) {
      if (refund.status !== 'pending') continue;
      out.push({
        program: record.program,
        externalId: record.externalId,
        refundId: refund.refundId,
        ledgerState: record.state,
        since: refund.receivedAt,
        ...(refund.source ? { source: refund.source } : {}),
      });
    }
  }
  return out.sort((a, b) => a.since.localeCompare(b.since));
}

/**
 * Whether the record waits for the accept job: a live conversion, added, due on a date, neither
 * accepted nor given up on. Refused and skipped records never wait. The DynamoDB ledger writes the
 * index key (`acceptDueAt`) only while this holds, which keeps its due-date index sparse.
 */
export function awaitsAccept(record: OrderRecord): boolean {
  return (
    record.state === 'added' &&
    record.conversionId !== undefined &&
    record.acceptDueAt !== undefined &&
    record.acceptedAt === undefined &&
    record.acceptError === undefined &&
    // A shadow record (issue 17, part 1) made no conversion on the platform: nothing to accept.
    (record as { readonly shadow?: boolean }).shadow !== true
  );
}

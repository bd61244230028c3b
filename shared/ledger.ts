import type { RefundBasis, RefundLine } from './domain/events.ts';

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
  | 'awaiting'
  /**
   * A shadow source's order (see `SourceConfig.mode`): the record holds what the add would have sent,
   * nothing was sent. Refunds of it stay `pending`. When the source goes live, the order's next
   * delivery or replay looks it up on the platform (the pixel's conversion is adopted) before any add.
   */
  | 'shadowed';

/**
 * `late`: the platform no longer lets the conversion change (locked, or accepted for a partial
 * refund), so the refund was not applied there; finance settles it (see `LateRefund`).
 *
 * `manual`: the worker could not apply it (parked in the DLQ: a partial refund on the legacy
 * interface, a change the platform refused for good) and an operator settled it on the platform by
 * hand, then discarded its message (`connector dlq discard`). Not `applied`: the connector set no
 * amount for it (no `resultingAmount`; `currentAmount` stays what the connector last set), and
 * reports tell the two apart. Not `skipped` or `rejected`: the money did go back to the buyer, so it
 * is counted like an applied refund (`countedRefunds`) — later refunds of the same lines take their
 * share after it, `POST /refunds` counts it against what remains, and the next Update conversion
 * amount sets the order's amount less it too, rather than adding back what the operator took off.
 * Never pending again: the worker treats a delivery of it as a duplicate, and the accept job and
 * `status` stop waiting for it.
 */
export type RefundStatus = 'pending' | 'applied' | 'skipped' | 'rejected' | 'late' | 'manual';

/** Why a late refund could not be applied, and what finance needs to settle it. */
export interface LateRefund {
  /** `locked`: past the waiting period; `accepted`: only a pending conversion's amount can change. */
  readonly because: 'locked' | 'accepted';
  readonly conversionId: string;
  /** The conversion's amount and commission on the platform when the refund came (minor units). */
  readonly conversionAmount: number;
  /** Absent when the platform did not give the conversion's commission. */
  readonly commission?: number;
  /**
   * When the refund was recorded late, once finance sent it again and it became pending to be applied
   * (the platform let the conversion change again; docs/runbook.md, "Late refunds"): its `appliedAt`
   * then says when it was applied. `connector late-refunds` lists it as re-applied.
   */
  readonly lateAt?: string;
}

export interface RefundRecord {
  readonly refundId: string;
  /**
   * Net refunded amount in minor units (0 for a full refund or cancellation). Set by the worker from
   * the order's lines (shared/worker/refund-net.ts), once when recorded, or when a held refund's order arrives.
   */
  amount: number;
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
  /**
   * The refund's lines: as its payload listed them, or the order lines a gross refund was matched
   * to. Later refunds of the same lines take their share from what these left.
   */
  lines?: RefundLine[];
  /** The gross paid back, when that is all the payload said. */
  gross?: number;
  /** How `amount` was computed (from the order's lines, the refund's, or the current rules and why). */
  amountFrom?: string;
  /** Set with status `late`; kept (with `lateAt`) once a refund sent again is applied after all. */
  late?: LateRefund;
  /**
   * The worker of this refund's own message may have set the conversion to a target that none of
   * its ledger writes has confirmed since: written with the refund, before any call, and cleared by
   * the write that confirms what that worker sent. Another worker recording the refund applied keeps
   * it. A delivery of the refund that finds it set (SQS's, after that worker died) sends the ledger's
   * target again before it clears it (docs/exactly-once.md, rule 4). The accept job does not accept a
   * conversion while a refund applied keeps it, unless the platform shows the ledger's target. An
   * operator settling a refund of the order by hand clears it (`confirmSends`).
   */
  unconfirmedSend?: true;
  /** Which workers' calls the mark stands for, and until when (see `UnconfirmedSends`). */
  unconfirmedBy?: Record<string, number>;
}

export interface OrderRecord {
  readonly key: string;
  readonly program: string;
  readonly externalId: string;
  /** Source (shop) the order came from. */
  source: string;
  state: OrderState;
  version: number;
  /**
   * Written by a source in shadow mode: nothing of it was sent to the platform. Cleared when a live
   * source takes the order over (adopting the pixel's conversion, or adding it).
   */
  shadow?: boolean;
  kind?: 'tracking' | 'manual';
  /**
   * The platform's id of the conversion, once known: from the add's answer when it carries one, else
   * looked up (Conversion info by externalId) by the first refund or accept that needs it.
   */
  conversionId?: string;
  /** Amount of the conversion as added (minor units), the base refunds are subtracted from. */
  originalAmount: number;
  currentAmount: number;
  currency?: string;
  /** What the order said that refunds are turned net with (issue 19); absent on older records. */
  refundBasis?: RefundBasis;
  /** By refund id. Ids are free-form: read it with `refundOf` and write it with `recordRefund`. */
  refunds: Record<string, RefundRecord>;
  leaseOwner?: string;
  /** Epoch ms; a lease past this time is expired and its add must be reconciled before retrying. */
  leaseUntil?: number;
  skipReason?: string;
  lastError?: string;
  /**
   * Epoch ms of the last Conversion Add that got no clear answer (timeout, connection lost, 500/502/
   * 504), or whose worker died (the end of its lease, written by the worker taking it over). No new
   * add is sent until the platform has shown nothing for the verification window after it.
   */
  unclearAddAt?: number;
  /** When the first refund waiting for this order (state `awaiting`, or `failed`) was recorded. */
  awaitingSince?: string;
  /**
   * `RefundRecord.unconfirmedSend` for the order's own message, which applies the refunds held for
   * it (on the conversion it adopted, or on its retry) with no refund of its own to mark: written
   * before its calls, cleared by the write that confirms what its worker sent. A refund's worker
   * recording those refunds applied keeps it. A delivery of the order that finds it set with nothing
   * pending (SQS's, after that worker died) sends the ledger's target again before it clears it
   * (docs/exactly-once.md, rule 4).
   */
  unconfirmedSend?: true;
  /** Which workers' calls the mark stands for, and until when (see `UnconfirmedSends`). */
  unconfirmedBy?: Record<string, number>;
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

/**
 * Most bytes of a record's JSON: DynamoDB refuses an item past 400 KB, and the item carries a few
 * attributes beside the JSON. Only the lines kept for refunds can grow a record this far (an order
 * of hundreds of lines with long ids, refunded many times).
 */
export const MAX_RECORD_BYTES = 350_000;

/**
 * The record as a ledger stores it. Past `MAX_RECORD_BYTES` the order's refund basis keeps its
 * totals and tax mode but drops its lines (`truncated`), and recorded refunds drop theirs: a later
 * refund is then turned net from its own money and the tax mode, or the order's net/gross ratio.
 */
export function storableRecord(record: OrderRecord): OrderRecord {
  if (Buffer.byteLength(JSON.stringify(record)) <= MAX_RECORD_BYTES) return record;
  const refunds: Record<string, RefundRecord> = {};
  const compact: OrderRecord = {
    ...record,
    ...(record.refundBasis ? { refundBasis: { ...record.refundBasis, lines: [], truncated: true } } : {}),
    refunds,
  };
  for (const refund of Object.values(record.refunds)) {
    const { lines: _lines, ...rest } = refund;
    recordRefund(compact, rest);
  }
  return compact;
}

/** Ends the add lease: no worker holds the record any more. */
export function clearLease(record: OrderRecord): void {
  record.leaseOwner = undefined;
  record.leaseUntil = undefined;
}

export function ledgerKey(program: string, externalId: string): string {
  return `${program}#${externalId}`;
}

/**
 * Refunds that count towards the conversion amount: pending, applied, or settled by hand (`manual`);
 * not rejected, skipped or late.
 */
export function countedRefunds(record: OrderRecord): RefundRecord[] {
  return Object.values(record.refunds).filter(
    (r) => r.status === 'pending' || r.status === 'applied' || r.status === 'manual',
  );
}

/**
 * The refunds the platform could no longer apply (its conversion locked, or accepted for a partial
 * refund), which the buyer got back all the same (docs/runbook.md, "Late refunds").
 */
export function lateRefunds(record: OrderRecord): RefundRecord[] {
  return Object.values(record.refunds).filter((r) => r.status === 'late');
}

/**
 * The refunds that paid the buyer back: the counted ones and the late ones. The worker's target
 * leaves the late ones out, since the platform's amount cannot follow them; what is left to refund
 * (`POST /refunds`) and the lines a new refund's shares follow (`refundsBefore`) cannot.
 */
export function paidBackRefunds(record: OrderRecord): RefundRecord[] {
  return [...countedRefunds(record), ...lateRefunds(record)];
}

/**
 * Clears the marks of sends left unconfirmed (`unconfirmedSend`) that a later delivery would repeat:
 * the record's own and those of refunds no longer pending (a pending refund's worker still has its
 * call to make, and confirms it itself). For a writer that has just seen, or set, what the platform
 * holds: the accept job finding it at the ledger's amount, an operator settling a refund by hand.
 */
export function confirmSends(record: OrderRecord): void {
  for (const refund of Object.values(record.refunds)) {
    if (refund.status === 'pending') continue;
    delete refund.unconfirmedSend;
    delete refund.unconfirmedBy;
  }
  delete record.unconfirmedSend;
  delete record.unconfirmedBy;
}

/**
 * What carries a mark of sends left unconfirmed: a refund (for its own message's calls) or the record
 * (for the order's own message's). `unconfirmedSend` says that some worker's calls may be; `unconfirmedBy`
 * says whose, each until the epoch ms its hold ends: its write of the mark, before its first call, plus
 * the lease time, which outlasts any invocation. Two deliveries of one refund can run side by side in
 * two workers (a batch the event source invoked late, when SQS hands the message out again; one
 * worker's batch runs the messages of one order one after another): one that finds the other's hold running
 * sends nothing until it ends (`othersSendingUntil`), and each confirms only its own calls and those
 * whose hold has ended, so one of them confirming never hides the other's send still in flight, and
 * no mark outlives the deliveries of its message. A mark written before holds were kept has no
 * `unconfirmedBy`: nothing waits for it, and the next confirming write clears it.
 */
export interface UnconfirmedSends {
  unconfirmedSend?: true;
  unconfirmedBy?: Record<string, number>;
}

/** Marks `workerId`'s calls on `holder` unconfirmed until `until` (epoch ms): written before it makes them. */
export function markUnconfirmed(holder: UnconfirmedSends, workerId: string, until: number): void {
  holder.unconfirmedSend = true;
  // A computed key is defined on the copy, whatever the id (`__proto__` included).
  holder.unconfirmedBy = { ...holder.unconfirmedBy, [workerId]: until };
}

/** Whether `holder` carries `workerId`'s own mark (written by this worker, not yet confirmed). */
export function markedBy(holder: UnconfirmedSends, workerId: string): boolean {
  return holder.unconfirmedBy !== undefined && Object.hasOwn(holder.unconfirmedBy, workerId);
}

/**
 * The latest end (epoch ms) of the holds of marks on `holder` other than `workerId`'s that still run
 * at `now`, else undefined: until then another delivery may still be sending.
 */
export function othersSendingUntil(
  holder: UnconfirmedSends,
  workerId: string,
  now: number,
): number | undefined {
  const running = Object.entries(holder.unconfirmedBy ?? {})
    .filter(([by, until]) => by !== workerId && until > now)
    .map(([, until]) => until);
  return running.length === 0 ? undefined : Math.max(...running);
}

/**
 * Confirms `workerId`'s calls on `holder`, in the write that records what it sent: its own mark goes,
 * and the marks of workers whose hold has ended by `now` (their calls are over, and this worker's came
 * after them). The mark stays while another worker may still be sending.
 */
export function confirmUnconfirmed(holder: UnconfirmedSends, workerId: string, now: number): void {
  const left = Object.entries(holder.unconfirmedBy ?? {}).filter(
    ([by, until]) => by !== workerId && until > now,
  );
  if (left.length === 0) {
    delete holder.unconfirmedSend;
    delete holder.unconfirmedBy;
    return;
  }
  holder.unconfirmedSend = true;
  holder.unconfirmedBy = Object.fromEntries(left);
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

/**
 * A finance refund `POST /refunds` let through for an order, until the worker records its refund id
 * in the order's record: a partial one's amount counts against what remains of the order; a full one
 * (`full`) leaves nothing for any further partial refund of it.
 */
export interface RefundReservation {
  readonly refundId: string;
  /**
   * Minor units, as the request gave it (the worker records a finance refund's amount as it is); 0
   * for a full refund, as in a `RefundRecord`.
   */
  readonly amount: number;
  /** A full refund. Absent on a partial one, and on every item written before full refunds were reserved. */
  readonly full?: true;
  readonly reservedAt: string;
}

/**
 * The finance refunds reserved for one order (see `RefundReservation`): the door writes them, with a
 * write conditional on `version`, before it queues a refund, so that two requests for one order
 * judged at the same time cannot both take what remains, nor a partial refund pass beside a full one. Kept in an item of their own beside the
 * order's record, which the worker and the accept job never read nor write: a reservation never
 * changes the record's version under a worker's lease or a refund being applied.
 */
export interface RefundReservations {
  /** The order's ledger key (`ledgerKey`). */
  readonly key: string;
  /** 0 until first written. */
  version: number;
  readonly refunds: readonly RefundReservation[];
}

/**
 * The reservations of `reservations` whose refund the order's record does not hold yet: those still
 * to count beside it. Once the worker records a refund id (counted, or rejected and skipped alike),
 * the record alone says what it takes.
 */
export function unrecordedReservations(
  record: OrderRecord | undefined,
  reservations: RefundReservations | undefined,
): RefundReservation[] {
  return (reservations?.refunds ?? []).filter((r) => !record || !refundOf(record, r.refundId));
}

/** A refund or cancellation held in the ledger until its order's conversion exists. */
export interface WaitingRefund {
  readonly program: string;
  readonly externalId: string;
  readonly refundId: string;
  /** `awaiting`: the order has not arrived; `failed`: its add failed (its message parked, or gone). */
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
 * accepted nor given up on. Refused and skipped records never wait. With or without its conversion
 * id: the add's answer may not carry one, and the job looks it up. The DynamoDB ledger writes the
 * index key (`acceptDueAt`) only while this holds, which keeps its due-date index sparse.
 */
export function awaitsAccept(record: OrderRecord): boolean {
  return (
    record.state === 'added' &&
    record.acceptDueAt !== undefined &&
    record.acceptedAt === undefined &&
    record.acceptError === undefined &&
    // A shadow record (issue 17, part 1) made no conversion on the platform: nothing to accept.
    (record as { readonly shadow?: boolean }).shadow !== true
  );
}

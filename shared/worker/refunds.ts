import { acceptDueAt } from '../accept/due.ts';
import type { SourceConfig } from '../config/sources.ts';
import type { OrderRefunded } from '../domain/events.ts';
import { shopText } from '../domain/text.ts';
import {
  type ConnectorError,
  failureClassOf,
  isConnectorError,
  LateRefundError,
  PermanentError,
  TransientError,
} from '../errors.ts';
import {
  confirmUnconfirmed,
  countedRefunds,
  type LateRefund,
  ledgerKey,
  markedBy,
  markUnconfirmed,
  type OrderRecord,
  othersSendingUntil,
  type RefundRecord,
  recordRefund,
  refundOf,
} from '../ledger.ts';
import { formatMinor, sameCurrency } from '../money.ts';
import type { CallOptions, ConversionBackend, PlatformConversion } from '../ports.ts';
import {
  CANCELLATION_REFUND_ID,
  foreignRefundReason,
  newRecord,
  type Outcome,
  otherCurrencyReason,
  type WorkerDeps,
} from './flow.ts';
import { heldEntry, netHeldRefunds, netRefund, refundEntry, refundsBefore } from './refund-net.ts';
import { recordShadowRefund } from './shadow.ts';

/**
 * The refund flow: a refund (or cancellation) is recorded in the ledger, then the conversion is set
 * to the amount all recorded refunds imply, or refused; held in the ledger until its order is added.
 */

/** Reason a partial refund of a conversion imported without an amount is parked. */
export const NO_PLATFORM_AMOUNT =
  "the platform's conversion has no amount: cannot compute the amount after a partial refund; apply it by hand " +
  '(a full refund or a cancellation can still refuse the conversion), then discard this message: connector dlq discard <message id>';

/** Outcome of a refund of an order whose conversion is refused: nothing is sent to it. */
export const ALREADY_REFUSED = 'conversion already refused';

export async function refundOrder(
  deps: WorkerDeps,
  source: SourceConfig,
  event: OrderRefunded,
  call: CallOptions,
): Promise<Outcome> {
  if (source.mode === 'shadow') return recordShadowRefund(deps, source, event);
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
        recordRefund(record, heldEntry(event, source, iso));
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

    // Why the platform's conversion was not taken as the order's: the refund is held all the same,
    // and its message parked with the reason.
    let notAdopted: string | undefined;
    // Skipped in shadow mode (no affiliate signal), while the pixel, beside it, may have seen the
    // click. An order a live source skipped has no conversion: it is never looked up.
    const shadowSkipped = record.state === 'skipped' && record.shadow === true;
    if ((record.state === 'shadowed' || shadowSkipped) && record.source === source.id) {
      // Recorded while the source was in shadow mode, now live: the pixel's conversion, when the
      // platform has one in the order's currency, becomes the order's; without one the refund waits
      // for the order's replay, or, the order skipped, is skipped with it.
      const found = await backend.find(source.program, event.externalId, call);
      notAdopted = found && otherCurrencyReason(record, found);
      // Nothing held: no delivery of a skipped order adopts, so the replay of this message does.
      if (notAdopted && shadowSkipped) throw new PermanentError(notAdopted);
      if (found && !notAdopted) {
        record.state = found.status === 'refused' ? 'refused' : 'added';
        record.conversionId = found.id;
        record.currentAmount = found.amount ?? record.originalAmount;
        record.shadow = undefined;
        record.skipReason = undefined;
        // Due as a `shadowed` order is, from the order's date (`prepareOrder` keeps it). One skipped
        // by an earlier version, which kept no due date, is dated from when the ledger first saw the
        // order: never before the order's own window ends.
        if (shadowSkipped && record.state === 'added')
          record.acceptDueAt ??= acceptDueAt(source, record.createdAt);
        takeShadowRefunds(record, shadowSkipped, iso);
        if (!(await deps.ledger.update(record))) continue;
      }
    }
    const known = refundOf(record, event.refundId);
    if (record.state === 'awaiting' || record.state === 'failed' || record.state === 'shadowed') {
      // The order is yet to come, or parked in the DLQ, or was only recorded in shadow mode: its
      // arrival or replay applies this refund.
      if (!known) {
        recordRefund(record, heldEntry(event, source, iso));
        record.awaitingSince ??= iso;
        if (!(await deps.ledger.update(record))) continue;
      }
      if (notAdopted) throw new PermanentError(notAdopted);
      return waiting(event, known ? `refund ${event.refundId} already ${known.status}` : undefined);
    }
    // Applied while its own worker's call was unconfirmed: that worker died after sending, and its
    // target may have reached the platform after the ledger's. This delivery puts that right.
    const unconfirmed = known?.status === 'applied' && known.unconfirmedSend === true;
    if (known && known.status !== 'pending' && !unconfirmed) {
      const duplicate = `refund ${event.refundId} already ${known.status}`;
      if (!(record.state === 'added' && lateSentAgain(known, event))) {
        return { result: 'refund_duplicate', detail: duplicate };
      }
      const stillLate = await reopenLate(deps, backend, source, record, known, call);
      if (stillLate === false) continue;
      if (stillLate) return { result: 'refund_duplicate', detail: `${duplicate}: ${stillLate}` };
    }
    if (!known) {
      // Kept as a held refund is by an order shadow mode skipped: a pixel's conversion adopted later
      // turns it net with the shadow period's refunds, in the order they came (`takeShadowRefunds`).
      const held = record.state === 'skipped' && record.shadow === true;
      const entry = held ? heldEntry(event, source, iso) : refundEntry(event, source, iso);
      if (entry.status === 'pending' && !held)
        netRefund(record.refundBasis, entry, refundsBefore(record, entry));
      if (record.state === 'skipped') {
        entry.status = 'skipped';
        entry.outcome = `order was skipped (${record.skipReason ?? 'no affiliate signal'}): no conversion to change`;
      } else if (record.state === 'refused') {
        entry.status = 'skipped';
        entry.outcome = ALREADY_REFUSED;
      } else if (event.currency && record.currency && !sameCurrency(event.currency, record.currency)) {
        entry.status = 'rejected';
        entry.outcome = `refund currency ${event.currency} differs from the order's ${record.currency}`;
      } else if (!event.full && event.amount === undefined) {
        entry.status = 'rejected';
        entry.outcome = 'refund has neither an amount nor full';
      } else if (!event.full && record.amountUnknown) {
        entry.status = 'rejected';
        entry.outcome = NO_PLATFORM_AMOUNT;
      }
      if (entry.status === 'pending') waitForAccept(deps, record);
      // In the write before any call: should this worker die after a call, the record says so.
      if (entry.status === 'pending') markUnconfirmed(entry, deps.workerId, deps.now() + deps.leaseMs);
      recordRefund(record, entry);
      if (!(await deps.ledger.update(record))) continue;
      if (entry.status === 'skipped') return { result: 'refund_skipped', detail: entry.outcome };
      if (entry.status === 'rejected') throw new PermanentError(entry.outcome ?? 'refund rejected');
    }
    return applyRefunds(deps, backend, source, record, event, call);
  }
  throw new TransientError('the ledger record kept changing under this worker; will retry');
}

/**
 * Whether `event` is finance sending late refund `known` again, as recorded (the same `full` flag and
 * amount: `POST /refunds` answers another one 409): the runbook's way to apply it once the platform
 * lets its conversion change again. A shop's delivery of it again is a duplicate as any other: shops
 * resend their refunds with every update of an order (WooCommerce's `refunds[]`), which looks nothing up.
 */
function lateSentAgain(known: RefundRecord, event: OrderRefunded): boolean {
  return (
    known.status === 'late' &&
    known.late !== undefined &&
    event.origin === 'finance' &&
    event.full === known.full &&
    (known.full || event.amount === known.amount)
  );
}

/**
 * A late refund sent again (`lateSentAgain`): looks its conversion up, and when the platform lets it
 * change for this refund now (pending again; for a refund that refuses it, unlocked), records it
 * pending, marked as any refund before its call, for this delivery to apply: the platform then
 * carries it and finance takes nothing back for it. It keeps when it was recorded late
 * (`LateRefund.lateAt`), so that `connector late-refunds` lists it, re-applied, in that period too.
 * Else why it stays late (nothing written, nothing sent); `false` when the write lost to another.
 */
async function reopenLate(
  deps: WorkerDeps,
  backend: ConversionBackend,
  source: SourceConfig,
  record: OrderRecord,
  refund: RefundRecord,
  call: CallOptions,
): Promise<string | false | undefined> {
  const late = refund.late;
  if (!late) return 'it was recorded late without its conversion';
  const conversionId = record.conversionId ?? late.conversionId;
  const current = await backend.find(source.program, record.externalId, call);
  if (current?.id !== conversionId) {
    return `conversion ${conversionId} is no longer found on the platform; settle it with a commission adjustment`;
  }
  const left = record.originalAmount - countedRefunds(record).reduce((sum, r) => sum + r.amount, 0);
  if (current.status === 'refused') return `conversion ${conversionId} is refused on the platform`;
  const because = lateBecause(current, refund.full || left <= refund.amount);
  if (because) return `conversion ${conversionId} is still ${because} on the platform`;
  const lateAt = late.lateAt ?? refund.appliedAt ?? refund.receivedAt;
  refund.status = 'pending';
  refund.late = { ...late, lateAt };
  refund.appliedAt = undefined;
  refund.outcome =
    `recorded late ${lateAt}, re-applied once the platform let its conversion change: ` +
    'reverse any commission adjustment made for it';
  markUnconfirmed(refund, deps.workerId, deps.now() + deps.leaseMs);
  return (await deps.ledger.update(record)) ? undefined : false;
}

/**
 * Throws a transient error, to come back once it ends, while the accept job's call for the order's
 * conversion is in flight (`acceptLeaseUntil`, written with a condition on the version it read: a
 * refund recorded since makes it fail). A refund recorded and sent under it could reach the platform
 * just before the accept: the amount accepted would carry it while the worker, told 422 for the
 * accepted conversion, recorded it late, for finance, as well; or refuse the conversion under the job,
 * which parked its refused accept for an operator. Recorded after the accept, a partial refund is
 * late, once, and a full one or the cancellation refuses the accepted conversion. In turn the job
 * holds an order with a refund pending.
 */
function waitForAccept(deps: WorkerDeps, record: OrderRecord): void {
  const now = deps.now();
  const until = record.acceptLeaseUntil ?? 0;
  if (record.state !== 'added' || record.acceptedAt !== undefined || until <= now) return;
  throw new TransientError(
    `the accept job is accepting order ${record.externalId}'s conversion until ${new Date(until).toISOString()}: ` +
      'the refund waits for it, then is applied, or recorded late once the conversion is accepted',
    { retryAfterMs: until - now },
  );
}

function waiting(event: OrderRefunded, detail?: string): Outcome {
  return {
    result: 'refund_waiting',
    detail: detail ?? `refund ${event.refundId} held until order ${event.externalId} is added`,
  };
}

/** A record holding refunds of an order that has not arrived: no conversion, nothing to compare. */
function awaitingRecord(deps: WorkerDeps, source: SourceConfig, event: OrderRefunded): OrderRecord {
  const record = newRecord(deps, source, event.externalId, {
    state: 'awaiting',
    originalAmount: 0,
    currentAmount: 0,
  });
  return { ...record, awaitingSince: record.createdAt };
}

/** An order the connector never saw (placed before it existed): adopt the platform's conversion. */
function importFromPlatform(
  deps: WorkerDeps,
  source: SourceConfig,
  event: OrderRefunded,
  found: PlatformConversion,
): OrderRecord {
  return newRecord(deps, source, event.externalId, {
    state: found.status === 'refused' ? 'refused' : 'added',
    conversionId: found.id,
    originalAmount: found.amount ?? 0,
    currentAmount: found.amount ?? 0,
    currency: found.currency,
    imported: true,
    ...(found.amount === undefined ? { amountUnknown: true } : {}),
  });
}

/**
 * The refunds shadow mode recorded for an order whose conversion, the pixel's, is adopted: each
 * counts against it, those closed with an order shadow mode `skipped` too (pending again, applied
 * with the refund at hand). Closed with the order before they were judged, those are judged now as
 * the order's delivery judges the refunds held for it: one from another shop or in another currency
 * is rejected (`foreignRefundReason`), the others turned net from the order's lines in the order
 * they came. A refused conversion takes none: they are closed.
 */
function takeShadowRefunds(record: OrderRecord, skipped: boolean, at: string): void {
  for (const refund of Object.values(record.refunds)) {
    if (record.state === 'refused' && refund.status === 'pending') {
      refund.status = 'skipped';
      refund.outcome = ALREADY_REFUSED;
      refund.appliedAt = at;
    } else if (record.state === 'added' && skipped && refund.status === 'skipped') {
      const foreign = foreignRefundReason(refund, record.source, record.currency);
      refund.status = foreign ? 'rejected' : 'pending';
      refund.outcome = foreign;
      refund.appliedAt = foreign ? at : undefined;
    }
  }
  if (record.state === 'added' && skipped) netHeldRefunds(record);
  record.awaitingSince = undefined;
}

/** What a conversion is set to: an absolute amount, or refused. */
type Target = number | 'refused';

/**
 * Brings the platform to the state the recorded refunds imply: the original amount minus every
 * counted refund, as an absolute Update conversion amount, or a refusal when a refund is full or the
 * amount reaches zero. Absolute targets make a repeat (or a replay after a DLQ stay) harmless. The
 * conversion's id is looked up only when a call is to be made.
 */
export async function applyRefunds(
  deps: WorkerDeps,
  backend: ConversionBackend,
  source: SourceConfig,
  record: OrderRecord,
  event: OrderRefunded | undefined,
  call: CallOptions,
): Promise<Outcome> {
  let conversionId = record.conversionId;
  // What this worker last set the conversion to, once it has made a call.
  let sent: Target | undefined;
  // A delivery again of a message whose own worker's call was unconfirmed, and whose refunds another
  // worker has recorded applied since (a refund: see `refundOrder`; the order's own message, applying
  // the refunds held for it: see `placeOrder`): what that worker sent is unknown, so it counts as
  // sent and not what the ledger says.
  const inherited = event ? refundOf(record, event.refundId) : undefined;
  const sentBefore = event
    ? inherited?.status === 'applied' && inherited.unconfirmedSend === true
    : record.unconfirmedSend === true && !countedRefunds(record).some((r) => r.status === 'pending');
  for (let round = 0; round < 4; round++) {
    waitForOtherSends(deps, record, event);
    const counted = countedRefunds(record);
    // Held refunds applied by their order's arrival are described by the last of them.
    const described = event ?? counted.filter((r) => r.status === 'pending').at(-1) ?? counted.at(-1);
    conversionId = record.conversionId ?? conversionId;

    if (!counted.some((r) => r.status === 'pending')) {
      // A ledger write of ours lost (below), and another worker has recorded every refund applied
      // since. Two messages of one order can run side by side, though their FIFO group serialises
      // them (messages queued under an older grouping, or a group SQS hands out again while an
      // invocation that started late still runs), each sending the target its copy of the record implied:
      // the winner's write says where the platform is, but a loser's stale target may have reached
      // the platform after the winner's. So when what this worker sent is not what the ledger now
      // records, it sends the ledger's target again, and then writes the record unchanged, conditional
      // on the version it read: that write succeeds only if no one recorded another refund
      // meanwhile (whose worker then sends after this), else this looks again. The same holds for
      // a worker of this message (a refund's, or the order's applying the refunds held for it) that
      // died after its call: the message comes back, and this delivery sends the ledger's target in
      // its place. The write also confirms this worker's calls (`unconfirmedSend`), so that a later
      // duplicate of the message sends nothing.
      const recorded = recordedTarget(record);
      const resend = recorded !== undefined && (sent === undefined ? sentBefore : sent !== recorded);
      if (!resend && !ownMark(record, event)) {
        return appliedOutcome(record, conversionId, 'recorded applied by a concurrent worker');
      }
      // Set when the send again was refused for good: what the platform shows instead.
      let refused: Unchanging | undefined;
      if (resend) {
        conversionId ??= (await backend.find(source.program, record.externalId, call))?.id;
        if (!conversionId) throw new PermanentError(`no conversion for externalId ${record.externalId}`);
        record.conversionId = conversionId;
        const reason = described
          ? refundReason(described, recorded === 'refused', record.currentAmount, record.currency)
          : 'refunds recorded before the order';
        if (!(await markOwn(deps, record, event))) {
          record = await readAgain(deps, record.key);
          continue;
        }
        try {
          await setConversion(backend, source, record.externalId, conversionId, recorded, reason, call);
        } catch (error) {
          if (!isConnectorError(error) || error.failureClass !== 'permanent') throw error;
          const fresh = await movedOn(deps, record);
          if (fresh) {
            record = fresh;
            continue;
          }
          refused = await unchanging(backend, source, record, conversionId, recorded, error, call);
        }
        if (!refused?.off) sent = recorded;
      }
      // Confirmed even when the conversion no longer changes: a delivery again could send nothing to it.
      confirmOwn(deps, record, event);
      if (await deps.ledger.update(record)) {
        if (refused?.off) {
          throw new PermanentError(refused.off, {
            status: refused.cause.status,
            platformMessage: refused.cause.platformMessage,
            cause: refused.cause,
          });
        }
        return appliedOutcome(
          record,
          conversionId,
          refused
            ? "recorded applied by a concurrent worker; the platform shows the ledger's target already"
            : resend
              ? 'recorded applied by a concurrent worker; sent again'
              : 'recorded applied by a concurrent worker',
        );
      }
    } else {
      const refundedTotal = counted.reduce((sum, r) => sum + r.amount, 0);
      const target = record.originalAmount - refundedTotal;
      const refuse = counted.some((r) => r.full) || target <= 0;
      const reason = described
        ? refundReason(described, refuse, target, record.currency)
        : 'refunds recorded before the order';
      // A refund that leaves the amount as it is needs no call, hence no id: a lookup then would
      // only add a way to fail (a 429, or an add Conversion info does not show yet). Unless this
      // worker (or this refund's worker that died) already sent another target, which may be what
      // the platform holds now.
      const wanted: Target = refuse ? 'refused' : target;
      const sentOther = sent === undefined ? sentBefore : sent !== wanted;
      if (wanted !== recordedTarget(record) || sentOther) {
        conversionId ??= (await backend.find(source.program, record.externalId, call))?.id;
        if (!conversionId) throw new PermanentError(`no conversion for externalId ${record.externalId}`);
        record.conversionId = conversionId;
        if (!(await markOwn(deps, record, event))) {
          record = await readAgain(deps, record.key);
          continue;
        }
        try {
          await setConversion(backend, source, record.externalId, conversionId, wanted, reason, call);
        } catch (error) {
          if (!isConnectorError(error) || error.failureClass !== 'permanent') throw error;
          const fresh = await movedOn(deps, record);
          if (fresh) {
            record = fresh;
            continue;
          }
          // A conversion that no longer changes: no call of this worker's can leave it off the ledger.
          confirmOwn(deps, record, event);
          record = await lateOrThrow(deps, backend, source, record, conversionId, refuse, error, call);
          continue;
        }
        sent = wanted;
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
      // Written on the version this worker's target came from: its call is confirmed.
      confirmOwn(deps, record, event);
      if (await deps.ledger.update(record)) {
        return refuse
          ? { result: 'refused', conversionId, amount: 0, detail: reason }
          : { result: 'refund_applied', conversionId, amount: target };
      }
    }
    // Another worker wrote the record since this one read it: read it again and look.
    record = await readAgain(deps, record.key);
  }
  throw new TransientError('ledger changed while recording an applied refund; will re-check');
}

/**
 * The record as another worker wrote it since this one read it, else undefined: for a send the
 * platform refused for good. A worker beside this one (a refund of the same order, its cancellation)
 * records its refund before it calls, so a conversion it refused meanwhile (422 to this worker's
 * update, or to its refusal) shows in the record as a newer version, and what that records decides:
 * this worker's target is stale, not a reason to park its message.
 */
async function movedOn(deps: WorkerDeps, record: OrderRecord): Promise<OrderRecord | undefined> {
  const fresh = await deps.ledger.get(record.key);
  return fresh && fresh.version !== record.version ? fresh : undefined;
}

/** A send again refused for good by a conversion that shows the ledger's target, or no longer changes. */
interface Unchanging {
  readonly cause: ConnectorError;
  /** Why the message is parked: the conversion no longer changes, at another target than the ledger's. */
  readonly off?: string;
}

/**
 * Why the platform refused for good to be set to the ledger's target again (a send left unconfirmed,
 * see `applyRefunds`): it is there already, or the conversion no longer changes (locked, or accepted
 * for an amount), where nothing this message sends can move it. Throws `cause` when the conversion
 * may still change (another 422), a transient lookup failure as it is.
 */
async function unchanging(
  backend: ConversionBackend,
  source: SourceConfig,
  record: OrderRecord,
  conversionId: string,
  recorded: Target,
  cause: ConnectorError,
  call: CallOptions,
): Promise<Unchanging> {
  const current = await backend.find(source.program, record.externalId, call).catch((lookup: unknown) => {
    if (failureClassOf(lookup) === 'transient') throw lookup;
    return undefined;
  });
  if (current?.id !== conversionId) throw cause;
  const there =
    recorded === 'refused'
      ? current.status === 'refused'
      : current.status !== 'refused' && current.amount === recorded;
  if (there) return { cause };
  const because = current.isLocked
    ? 'locked'
    : recorded !== 'refused' && current.status === 'accepted'
      ? 'accepted'
      : undefined;
  if (!because) throw cause;
  const shown =
    current.status === 'refused'
      ? 'refused'
      : current.amount === undefined
        ? 'without an amount'
        : `at ${formatMinor(current.amount, record.currency)}`;
  const ledger = recorded === 'refused' ? 'refused' : `at ${formatMinor(recorded, record.currency)}`;
  return {
    cause,
    off:
      `conversion ${conversionId} of order ${record.externalId} is ${because} on the platform ${shown}, the ledger ` +
      `${ledger}: a send of this message may have reached it last, and the ledger's target can no longer be ` +
      'set; settle the difference with a commission adjustment, then discard this message: connector dlq discard <message id>',
  };
}

/**
 * Whether the mark of this message's calls is set (`unconfirmedSend`), by this worker or another: its
 * refund's, or the record's for the order's own message (no event).
 */
function ownMark(record: OrderRecord, event: OrderRefunded | undefined): boolean {
  return (event ? refundOf(record, event.refundId) : record)?.unconfirmedSend === true;
}

/**
 * Marks this worker's calls for the message unconfirmed (`markUnconfirmed`) in a write before it
 * sends, unless its mark is there (written with the refund, or before an earlier call). A worker that
 * found the refund recorded by another delivery of its message, perhaps still running beside it, has
 * its own calls to answer for: that delivery's confirming write must not hide them. False when the
 * write lost.
 */
async function markOwn(
  deps: WorkerDeps,
  record: OrderRecord,
  event: OrderRefunded | undefined,
): Promise<boolean> {
  const holder = event ? refundOf(record, event.refundId) : record;
  if (!holder || markedBy(holder, deps.workerId)) return true;
  markUnconfirmed(holder, deps.workerId, deps.now() + deps.leaseMs);
  return deps.ledger.update(record);
}

/**
 * Throws a transient error, to come back once it ends, while another delivery's hold on this
 * message's mark runs on a live conversion: that delivery may still be sending (a batch the event
 * source invoked late; or it died, which this one cannot tell). This one sends nothing meanwhile, as
 * an add waits for another worker's lease. Were it to send and end its message beside them, nothing
 * would come back once they stop: a stale target of theirs landing last would stay on the platform,
 * their mark on the record for ever. Once the hold ends, the delivery sends the ledger's target and
 * clears the mark (`confirmOwn`).
 */
export function waitForOtherSends(
  deps: WorkerDeps,
  record: OrderRecord,
  event: OrderRefunded | undefined,
): void {
  const holder = event ? refundOf(record, event.refundId) : record;
  if (!holder || record.state !== 'added') return;
  const now = deps.now();
  const until = othersSendingUntil(holder, deps.workerId, now);
  if (until === undefined) return;
  const message = event ? `refund ${event.refundId}'s message` : `order ${record.externalId}'s message`;
  throw new TransientError(
    `another delivery of ${message} may still be sending to the platform, until ${new Date(until).toISOString()}: ` +
      "this one waits for it, then sends the ledger's amount; if this message is parked, replay it",
    { retryAfterMs: until - now },
  );
}

/**
 * Confirms this worker's calls for the message (`confirmUnconfirmed`): the write it goes in records
 * what this worker sent. Another worker's mark stays while its calls may still be going out.
 */
function confirmOwn(deps: WorkerDeps, record: OrderRecord, event: OrderRefunded | undefined): void {
  const marked = event ? refundOf(record, event.refundId) : record;
  if (marked) confirmUnconfirmed(marked, deps.workerId, deps.now());
}

/** The record again, after a write of this worker's lost to another's. */
async function readAgain(deps: WorkerDeps, key: string): Promise<OrderRecord> {
  const fresh = await deps.ledger.get(key);
  if (!fresh)
    throw new TransientError('ledger record vanished while recording an applied refund; will re-check');
  return fresh;
}

/**
 * Where the record says the conversion is (refused, or at its current amount); undefined before it is
 * added. A refund settled by hand sets no amount (`currentAmount` stays what the connector last set):
 * the operator put the conversion at the order's amount less the refunds counted, that one
 * included (not those still pending), and sending `currentAmount` again would undo it.
 */
function recordedTarget(record: OrderRecord): Target | undefined {
  if (record.state === 'refused') return 'refused';
  if (record.state !== 'added') return undefined;
  if (!Object.values(record.refunds).some((r) => r.status === 'manual')) return record.currentAmount;
  const done = countedRefunds(record).filter((r) => r.status !== 'pending');
  return record.originalAmount - done.reduce((sum, r) => sum + r.amount, 0);
}

function appliedOutcome(record: OrderRecord, conversionId: string | undefined, detail: string): Outcome {
  return record.state === 'refused'
    ? { result: 'refused', conversionId, amount: 0, detail }
    : { result: 'refund_applied', conversionId, amount: record.currentAmount, detail };
}

async function setConversion(
  backend: ConversionBackend,
  source: SourceConfig,
  externalId: string,
  conversionId: string,
  target: Target,
  reason: string,
  call: CallOptions,
): Promise<void> {
  if (target === 'refused') await refuseOnce(backend, source.program, externalId, conversionId, reason, call);
  else await backend.updateAmount(source.program, conversionId, target, reason, call);
}

/**
 * A call refused for good: a conversion the platform no longer lets change is a late refund, for
 * finance. Telling one needs the lookup: should it fail transiently, the refund is tried again later.
 * The record as it is now when the look-up shows the conversion refused by a worker beside this one.
 */
async function lateOrThrow(
  deps: WorkerDeps,
  backend: ConversionBackend,
  source: SourceConfig,
  record: OrderRecord,
  conversionId: string,
  refuse: boolean,
  error: ConnectorError,
  call: CallOptions,
): Promise<OrderRecord> {
  const current = await backend.find(source.program, record.externalId, call).catch((lookup: unknown) => {
    if (failureClassOf(lookup) === 'transient') throw lookup;
    return undefined;
  });
  const because = current?.id === conversionId ? lateBecause(current, refuse) : undefined;
  if (current && because) return recordLateRefunds(deps, record, current, because, error);
  // Refused since the record was read again (a full refund or the cancellation beside this worker
  // refused the accepted conversion after its 422): that worker recorded its refund before its
  // call, so the record has moved on, and says what to carry on from.
  const fresh =
    current?.id === conversionId && current.status === 'refused' ? await movedOn(deps, record) : undefined;
  if (fresh) return fresh;
  throw error;
}

/**
 * Why the platform no longer lets `current` change for a refund (one that refuses it when `refuse`):
 * locked, or accepted for an amount (only a pending conversion's amount changes); else undefined.
 */
function lateBecause(current: PlatformConversion, refuse: boolean): LateRefund['because'] | undefined {
  if (current.isLocked) return 'locked';
  return !refuse && current.status === 'accepted' ? 'accepted' : undefined;
}

/**
 * Records the pending refunds as late (with the conversion's amount and commission, for finance's
 * commission adjustment), then throws `LateRefundError`: the message is done, never retried.
 */
async function recordLateRefunds(
  deps: WorkerDeps,
  record: OrderRecord,
  conversion: PlatformConversion,
  because: LateRefund['because'],
  cause: ConnectorError,
): Promise<never> {
  const at = new Date(deps.now()).toISOString();
  const late: LateRefund = {
    because,
    conversionId: conversion.id,
    conversionAmount: conversion.amount ?? record.currentAmount,
    ...(conversion.commission === undefined ? {} : { commission: conversion.commission }),
  };
  const ids: string[] = [];
  for (const refund of countedRefunds(record)) {
    if (refund.status !== 'pending') continue;
    refund.status = 'late';
    // Sent again and late again (the platform locked it between the lookup and the call): it stays
    // listed in the period it was first recorded late, not twice.
    refund.appliedAt = refund.late?.lateAt ?? at;
    refund.late = late;
    refund.outcome =
      because === 'locked'
        ? 'the conversion is locked on the platform: not applied; settle it with a commission adjustment'
        : 'the conversion is accepted: its amount can no longer change; settle it with a commission adjustment';
    ids.push(refund.refundId);
  }
  record.awaitingSince = undefined;
  if (!(await deps.ledger.update(record))) {
    throw new TransientError('ledger changed while recording a late refund; will re-check');
  }
  throw new LateRefundError(
    `late refund ${ids.join(', ')} of order ${record.externalId}: conversion ${conversion.id} is ${because} on the platform; listed by connector late-refunds`,
    { status: cause.status, platformMessage: cause.platformMessage, cause },
  );
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
      // A lookup that fails transiently tells nothing either way: the refusal is tried again later,
      // its message not parked for the platform's 422.
      const current = await backend.find(program, externalId, call).catch((lookup: unknown) => {
        if (failureClassOf(lookup) === 'transient') throw lookup;
        return undefined;
      });
      if (current?.id === conversionId && current.status === 'refused') return;
    }
    throw error;
  }
}

/** The longest reason the connector sends with a refusal or an amount change. */
const MAX_REASON = 250;

/**
 * The reason sent with a refund. It ends with the shop's own note, which may hold an emoji: cut on
 * a character boundary (`shopText`), as half of a surrogate pair is not valid text to send.
 */
function refundReason(
  event: Pick<RefundRecord, 'refundId' | 'reason' | 'full'>,
  refuse: boolean,
  target: number,
  currency: string | undefined,
): string {
  const why = event.reason ? `: ${event.reason}` : '';
  if (event.refundId === CANCELLATION_REFUND_ID)
    return shopText(event.reason ?? 'order cancelled', MAX_REASON);
  if (refuse) {
    return shopText(
      event.full
        ? `order fully refunded (refund ${event.refundId})${why}`
        : `refunds reached the order amount${why}`,
      MAX_REASON,
    );
  }
  return shopText(
    `partial refund ${event.refundId}: amount now ${formatMinor(target, currency)}${why}`,
    MAX_REASON,
  );
}

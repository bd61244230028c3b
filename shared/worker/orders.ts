import { acceptDueAt } from '../accept/due.ts';
import type { SourceConfig } from '../config/sources.ts';
import type { OrderPlaced } from '../domain/events.ts';
import { isConnectorError, PermanentError, TransientError } from '../errors.ts';
import {
  clearLease,
  countedRefunds,
  ledgerKey,
  markedBy,
  markUnconfirmed,
  type OrderRecord,
} from '../ledger.ts';
import type { CallOptions, ConversionBackend, PlatformConversion } from '../ports.ts';
import { type AttributionDecision, decideAttribution, toApiDate } from './attribution.ts';
import {
  CANCELLATION_REFUND_ID,
  DEFAULT_VERIFY_MS,
  foreignRefundReason,
  LEASE_LOST,
  newRecord,
  type Outcome,
  otherCurrencyReason,
  settleMsFor,
  type WorkerDeps,
} from './flow.ts';
import { netHeldRefunds } from './refund-net.ts';
import { ALREADY_REFUSED, applyRefunds, waitForOtherSends } from './refunds.ts';
import { recordShadowed } from './shadow.ts';

/**
 * The order flow: an OrderPlaced becomes one Conversion Add, exactly once, through a lease in the
 * ledger; refunds that came before it are subtracted from the amount it sends.
 */

/**
 * Leeway for this worker's own lease: the wait it asked for comes back as a timer that may fire a
 * hair early. Far below any add's duration, so it never cuts into an add still in flight.
 */
const OWN_LEASE_LEEWAY_MS = 100;

export async function placeOrder(
  deps: WorkerDeps,
  source: SourceConfig,
  event: OrderPlaced,
  call: CallOptions,
): Promise<Outcome> {
  const backend = deps.backendFor(source);
  const key = ledgerKey(source.program, event.externalId);
  const iso = () => new Date(deps.now()).toISOString();

  // Most orders are new: the first round writes the record without reading it first, its
  // condition (no record under this key) standing in for the read; a record already there fails
  // it, and the next rounds read and decide. Up to three rounds after that: a lost race on the
  // conditional write re-reads and decides again.
  for (let round = 0; round < 4; round++) {
    const existing = round === 0 ? undefined : await deps.ledger.get(key);
    let record: OrderRecord;
    let lookedUp = false;

    if (existing && existing.state !== 'awaiting' && existing.source !== source.id && !existing.imported) {
      throw new PermanentError(
        `order ${event.externalId} from source "${source.id}" has the externalId of an order from source ` +
          `"${existing.source}" in program ${source.program}: set "externalIdPrefix" on one of the two ` +
          'sources to keep their order ids apart, then replay this message',
      );
    }
    if (existing && existing.state !== 'awaiting') {
      const pending = hasPendingRefunds(existing);
      if (existing.state === 'added' && source.mode === 'live' && (pending || existing.unconfirmedSend)) {
        // Refunds held for the order that its add or adoption did not get to apply (the update, or
        // the lookup it needed, failed): their own messages are done, so this retry applies them. Or a
        // worker of this message that applied them died after its call, and another worker has
        // recorded them applied since: its target may have reached the platform after the ledger's,
        // so this delivery sends the ledger's again (`applyRefunds`), once no other delivery of
        // the message may still be sending. The mark goes in a write before any call (a record
        // written before it existed has none yet).
        waitForOtherSends(deps, existing, undefined);
        if (!markedBy(existing, deps.workerId)) {
          markUnconfirmed(existing, deps.workerId, deps.now() + deps.leaseMs);
          if (!(await deps.ledger.update(existing))) continue;
        }
        const outcome = await applyRefunds(deps, backend, source, existing, undefined, call);
        return {
          ...outcome,
          detail: pending
            ? 'order already added: applied the refunds held for it'
            : "order already added: its last delivery's call was unconfirmed, sent the ledger's amount again",
        };
      }
      if (
        existing.state === 'added' ||
        existing.state === 'skipped' ||
        existing.state === 'refused' ||
        (existing.state === 'shadowed' && source.mode === 'shadow')
      ) {
        return {
          result: 'duplicate',
          detail: `order already ${existing.state}`,
          conversionId: existing.conversionId,
        };
      }
      if (existing.state === 'adding' && !leaseOver(deps, existing)) {
        const held =
          existing.leaseOwner === deps.workerId
            ? 'the last Conversion Add for this order got no clear answer: waiting for the platform to settle'
            : 'a Conversion Add for this order is in flight in another worker';
        // Also the reason of a message parked on its last receive: the add under the lease may have
        // reached the platform, and a conversion added by hand would then be a second one.
        throw new TransientError(
          `${held}; that add may have gone through: if this message is parked, replay it (the ledger ` +
            'applies it once), do not add the order by hand',
          { retryAfterMs: (existing.leaseUntil ?? 0) - deps.now() },
        );
      }
      // An expired lease (a worker died mid-call, or an unclear add settled), an earlier failure, or
      // an order recorded in shadow mode whose source is live now: take the lease, then ask the
      // platform whether it has the order (an add that went through, or the pixel's conversion)
      // before adding it.
      record = {
        ...existing,
        state: 'adding',
        shadow: source.mode === 'shadow' ? true : undefined,
        leaseOwner: deps.workerId,
        leaseUntil: deps.now() + deps.leaseMs,
        acceptDueAt: acceptDueAt(source, event.orderDate ?? event.receivedAt),
        // A lease that ended without an answer (a worker died mid-add) is as unclear as a timeout.
        // Written with the takeover, so that every later write keeps it: a lookup that fails gives
        // the lease back, and the retry must still wait out the window after that add.
        unclearAddAt:
          existing.unclearAddAt ??
          (existing.state === 'adding' ? existing.leaseUntil || undefined : undefined),
      };
      if (!(await deps.ledger.update(record))) continue;
      // In shadow mode nothing is sent, so there is nothing to look up.
      if (source.mode === 'live') {
        // The conversion found is judged against the order as this event states it: a corrected
        // order (another currency, another amount) after one parked on a conversion in another
        // currency, not the data of the parked attempt. Held refunds that are not its own (another
        // currency, another source) are rejected first, as on a first delivery.
        takeOrder(record, event);
        rejectForeignRefunds(record, event, iso());
        // An add that went through, or the pixel's conversion: the refunds recorded meanwhile
        // (while the order sat in the DLQ, or in shadow mode) apply to it now.
        const adopted = await adoptFromPlatform(
          deps,
          backend,
          source,
          record,
          call,
          'conversion found on the platform after an interrupted add',
        );
        if (adopted) return adopted;
        const unclearAt = record.unclearAddAt;
        const verifyMs = deps.verifyMs ?? DEFAULT_VERIFY_MS;
        const left = unclearAt === undefined || verifyMs <= 0 ? 0 : unclearAt + verifyMs - deps.now();
        if (left > 0) {
          // An add may still land: ask again when the window ends, the message hidden until then.
          record.leaseUntil = deps.now() + left;
          await deps.ledger.update(record).catch(() => undefined);
          throw new TransientError(
            `the last Conversion Add for this order got no clear answer and the platform shows nothing yet: no new add before ${new Date(deps.now() + left).toISOString()} (verification window)`,
            { retryAfterMs: left, ambiguous: true },
          );
        }
        record.unclearAddAt = undefined;
        lookedUp = true;
      }
    } else {
      record = existing
        ? { ...existing, source: source.id, state: 'adding' }
        : newRecord(deps, source, event.externalId, {
            state: 'adding',
            originalAmount: event.amount,
            currentAmount: event.amount,
            currency: event.currency,
          });
      if (source.mode === 'shadow') record.shadow = true;
      record.leaseOwner = deps.workerId;
      record.leaseUntil = deps.now() + deps.leaseMs;
      // Indexed only once the conversion is added (see `awaitsAccept`).
      record.acceptDueAt = acceptDueAt(source, event.orderDate ?? event.receivedAt);
    }

    // The add goes out with this event's data (a corrected order replayed after a failure), written
    // to the ledger first so the ledger always holds what was sent. One path for a new order, one
    // whose refunds came first and one replayed from the DLQ: a replay checks the refunds held for
    // it (cancelled meanwhile? another currency?) as a first delivery does.
    const prepared = prepareOrder(record, event, source, iso(), existing?.state === 'shadowed');
    if (!(await (existing ? deps.ledger.update(record) : deps.ledger.create(record)))) continue;
    if ('notAdded' in prepared) return { result: 'skipped', detail: prepared.notAdded };
    if (!lookedUp && source.lookupBeforeAdd && source.mode === 'live') {
      const adopted = await adoptFromPlatform(
        deps,
        backend,
        source,
        record,
        call,
        'the platform already had this order (lookupBeforeAdd): adopted it',
      );
      if (adopted) return adopted;
    }
    return addConversion(deps, backend, source, event, record, prepared.add, call);
  }
  throw new TransientError('the ledger record kept changing under this worker; will retry');
}

/** How an order is added (tracking or manual), or why it is not. */
type Prepared =
  | { readonly add: Exclude<AttributionDecision, { kind: 'skip' }> }
  | { readonly notAdded: string };

/**
 * Writes the order into `record` as its add will send it, or settles the record when the order is
 * not to be added: no affiliate signal (skipped, and its held refunds with it), or refunds held for
 * it that cover it (never added). Refunds held for it that were not its own are rejected.
 */
function prepareOrder(
  record: OrderRecord,
  event: OrderPlaced,
  source: SourceConfig,
  at: string,
  wasShadowed: boolean,
): Prepared {
  const decision = decideAttribution(event, source.unattributed);
  if (decision.kind === 'skip') {
    record.state = 'skipped';
    record.skipReason = decision.reason;
    record.originalAmount = event.amount;
    record.currentAmount = event.amount;
    record.currency = event.currency;
    // The pixel may have seen the click: should a refund after the switch adopt its conversion, the
    // refunds are turned net from the order's lines (see `refundOrder`), and the accept job takes it
    // on the due date set above from the order's date, as a `shadowed` order's (the record keeps no
    // order date; a skipped record is never offered to the job: `awaitsAccept`).
    if (source.mode === 'shadow') record.refundBasis = event.basis;
    else record.acceptDueAt = undefined;
    clearLease(record);
    settleHeldRefunds(
      record,
      'skipped',
      `order was skipped (${decision.reason}): no conversion to change`,
      at,
    );
    return { notAdded: decision.reason };
  }
  record.kind = decision.kind;
  takeOrder(record, event);
  rejectForeignRefunds(record, event, at);
  const covered = refundsCoverOrder(record);
  if (!covered) return { add: decision };
  const why = wasShadowed
    ? 'cancelled or refunded in full while its source was in shadow mode: never added'
    : covered;
  neverAdded(record, why, at);
  return { notAdded: why };
}

function hasPendingRefunds(record: OrderRecord): boolean {
  return countedRefunds(record).some((r) => r.status === 'pending');
}

/**
 * Writes the order's data into the record, as the add will send it: the amount is the order's minus
 * the refunds already recorded against it (refunds that came before the order), those turned net
 * now against the lines the order brings (its refund basis, kept for later refunds too).
 */
function takeOrder(record: OrderRecord, event: OrderPlaced): void {
  record.originalAmount = event.amount;
  record.currency = event.currency;
  record.refundBasis = event.basis;
  netHeldRefunds(record);
  record.currentAmount = event.amount - countedRefunds(record).reduce((sum, r) => sum + r.amount, 0);
}

/**
 * Held refunds the order shows were not its own: a shop refund from another source, or one in
 * another currency. They are rejected with the reason; the order goes ahead.
 */
function rejectForeignRefunds(record: OrderRecord, event: OrderPlaced, at: string): void {
  for (const refund of countedRefunds(record)) {
    if (refund.status !== 'pending') continue;
    const why = foreignRefundReason(refund, event.source, event.currency);
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

/** Settles an order whose refunds covered it before it was added: skipped, its refunds closed. */
function neverAdded(record: OrderRecord, why: string, at: string): void {
  record.state = 'skipped';
  record.skipReason = why;
  record.currentAmount = 0;
  clearLease(record);
  settleHeldRefunds(record, 'applied', why, at);
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
  decision: Exclude<AttributionDecision, { kind: 'skip' }>,
  call: CallOptions,
): Promise<Outcome> {
  if (source.mode === 'shadow') return recordShadowed(deps, record);
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
      const adopted = await adoptFromPlatform(
        deps,
        backend,
        source,
        record,
        call,
        'the platform already had this order (409): adopted it',
      );
      if (adopted) return adopted;
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
  // The add is done. Its id, when the answer carries one; the platform does not document that it
  // does, and looking it up now would take a second call (on the token's Conversion info budget,
  // shared with every other client) for each order. A refund or the accept job needs the id: each
  // looks it up then and keeps it, for the few orders it touches.
  // The amount added is the order's less every refund held for it (`takeOrder`): they are applied
  // with it, and recorded so in the same write. Nothing more to send, so nothing to look up.
  const at = new Date(deps.now()).toISOString();
  for (const refund of countedRefunds(record)) {
    if (refund.status !== 'pending') continue;
    refund.status = 'applied';
    refund.appliedAt = at;
    refund.resultingAmount = record.currentAmount;
  }
  record.awaitingSince = undefined;
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

/** Conversion info for the leased order; a failed lookup gives the lease back before it throws. */
async function findUnderLease(
  deps: WorkerDeps,
  backend: ConversionBackend,
  source: SourceConfig,
  record: OrderRecord,
  call: CallOptions,
): Promise<PlatformConversion | undefined> {
  return backend.find(source.program, record.externalId, call).catch(async (error: unknown) => {
    await releaseLease(deps, record);
    throw error;
  });
}

/**
 * Expires our lease so the next attempt reconciles through Conversion info instead of waiting. The
 * record keeps its `unclearAddAt`: an add that may still land holds back the next one all the same.
 */
async function releaseLease(deps: WorkerDeps, record: OrderRecord): Promise<void> {
  record.leaseUntil = 0;
  await deps.ledger.update(record).catch(() => undefined);
}

/**
 * Looks the leased order up and adopts the conversion the platform already has for it (an
 * interrupted add that went through, the pixel's, or the one an add answered 409 for), then applies
 * the refunds held for the order to it: the platform's amount is where it stands, and the target is
 * absolute, so nothing is sent when it is there already. A conversion shown without an amount is
 * taken at the order's, so that the target is sent (harmless if the conversion has it). Undefined
 * when the platform has none; a failed lookup gives the lease back before it throws. A conversion in
 * another currency than the order's is not adopted: the order is parked (see `notAdopted`); a refused
 * one is adopted as refused, its refunds closed (see `adoptRefused`).
 */
async function adoptFromPlatform(
  deps: WorkerDeps,
  backend: ConversionBackend,
  source: SourceConfig,
  record: OrderRecord,
  call: CallOptions,
  detail: string,
): Promise<Outcome | undefined> {
  const found = await findUnderLease(deps, backend, source, record, call);
  if (!found) return undefined;
  const otherMoney = otherCurrencyReason(record, found);
  if (otherMoney) return notAdopted(deps, record, otherMoney);
  if (found.status === 'refused') return adoptRefused(deps, record, found, detail);
  record.currentAmount = found.amount ?? record.originalAmount;
  // The refunds held for the order are applied below, with calls this message has no refund of its
  // own to mark: the record is marked instead, in the write before them (see `applyRefunds`).
  if (hasPendingRefunds(record)) markUnconfirmed(record, deps.workerId, deps.now() + deps.leaseMs);
  const outcome = await settleAdded(deps, record, found.id, 'reconciled');
  if (outcome.result === 'reconciled' && hasPendingRefunds(record)) {
    return applyRefunds(deps, backend, source, record, undefined, call);
  }
  return { ...outcome, detail };
}

/**
 * Records `found`, a conversion the platform shows refused, as the order's: `refused` with its id,
 * its lease cleared, never accepted, the refunds held for the order closed (`at`). Shared by the
 * worker's adoption and `reconcile --repair` of a stuck add.
 */
export function takeRefused(
  record: OrderRecord,
  found: Pick<PlatformConversion, 'id' | 'amount'>,
  at: string,
): void {
  record.state = 'refused';
  record.conversionId = found.id;
  record.currentAmount = found.amount ?? record.originalAmount;
  record.acceptDueAt = undefined;
  clearLease(record);
  record.lastError = undefined;
  record.unclearAddAt = undefined;
  settleHeldRefunds(record, 'skipped', ALREADY_REFUSED, at);
}

/**
 * Adopts a conversion the platform has refused (the advertiser refused the pixel's, or the add that
 * went through): the record says `refused`, with its id, and is never accepted; the refunds held for
 * the order are closed, as nothing is sent to a refused conversion (an update of one is answered 422).
 */
async function adoptRefused(
  deps: WorkerDeps,
  record: OrderRecord,
  found: PlatformConversion,
  detail: string,
): Promise<Outcome> {
  takeRefused(record, found, new Date(deps.now()).toISOString());
  if (!(await deps.ledger.update(record))) {
    return { result: 'duplicate', detail: LEASE_LOST, conversionId: found.id };
  }
  return {
    result: 'already_refused',
    conversionId: found.id,
    detail: `${detail}; it is refused on the platform: nothing sent`,
  };
}

/**
 * Parks the leased order instead of adopting a conversion it cannot be (another currency): the record
 * is `failed` with the reason, without the conversion's id, its held refunds still pending, so that
 * a replay looks the order up again (and adopts, or adds) once the platform has been put right.
 */
async function notAdopted(deps: WorkerDeps, record: OrderRecord, reason: string): Promise<never> {
  record.state = 'failed';
  record.lastError = reason;
  clearLease(record);
  // A lost write: another worker took the lease over, and looks the order up itself.
  await deps.ledger.update(record);
  throw new PermanentError(reason);
}

async function settleAdded(
  deps: WorkerDeps,
  record: OrderRecord,
  conversionId: string | undefined,
  result: 'added' | 'reconciled',
): Promise<Outcome> {
  record.state = 'added';
  record.conversionId = conversionId;
  clearLease(record);
  record.lastError = undefined;
  record.unclearAddAt = undefined;
  if (!(await deps.ledger.update(record))) {
    // Our lease expired and another worker took over; it reconciles through Conversion info.
    return { result: 'duplicate', detail: LEASE_LOST, conversionId };
  }
  return { result, conversionId, amount: record.currentAmount };
}

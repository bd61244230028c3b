import type { SourceConfig } from '../config/sources.ts';
import type { OrderRefunded } from '../domain/events.ts';
import { PermanentError, TransientError } from '../errors.ts';
import {
  clearLease,
  countedRefunds,
  ledgerKey,
  type OrderRecord,
  recordRefund,
  refundOf,
} from '../ledger.ts';
import { LEASE_LOST, newRecord, type Outcome, type WorkerDeps } from './flow.ts';
import { heldEntry, netRefund, refundEntry, refundsBefore } from './refund-net.ts';

/**
 * Shadow mode (`SourceConfig.mode`): the order and refund flows run as usual up to the platform call,
 * which is replaced by a ledger write. Nothing here calls the platform.
 */

/** Settles a shadow source's order: the record holds what the add would have sent. */
export async function recordShadowed(deps: WorkerDeps, record: OrderRecord): Promise<Outcome> {
  record.state = 'shadowed';
  record.shadow = true;
  clearLease(record);
  record.lastError = undefined;
  // Refunds that came first stay pending: the add a live source makes later subtracts them.
  record.awaitingSince = undefined;
  if (!(await deps.ledger.update(record))) {
    return { result: 'duplicate', detail: LEASE_LOST };
  }
  return {
    result: 'shadowed',
    amount: record.currentAmount,
    detail: 'shadow mode: recorded in the ledger, not sent to the platform',
  };
}

/**
 * A refund of a shadow source: recorded (pending, as the live flow would hold it) and not sent. The
 * record's `currentAmount` follows, so the ledger shows what the conversion would be now. Should the
 * source go live, the order's next delivery or replay applies the pending refunds to the conversion it
 * adopts or adds.
 */
export async function recordShadowRefund(
  deps: WorkerDeps,
  source: SourceConfig,
  event: OrderRefunded,
): Promise<Outcome> {
  const key = ledgerKey(source.program, event.externalId);
  const iso = new Date(deps.now()).toISOString();
  for (let round = 0; round < 3; round++) {
    const existing = await deps.ledger.get(key);
    if (existing?.state === 'adding') {
      throw new TransientError('the order’s conversion is still being added; the refund waits for it');
    }
    if (
      existing &&
      event.origin === 'shop' &&
      existing.source !== source.id &&
      existing.state !== 'awaiting'
    ) {
      throw new PermanentError(
        `refund from source "${source.id}" for order ${event.externalId} of source "${existing.source}": a shop ` +
          'may only refund its own orders',
      );
    }
    const known = existing && refundOf(existing, event.refundId);
    if (known)
      return { result: 'refund_duplicate', detail: `refund ${event.refundId} already ${known.status}` };
    if (existing?.state === 'added' && !existing.shadow) {
      // A source switched back to shadow mode: the conversion is one the connector added or adopted
      // while live, so no later delivery of the order applies a refund held here, and the pixel
      // cannot take it back. Parked unrecorded: its replay once live goes through the live flow whole.
      throw new PermanentError(
        `source "${source.id}" is in shadow mode, but the conversion of order ${event.externalId} was added ` +
          `by the connector while the source was live: refund ${event.refundId} is not sent in shadow mode ` +
          'and nothing else would send it; replay this message once the source is live again',
      );
    }
    const record: OrderRecord =
      existing ??
      newRecord(deps, source, event.externalId, {
        state: 'awaiting',
        originalAmount: 0,
        currentAmount: 0,
        awaitingSince: iso,
        shadow: true,
      });
    const skipped =
      record.state === 'skipped' || record.state === 'refused'
        ? `order was ${record.state}: no conversion to change`
        : undefined;
    const wrongCurrency =
      event.currency && record.currency && event.currency !== record.currency
        ? `refund currency ${event.currency} differs from the order's ${record.currency}`
        : undefined;
    const noAmount =
      !event.full && event.amount === undefined ? 'refund has neither an amount nor full' : undefined;
    const rejected = wrongCurrency ?? noAmount;
    const entry =
      record.state === 'shadowed' ? refundEntry(event, source, iso) : heldEntry(event, source, iso);
    // Netted from the order's lines as the live flow would: the shadow ledger shows what it would send.
    if (record.state === 'shadowed' && entry.status === 'pending')
      netRefund(record.refundBasis, entry, refundsBefore(record, entry));
    entry.status = skipped ? 'skipped' : rejected ? 'rejected' : 'pending';
    if (skipped || rejected) entry.outcome = skipped ?? rejected;
    recordRefund(record, entry);
    if (record.state === 'shadowed') {
      const counted = countedRefunds(record);
      const left = record.originalAmount - counted.reduce((sum, r) => sum + r.amount, 0);
      record.currentAmount = counted.some((r) => r.full) || left < 0 ? 0 : left;
    }
    if (!(await (existing ? deps.ledger.update(record) : deps.ledger.create(record)))) continue;
    if (rejected) throw new PermanentError(rejected);
    if (skipped) return { result: 'refund_skipped', detail: skipped };
    if (record.state === 'awaiting' || record.state === 'failed') {
      return {
        result: 'refund_waiting',
        detail: `refund ${event.refundId} held until order ${event.externalId} is recorded`,
      };
    }
    return {
      result: 'refund_shadowed',
      amount: record.currentAmount,
      detail: 'shadow mode: refund recorded in the ledger, not sent to the platform',
    };
  }
  throw new TransientError('the ledger record kept changing under this worker; will retry');
}

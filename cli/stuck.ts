import type { AffiliateClient } from '../shared/affiliate/client.ts';
import type { Conversion } from '../shared/affiliate/schemas.ts';
import type { OrderRecord } from '../shared/ledger.ts';
import type { Ledger } from '../shared/ports.ts';
import { otherCurrencyReason } from '../shared/worker/flow.ts';
import { takeRefused } from '../shared/worker/orders.ts';

/**
 * A ledger record left in `adding` for good: its worker died mid-add and its message is gone (a
 * crash of a local stack without LOCAL_DATA_DIR, a purged queue), so no redelivery will ever settle
 * it. The lease and the settle period are seconds; a quarter of an hour past both is not in flight.
 */
export const STUCK_ADD_AFTER_MS = 15 * 60_000;

export function isStuckAdd(record: OrderRecord, now: number): boolean {
  return record.state === 'adding' && now - addLeftAt(record) > STUCK_ADD_AFTER_MS;
}

/** When the add was last held: its lease's end, or the last write when the lease was released (0). */
export function addLeftAt(record: OrderRecord): number {
  return record.leaseUntil ? record.leaseUntil : Date.parse(record.updatedAt) || 0;
}

export type StuckRepair =
  | {
      readonly action: 'added';
      readonly externalId: string;
      readonly conversionId: string;
      /** The record as repaired (as it would be, in a dry run), and the conversion it was given. */
      readonly record: OrderRecord;
      readonly conversion: Conversion;
    }
  | { readonly action: 'failed'; readonly externalId: string }
  | { readonly action: 'unchanged'; readonly externalId: string; readonly why: string };

/**
 * What repairing a stuck add does, decided by the platform (Conversion info by externalId): the add
 * went through → `added` with its conversion (`refused` when the platform shows it refused, its held
 * refunds closed, as the worker adopts one); it did not → `failed`, so that the order sent again
 * (or replayed) is added once. A conversion in another currency than the order's is not its add
 * (`otherCurrencyReason`, as the worker decides): the record is left as it is, with the reason.
 * Nothing is written when `apply` is false (the dry run). The record, lost to a writer meanwhile (a
 * worker, or another repair run at once), is left to it.
 */
export async function repairStuckAdd(
  ledger: Pick<Ledger, 'get' | 'update'>,
  client: Pick<AffiliateClient, 'conversionInfo'>,
  record: OrderRecord,
  now: number,
  apply: boolean,
): Promise<StuckRepair> {
  const { externalId } = record;
  const found = await client.conversionInfo({ program: record.program, externalId });
  const current = await ledger.get(record.key);
  if (!current || !isStuckAdd(current, now)) {
    return {
      action: 'unchanged',
      externalId,
      why: 'no longer stuck (settled meanwhile by a worker or another repair)',
    };
  }
  const otherMoney = found && otherCurrencyReason(current, found);
  if (otherMoney) return { action: 'unchanged', externalId, why: otherMoney.replace(/, then replay.*$/, '') };
  // The dead worker's add may still land: the worker taking its lease over counts the verification
  // window from the lease's end (`placeOrder`), which `failed` no longer shows; kept, its order sent
  // again waits the window out as it would have.
  const unclearAddAt = current.unclearAddAt ?? (current.leaseUntil || undefined);
  current.leaseOwner = undefined;
  current.leaseUntil = undefined;
  current.updatedAt = new Date(now).toISOString();
  if (found?.status === 'refused') {
    // As the worker adopts a refused conversion: never accepted, nothing sent to it (an update or an
    // accept of it is refused), the refunds held for the order closed.
    takeRefused(current, found, new Date(now).toISOString());
  } else if (found) {
    current.state = 'added';
    current.conversionId = found.id;
    current.lastError = undefined;
    current.unclearAddAt = undefined;
    if (found.amount === current.currentAmount) settleCarriedRefunds(current, now);
    // Not the add's amount (the pixel's conversion, a hand-made one): taken as the platform shows it,
    // as the worker adopts a conversion it finds. The ledger's amount is where the platform stands
    // for every later send: left at the add's, the order sent again would take its held refunds as
    // applied already and send nothing.
    else current.currentAmount = found.amount ?? current.originalAmount;
  } else {
    current.state = 'failed';
    current.unclearAddAt = unclearAddAt;
    current.lastError =
      'repaired a stuck add: the platform has no conversion; send the order again or replay it from the DLQ';
  }
  if (apply && !(await ledger.update(current))) {
    return { action: 'unchanged', externalId, why: 'changed meanwhile by a worker or another repair' };
  }
  return found
    ? { action: 'added', externalId, conversionId: found.id, record: current, conversion: found }
    : { action: 'failed', externalId };
}

/**
 * The add that went through sent the record's `currentAmount`: the order's amount less the refunds
 * held for it, written before the call. When the platform shows that amount, those refunds went with
 * the add, and are recorded applied as the worker records them when it settles an add itself;
 * left pending, `status` would call them in flight and the accept job would hold the conversion.
 * At another amount they stay pending, and no message is left to apply them: the repair says so, and
 * the order sent again applies them (`placeOrder`).
 */
function settleCarriedRefunds(record: OrderRecord, now: number): void {
  const at = new Date(now).toISOString();
  for (const refund of Object.values(record.refunds)) {
    if (refund.status !== 'pending') continue;
    refund.status = 'applied';
    refund.appliedAt = at;
    refund.resultingAmount = record.currentAmount;
  }
  record.awaitingSince = undefined;
}

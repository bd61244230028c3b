import type { Conversion } from '../shared/affiliate/schemas.ts';
import type { OrderRecord } from '../shared/ledger.ts';
import { formatMinor, otherCurrency } from '../shared/money.ts';
import { addLeftAt, isStuckAdd } from './stuck.ts';

/**
 * How an order's ledger record and its conversion on the platform disagree, for `status` and
 * `reconcile`. The ledger is what the connector did; the platform is what is paid on.
 */
export type DifferenceKind =
  | 'missing'
  | 'unexpected'
  | 'amount_mismatch'
  | 'status_mismatch'
  | 'duplicate'
  /** `adding` long after its lease: see `stuck.ts`. */
  | 'stuck_add'
  /** `failed` with no conversion on the platform: see `failedAddDifference`. */
  | 'failed_add';

export interface Difference {
  readonly kind: DifferenceKind;
  readonly program: string;
  readonly externalId: string;
  readonly conversionId?: string;
  readonly ledgerState?: string;
  readonly ledgerAmount?: number;
  readonly platformStatus?: string;
  readonly platformAmount?: number;
  /** The ledger's currency (the platform's when the ledger has none). */
  readonly currency?: string;
  /** The platform's currency, when it is not `currency`: its amount is in that one's minor units. */
  readonly platformCurrency?: string;
  readonly detail: string;
}

/** Ledger states that mean "a conversion exists on the platform". */
const ON_PLATFORM = new Set(['added', 'refused']);

/** An amount for a person (`EUR 49.90`), `-` when there is none. */
export function money(amount: number | undefined, currency: string | undefined): string {
  if (amount === undefined) return '-';
  if (!Number.isSafeInteger(amount)) return String(amount);
  return formatMinor(amount, currency);
}

/**
 * The differences between one order's record and its conversion(s) on the platform; none when they
 * agree. An add in flight (`adding`) is not judged, unless it was left unfinished long before `now`,
 * nor is a shadow source's record. A `failed` record without a conversion is a `failed_add`.
 */
export function compareOrder(
  program: string,
  externalId: string,
  record: OrderRecord | undefined,
  conversions: readonly Conversion[],
  now?: number,
): Difference[] {
  const [conversion] = conversions;
  const base = {
    program,
    externalId,
    conversionId: conversion?.id ?? record?.conversionId,
    ledgerState: record?.state,
    ledgerAmount: record && ON_PLATFORM.has(record.state) ? record.currentAmount : undefined,
    platformStatus: conversion?.status,
    platformAmount: conversion?.amount,
    currency: record?.currency ?? conversion?.currency,
    // The worker's rule (it parks an order on such a conversion): the same number is other money.
    ...(otherCurrency(record?.currency, conversion?.currency)
      ? { platformCurrency: conversion?.currency }
      : {}),
  };
  const platformCurrency = base.platformCurrency ?? base.currency;
  const out: Difference[] = [];
  if (conversions.length > 1) {
    out.push({
      ...base,
      kind: 'duplicate',
      detail: `${conversions.length} conversions on the platform for one order: ${conversions.map((c) => c.id).join(', ')}`,
    });
  }
  if (!record) {
    if (conversion) out.push({ ...base, kind: 'unexpected', detail: 'on the platform, not in the ledger' });
    return out;
  }
  if (record.state === 'adding') {
    if (now !== undefined && isStuckAdd(record, now)) out.push(stuckAddDifference(program, record, now));
    return out;
  }
  if (record.state === 'failed' && !conversion) return [failedAddDifference(program, record)];
  // A shadow source sent nothing: the pixel's conversion is compared by `connector shadow-report`.
  if (record.shadow) return out;
  if (!conversion) {
    if (ON_PLATFORM.has(record.state)) {
      out.push({
        ...base,
        kind: 'missing',
        detail: `the ledger says ${record.state}, the platform has no conversion`,
      });
    }
    return out;
  }
  if (!ON_PLATFORM.has(record.state)) {
    const why = record.skipReason ?? record.lastError;
    out.push({
      ...base,
      kind: 'unexpected',
      detail: `the ledger says ${record.state}${why ? ` (${why})` : ''}, yet the platform has a conversion`,
    });
    return out;
  }
  const refusedThere = conversion.status === 'refused';
  if (record.state === 'refused' && !refusedThere) {
    out.push({
      ...base,
      kind: 'status_mismatch',
      detail: `refused in the ledger, ${conversion.status} on the platform`,
    });
  } else if (record.state === 'added' && refusedThere) {
    out.push({
      ...base,
      kind: 'status_mismatch',
      detail: `refused on the platform${conversion.refuseReason ? ` (${conversion.refuseReason})` : ''}, not in the ledger`,
    });
  }
  if (
    record.state === 'added' &&
    typeof conversion.amount === 'number' &&
    (conversion.amount !== record.currentAmount || base.platformCurrency !== undefined)
  ) {
    const pending = Object.values(record.refunds).some((r) => r.status === 'pending');
    // A refund settled by hand (`connector dlq discard`) leaves the ledger at the amount the connector
    // last set: the platform's may differ by what the operator changed there.
    const byHand = Object.values(record.refunds).some((r) => r.status === 'manual');
    const note = pending
      ? ' (a refund is being applied)'
      : byHand
        ? ' (a refund was settled by hand: the ledger keeps the amount the connector last set)'
        : '';
    out.push({
      ...base,
      kind: 'amount_mismatch',
      detail: `ledger ${money(record.currentAmount, record.currency)}, platform ${money(conversion.amount, platformCurrency)}${note}`,
    });
  }
  return out;
}

/** The `stuck_add` difference of a record `isStuckAdd` finds. */
export function stuckAddDifference(program: string, record: OrderRecord, now: number): Difference {
  const minutes = Math.floor((now - addLeftAt(record)) / 60_000);
  return {
    kind: 'stuck_add',
    program,
    externalId: record.externalId,
    ...(record.conversionId ? { conversionId: record.conversionId } : {}),
    ledgerState: record.state,
    ...(record.currency ? { currency: record.currency } : {}),
    detail: `an add left unfinished ${minutes} min ago and no worker will settle it: connector reconcile --repair looks it up on the platform`,
  };
}

/**
 * The `failed_add` difference of a `failed` record the platform has no conversion of: the order is
 * paid to no affiliate until it is added. The ledger writes `failed` when the platform refused the
 * add for good (its message parked in the DLQ with the reason, until replayed or discarded; the DLQ
 * keeps it 14 days) and when `reconcile --repair` found nothing for a stuck add (its message gone,
 * or parked on its last receive). Which one holds, the CLI cannot tell without reading the DLQ: the
 * detail gives both ways out, then the ledger's reason whole.
 */
export function failedAddDifference(program: string, record: OrderRecord): Difference {
  return {
    kind: 'failed_add',
    program,
    externalId: record.externalId,
    ledgerState: record.state,
    ledgerAmount: record.currentAmount,
    ...(record.currency ? { currency: record.currency } : {}),
    detail: `no conversion on the platform: ${failedOrderWayOut(record.externalId)}; the ledger holds it failed: ${record.lastError ?? 'no reason recorded'}`,
  };
}

/**
 * What adds an order the ledger holds `failed`, true whichever made it so: its message replayed if
 * it is parked, else the order sent again (a message discarded, expired after the DLQ's 14 days, or
 * a stuck add `reconcile --repair` turned failed, which never had one there). For `failed_add` and
 * the refunds held for such an order.
 */
export function failedOrderWayOut(externalId: string): string {
  return (
    `replay the order's message if it is parked (connector dlq list --external-id ${externalId}), ` +
    'else send the order again (the shop, or connector backfill)'
  );
}

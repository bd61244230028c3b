import type { SourceConfig } from '../config/sources.ts';
import type { BasisLine, OrderRefunded, RefundBasis, RefundLine } from '../domain/events.ts';
import { countedRefunds, type OrderRecord, paidBackRefunds, type RefundRecord } from '../ledger.ts';
import { prorateMinor, sumMinor } from '../money.ts';

/**
 * A refund's net amount from what the order said (issue 19). The adapter cannot compute it: a
 * Shopify refund does not say whether the order's prices included tax, a WooCommerce or Stripe one
 * states only the gross paid back. The worker holds the order's `RefundBasis` in the ledger, so it
 * turns the refund net here:
 *
 * - from the refund's lines: a net the line states is taken as is (WooCommerce); else the recorded
 *   order line's net share for the quantity refunded (Shopify), whatever else the same transaction
 *   paid back; else the line's own money, less its tax when the order's prices included it;
 * - from a gross alone: the share of one recorded line whose gross it is exactly, or of every line
 *   left when it is all that is left, else the order's net/gross ratio over its lines (approximate);
 * - without a basis (an order older than the connector, or a payload without lines) the adapter's
 *   amount stands, and `amountFrom` says so.
 *
 * Shares are cumulative: the n-th unit of a line refunded gets `share(n) − share(n − 1)`, so the
 * refunds of a whole line add up to its net exactly, whatever the rounding of each.
 */

/** What `amountFrom` says when the ledger holds no lines of the order. */
export const CURRENT_RULES =
  "current rules: the ledger holds no lines of this order (placed before the connector, or its payload had none), so the adapter's amount stands";

/** What `amountFrom` says of a refund held before its order. */
export const HELD_RULES = "the adapter's amount, until its order arrives with its lines";

interface Computed {
  readonly amount: number;
  readonly from: string;
  readonly lines?: RefundLine[];
}

/** Quantity of each order line the `earlier` refunds took. */
function refundedQuantities(earlier: readonly RefundRecord[]): Map<string, number> {
  const done = new Map<string, number>();
  for (const refund of earlier) {
    if (refund.full) continue;
    for (const line of refund.lines ?? []) {
      if (line.id !== undefined) done.set(line.id, (done.get(line.id) ?? 0) + line.quantity);
    }
  }
  return done;
}

/** The part of `total` that `quantity` more units of `ordered` take after `done` were refunded. */
function share(total: number, done: number, quantity: number, ordered: number): number {
  const upTo = (n: number) => prorateMinor(total, Math.min(n, ordered), ordered, 'refund');
  return upTo(done + quantity) - upTo(done);
}

function basisLines(basis: RefundBasis): Map<string, BasisLine> {
  return new Map(basis.lines.map((l) => [l.id, l]));
}

/** A refund line's own money, less its tax when the order's prices included it. */
function ownNet(basis: RefundBasis, line: RefundLine): number | undefined {
  if (line.amount === undefined) return undefined;
  return Math.max(0, line.amount - (basis.taxesIncluded ? (line.tax ?? 0) : 0));
}

function fromLines(
  basis: RefundBasis,
  lines: readonly RefundLine[],
  done: Map<string, number>,
): Computed | undefined {
  const recorded = basisLines(basis);
  const parts: number[] = [];
  let matched = 0;
  for (const line of lines) {
    const order = line.id === undefined ? undefined : recorded.get(line.id);
    if (line.net !== undefined) {
      parts.push(line.net);
      if (order) done.set(order.id, (done.get(order.id) ?? 0) + line.quantity);
    } else if (order && line.quantity > 0) {
      const before = done.get(order.id) ?? 0;
      const net = share(order.net, before, line.quantity, order.quantity);
      const own = ownNet(basis, line);
      // A line paid back for less than its share (refunded below its price) counts as what it paid
      // back; a difference of rounding (a minor unit per unit) keeps the share, so shares add up.
      parts.push(own !== undefined && net - own > line.quantity ? own : net);
      done.set(order.id, before + line.quantity);
      matched++;
    } else if (line.amount !== undefined) {
      parts.push(ownNet(basis, line) ?? 0);
    } else {
      return undefined;
    }
  }
  return {
    amount: sumMinor(parts, 'refund lines'),
    from:
      matched === lines.length
        ? "the order's recorded lines: each line's net share for the quantity refunded"
        : `the refund's own lines (${basis.taxesIncluded ? 'less their tax, ' : ''}the order's tax mode from the ledger)`,
  };
}

/** What the buyer paid for a line: its net and its tax. */
function lineGross(line: BasisLine): number {
  return line.net + line.tax;
}

function fromGross(basis: RefundBasis, gross: number, done: Map<string, number>): Computed {
  for (const line of basis.lines) {
    const before = done.get(line.id) ?? 0;
    const left = line.quantity - before;
    // No share of a line is more than its gross; past it the guess of units could pass 2^53.
    if (left <= 0 || lineGross(line) === 0 || gross > lineGross(line)) continue;
    const guess = prorateMinor(gross, line.quantity, lineGross(line), 'gross');
    for (const quantity of [guess, guess - 1, guess + 1]) {
      if (quantity < 1 || quantity > left) continue;
      if (share(lineGross(line), before, quantity, line.quantity) !== gross) continue;
      return {
        amount: share(line.net, before, quantity, line.quantity),
        lines: [{ id: line.id, quantity }],
        from: `the order's line ${line.id}: its gross for ${quantity} unit(s) matched, turned net at that line's own rate`,
      };
    }
  }
  if (!basis.truncated && basis.lines.length > 0) {
    const rest = basis.lines.flatMap((l) => {
      const before = done.get(l.id) ?? 0;
      return before < l.quantity ? [{ line: l, before, quantity: l.quantity - before }] : [];
    });
    const restGross = sumMinor(
      rest.map((r) => share(lineGross(r.line), r.before, r.quantity, r.line.quantity)),
    );
    if (rest.length > 0 && restGross === gross) {
      return {
        amount: sumMinor(rest.map((r) => share(r.line.net, r.before, r.quantity, r.line.quantity))),
        lines: rest.map((r) => ({ id: r.line.id, quantity: r.quantity })),
        from: "the order's recorded lines: the gross is all the lines left",
      };
    }
  }
  return {
    amount: prorateMinor(gross, basis.net, basis.net + basis.tax, 'gross'),
    from: "approximate: the gross matched no line, turned net with the order's net/gross ratio over its lines",
  };
}

/**
 * Sets the net `amount` of a partial refund of `record`'s order (with `lines`, `amountFrom`), against
 * the counted refunds in `earlier`. A full refund, or one stating only an amount (finance, the
 * generic webhook), is left as it is.
 */
export function netRefund(
  basis: RefundBasis | undefined,
  refund: RefundRecord,
  earlier: readonly RefundRecord[],
): void {
  if (refund.full || (refund.lines === undefined && refund.gross === undefined)) return;
  if (!basis) {
    refund.amountFrom = CURRENT_RULES;
    return;
  }
  const done = refundedQuantities(earlier);
  const computed =
    refund.gross !== undefined
      ? fromGross(basis, refund.gross, done)
      : fromLines(basis, refund.lines ?? [], done);
  if (!computed) {
    refund.amountFrom = `current rules: a refund line names no recorded order line and states no amount, so the adapter's amount stands`;
    return;
  }
  refund.amount = computed.amount;
  refund.amountFrom = computed.from;
  // Only what later refunds' shares need stays in the ledger: the order lines and quantities taken.
  const taken = (computed.lines ?? refund.lines ?? []).flatMap((l) =>
    l.id !== undefined && basisLines(basis).has(l.id) ? [{ id: l.id, quantity: l.quantity }] : [],
  );
  if (taken.length > 0) refund.lines = taken;
  else delete refund.lines;
}

/**
 * The refunds of `record` other than `refund` that paid lines back, those a new refund's shares
 * follow: the counted ones, and the late ones, which the buyer got back though the platform's
 * amount could not follow.
 */
export function refundsBefore(record: OrderRecord, refund: RefundRecord): RefundRecord[] {
  return paidBackRefunds(record).filter((r) => r.refundId !== refund.refundId);
}

/**
 * Turns net the refunds an order held before it arrived (state `awaiting`), now that its basis is
 * in the record: in the order they were received, each after those before it.
 */
export function netHeldRefunds(record: OrderRecord): void {
  const counted = countedRefunds(record).sort((a, b) => a.receivedAt.localeCompare(b.receivedAt));
  for (const [i, refund] of counted.entries()) {
    // Only those still held: one computed already keeps its amount (and its lines are pared down).
    if (refund.status === 'pending' && refund.amountFrom === HELD_RULES) {
      netRefund(record.refundBasis, refund, counted.slice(0, i));
    }
  }
}

/** The ledger entry of a refund as its event states it (its net amount computed by `netRefund`). */
export function refundEntry(event: OrderRefunded, source: SourceConfig, receivedAt: string): RefundRecord {
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
    ...(event.lines ? { lines: event.lines } : {}),
    ...(event.gross !== undefined ? { gross: event.gross } : {}),
  };
}

/** A refund recorded before its order: its net amount is computed when the order brings its lines. */
export function heldEntry(event: OrderRefunded, source: SourceConfig, receivedAt: string): RefundRecord {
  const entry = refundEntry(event, source, receivedAt);
  if (entry.lines || entry.gross !== undefined) entry.amountFrom = HELD_RULES;
  return entry;
}

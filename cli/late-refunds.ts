import type { Command } from 'commander';
import type { LateRefund, OrderRecord, RefundRecord } from '../shared/ledger.ts';
import { formatMoney, prorateMinor } from '../shared/money.ts';
import type { Ledger } from '../shared/ports.ts';
import { money } from './compare.ts';
import { settingOptions, withContext } from './context.ts';
import { csvCell } from './csv.ts';
import { CliError, type CliIo, cell, formatTable, nowOf, terminalJson, writeLine } from './io.ts';
import { periodBound } from './reconcile.ts';

/**
 * `connector late-refunds`: the refunds the platform could no longer apply (the conversion locked, or
 * accepted for a partial refund), with the commission share each represents, for finance to settle
 * with the platform's commission adjustments.
 */

/** A late refund as finance lists it (`connector late-refunds`). */
export interface LateRefundRow {
  readonly program: string;
  readonly externalId: string;
  readonly source: string;
  readonly refundId: string;
  /**
   * The refunded amount; for a full refund, what the conversion's earlier late refunds left of its
   * amount.
   */
  readonly refundAmount: number;
  readonly full: boolean;
  readonly currency?: string;
  readonly because: LateRefund['because'];
  readonly conversionId: string;
  readonly conversionAmount: number;
  readonly commission?: number;
  /**
   * `commissionShare(commission, refundAmount, conversionAmount)` (a full refund: the whole
   * commission), capped at what the conversion's earlier late refunds left of its commission; 0 once
   * the conversion is refused (`refusedBy`) or the refund re-applied (`reappliedAt`); absent without
   * a commission.
   */
  readonly commissionShare?: number;
  /**
   * The refund that refused the conversion after this one came late (an accepted conversion can
   * still be refused until it locks): the refusal took the whole commission back on the platform,
   * so there is nothing left to take back for this one.
   */
  readonly refusedBy?: string;
  /**
   * When `refusedBy` was recorded: a period holding it lists this row too, so that finance, settling
   * a period at a time, reverses the adjustment an earlier period made for it.
   */
  readonly refusedAt?: string;
  /**
   * When finance sent the refund again and the platform's conversion, changeable again, took it
   * (docs/runbook.md, "Late refunds"): the platform carries it, so its share is 0 and an adjustment
   * made for it is to be reversed. A period holding it lists this row too, as for `refusedAt`.
   */
  readonly reappliedAt?: string;
  /** When the refund was recorded late. */
  readonly recordedAt: string;
  readonly origin: RefundRecord['origin'];
}

/**
 * The commission a refund takes back: commission × refund / conversion amount, in integer minor
 * units, rounded half away from zero (half a cent up), a refund larger than the amount counting as
 * the whole. A conversion of amount 0 has no share to give back: 0.
 */
export function commissionShare(commission: number, refund: number, conversionAmount: number): number {
  return prorateMinor(commission, Math.min(refund, conversionAmount), conversionAmount, 'commission');
}

/**
 * The late refunds of these records, oldest first. The shares of one conversion add up to its
 * commission at most: each share is rounded on its own, so a later one gets only what is left. A
 * full refund after late partial ones is what they left of the conversion's amount. A conversion
 * refused since (a full refund or a cancellation of an accepted one) gave its whole commission back:
 * its late refunds' shares are 0, naming the refund that refused it. A late refund finance sent again
 * and the platform then took (`LateRefund.lateAt`, applied since) is listed re-applied, share 0; it no
 * longer counts in what the conversion's other late refunds take. One sent again and not yet applied
 * is listed late as before.
 */
export function lateRefunds(records: Iterable<OrderRecord>): LateRefundRow[] {
  const out: LateRefundRow[] = [];
  for (const record of records) {
    const taken = new Map<string, number>();
    const refunded = new Map<string, number>();
    const refunds = Object.values(record.refunds).sort(
      (a, b) => recordedAt(a).localeCompare(recordedAt(b)) || a.refundId.localeCompare(b.refundId),
    );
    const refusal = record.state === 'refused' ? refusedBy(refunds) : undefined;
    for (const refund of refunds) {
      const { late } = refund;
      if (!late) continue;
      // Sent again (`lateAt`): late until applied, then re-applied (by the worker, or settled by hand).
      const sentAgain = late.lateAt !== undefined;
      const reapplied = sentAgain && (refund.status === 'applied' || refund.status === 'manual');
      const stillLate = refund.status === 'late' || (sentAgain && refund.status === 'pending');
      if (!stillLate && !reapplied) continue;
      const refundedBefore = refunded.get(late.conversionId) ?? 0;
      const refundAmount = refund.full ? Math.max(0, late.conversionAmount - refundedBefore) : refund.amount;
      if (!reapplied) refunded.set(late.conversionId, refundedBefore + refundAmount);
      const refused =
        !reapplied &&
        refusal &&
        (record.conversionId === undefined || record.conversionId === late.conversionId)
          ? refusal
          : undefined;
      let share: number | undefined;
      if (late.commission !== undefined) {
        const before = taken.get(late.conversionId) ?? 0;
        const left = refused === undefined && !reapplied ? Math.max(0, late.commission - before) : 0;
        const whole = refund.full ? late.conversionAmount : refund.amount;
        share = Math.min(commissionShare(late.commission, whole, late.conversionAmount), left);
        taken.set(late.conversionId, before + share);
      }
      out.push({
        program: record.program,
        externalId: record.externalId,
        source: refund.source ?? record.source,
        refundId: refund.refundId,
        refundAmount,
        full: refund.full,
        ...(record.currency ? { currency: record.currency } : {}),
        because: late.because,
        conversionId: late.conversionId,
        conversionAmount: late.conversionAmount,
        ...(late.commission === undefined || share === undefined
          ? {}
          : { commission: late.commission, commissionShare: share }),
        recordedAt: late.lateAt ?? recordedAt(refund),
        origin: refund.origin,
        ...(refused === undefined ? {} : { refusedBy: refused.refundId, refusedAt: recordedAt(refused) }),
        ...(reapplied ? { reappliedAt: recordedAt(refund) } : {}),
      });
    }
  }
  return out.sort(
    (a, b) => a.recordedAt.localeCompare(b.recordedAt) || a.externalId.localeCompare(b.externalId),
  );
}

function recordedAt(refund: RefundRecord): string {
  return refund.appliedAt ?? refund.receivedAt;
}

/**
 * The refund the conversion was refused for (full, or leaving nothing; by the worker, or settled by
 * hand), of a record in state `refused`; the refunds in the order they were recorded.
 */
function refusedBy(refunds: readonly RefundRecord[]): RefundRecord | undefined {
  return refunds.find(
    (r) => (r.status === 'applied' || r.status === 'manual') && (r.full || r.resultingAmount === 0),
  );
}

/**
 * The rows recorded from `from` to `to` (ISO timestamps, both included), and those whose conversion
 * was refused then (`refusedAt`) or that were re-applied then (`reappliedAt`): an adjustment made for
 * them in an earlier period is to be reversed. All of them without either bound.
 */
export function inPeriod(rows: readonly LateRefundRow[], from?: Date, to?: Date): LateRefundRow[] {
  const within = (iso: string | undefined) => {
    if (iso === undefined) return false;
    const at = Date.parse(iso);
    return (from === undefined || at >= from.getTime()) && (to === undefined || at <= to.getTime());
  };
  return rows.filter((r) => within(r.recordedAt) || within(r.refusedAt) || within(r.reappliedAt));
}

/** The late refunds of these programs' ledger records, oldest first. */
export async function listLateRefunds(
  ledger: Pick<Ledger, 'list'>,
  programs: readonly string[],
): Promise<LateRefundRow[]> {
  const records: OrderRecord[] = [];
  for (const program of programs) for await (const record of ledger.list(program)) records.push(record);
  return lateRefunds(records);
}

const CSV_HEADER = [
  'externalId',
  'refundId',
  'refundAmount',
  'full',
  'conversionId',
  'conversionAmount',
  'commission',
  'commissionShare',
  'currency',
  'because',
  'recordedAt',
  'source',
  'program',
  'refusedBy',
  'reappliedAt',
];

function decimal(amount: number | undefined, currency: string | undefined): string {
  if (amount === undefined) return '';
  return currency ? formatMoney(amount, currency) : String(amount);
}

export function lateRefundsCsv(rows: readonly LateRefundRow[]): string {
  const lines = rows.map((r) =>
    [
      r.externalId,
      r.refundId,
      decimal(r.refundAmount, r.currency),
      String(r.full),
      r.conversionId,
      decimal(r.conversionAmount, r.currency),
      decimal(r.commission, r.currency),
      decimal(r.commissionShare, r.currency),
      r.currency ?? '',
      r.because,
      r.recordedAt,
      r.source,
      r.program,
      r.refusedBy ?? '',
      r.reappliedAt ?? '',
    ].map(csvCell),
  );
  return [CSV_HEADER, ...lines].map((r) => r.join(',')).join('\n');
}

function lateRefundsText(rows: readonly LateRefundRow[]): string {
  if (rows.length === 0) return '✓ no late refunds';
  const table = formatTable(
    ['ORDER', 'REFUND ID', 'REFUND', 'CONVERSION', 'COMMISSION', 'SHARE', 'BECAUSE', 'RECORDED'],
    rows.map((r) => [
      r.externalId,
      r.refundId,
      `${money(r.refundAmount, r.currency)}${r.full ? ' (full)' : ''}`,
      money(r.conversionAmount, r.currency),
      money(r.commission, r.currency),
      money(r.commissionShare, r.currency),
      r.because,
      r.recordedAt,
    ]),
  );
  const shares = new Map<string, number>();
  for (const r of rows) {
    if (r.commissionShare === undefined) continue;
    shares.set(r.currency ?? '', (shares.get(r.currency ?? '') ?? 0) + r.commissionShare);
  }
  const total = [...shares].map(([currency, amount]) => money(amount, currency || undefined)).join(', ');
  const refused = rows.flatMap((r) => {
    if (r.reappliedAt !== undefined) {
      return [
        `${cell(r.externalId)} ${cell(r.refundId)}: re-applied on the platform since (${cell(r.reappliedAt)}), whose ` +
          'conversion carries it: nothing to take back (reverse an adjustment already made for it)',
      ];
    }
    if (r.refusedBy === undefined) return [];
    return [
      `${cell(r.externalId)} ${cell(r.refundId)}: conversion refused since by refund ${cell(r.refusedBy)}, which took its whole ` +
        'commission back: nothing to take back (reverse an adjustment already made for it)',
    ];
  });
  const n = rows.length;
  return (
    `${table}\n${refused.map((line) => `${line}\n`).join('')}${n} late refund${n === 1 ? '' : 's'}` +
    `${total ? `: commission to take back ${total}` : ''} (settle each with a commission adjustment; see docs/runbook.md)`
  );
}

interface LateRefundsOptions {
  program?: string;
  source?: string;
  from?: string;
  to?: string;
  csv?: boolean;
  json?: boolean;
}

export function registerLateRefunds(program: Command, io: CliIo): void {
  const command = program
    .command('late-refunds')
    .summary('list the refunds the platform could no longer apply, for finance')
    .description(
      'Lists the late refunds the ledger holds: refunds of conversions the platform had locked (accepted and ' +
        'past its waiting period), or partial refunds of accepted ones (only a pending conversion’s amount can ' +
        'change). Each shows the conversion’s amount and commission and the commission share the refund ' +
        'represents, for a commission adjustment. Read only.',
    )
    .option('--program <id>', 'one program (default: every configured source program)')
    .option('--source <id>', 'the program of this source')
    .option('--from <date>', 'only those recorded from then: 2026-05-01, an ISO timestamp, or 30d')
    .option('--to <date>', 'only those recorded until then (a date counts to its end)')
    .option('--csv', 'print CSV (amounts as decimals)')
    .option('--json', 'print JSON (amounts in minor units)');
  settingOptions(command, ['ledgerTable', 'dynamoEndpoint', 'region']);
  command
    .addHelpText(
      'after',
      `
Commission share = commission × refund amount / conversion amount, in minor units, rounded half away
from zero (half a cent up); a full refund's share is the whole commission. The shares of one
conversion add up to its commission at most (a later one gets what is left). The amount and commission
are the platform's when the refund came; "-" when the platform gave no commission (legacy programs).
A full refund after late partial ones counts what they left. An accepted conversion refused since
(a full refund, a cancellation) gave its whole commission back: its late refunds' shares are 0.
--from and --to (both included) take the refunds recorded late in that period, with the shares of the
whole list: consecutive periods (--to 2026-05-31, then --from 2026-06-01) list each refund once,
but for one whose conversion a later period refused: listed again then, share 0, to reverse its
adjustment. So is one finance sent again (same refund id and amount) that the platform then took,
its conversion changeable again (reappliedAt): share 0, nothing to take back.

Examples:
  $ npx connector late-refunds
  $ npx connector late-refunds --from 2026-05-01 --to 2026-05-31 --csv > late-refunds-may.csv

Exit codes: 0 listed (even when there are none), 1 the ledger unreachable, 2 a wrong option or setting.`,
    )
    .action(async (options: LateRefundsOptions) => {
      if (options.csv && options.json) throw new CliError('--csv and --json: choose one');
      const now = nowOf(io);
      const from = options.from === undefined ? undefined : periodBound(options.from, '--from', now, false);
      const to = options.to === undefined ? undefined : periodBound(options.to, '--to', now, true);
      if (from && to && from.getTime() > to.getTime()) throw new CliError('--from: must not be after --to');
      await withContext(io, options, async (ctx) => {
        const all = await listLateRefunds(ctx.ledger(), ctx.programs(options.program, options.source));
        const rows = inPeriod(all, from, to);
        if (options.json) writeLine(io.stdout, terminalJson({ lateRefunds: rows }));
        else if (options.csv) writeLine(io.stdout, lateRefundsCsv(rows));
        else writeLine(io.stdout, lateRefundsText(rows));
      });
    });
}

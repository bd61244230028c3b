import type { Command } from 'commander';
import type { LateRefund, OrderRecord, RefundRecord } from '../shared/ledger.ts';
import { formatMoney, prorateMinor } from '../shared/money.ts';
import type { Ledger } from '../shared/ports.ts';
import { money } from './compare.ts';
import { settingOptions, withContext } from './context.ts';
import { csvCell } from './csv.ts';
import { CliError, type CliIo, formatTable, terminalJson, writeLine } from './io.ts';

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
  /** The refunded amount; for a full refund, the conversion's amount. */
  readonly refundAmount: number;
  readonly full: boolean;
  readonly currency?: string;
  readonly because: LateRefund['because'];
  readonly conversionId: string;
  readonly conversionAmount: number;
  readonly commission?: number;
  /**
   * `commissionShare(commission, refundAmount, conversionAmount)`, capped at what the conversion's
   * earlier late refunds left of its commission; absent without a commission.
   */
  readonly commissionShare?: number;
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
 * commission at most: each share is rounded on its own, so a later one gets only what is left.
 */
export function lateRefunds(records: Iterable<OrderRecord>): LateRefundRow[] {
  const out: LateRefundRow[] = [];
  for (const record of records) {
    const taken = new Map<string, number>();
    const refunds = Object.values(record.refunds).sort(
      (a, b) => recordedAt(a).localeCompare(recordedAt(b)) || a.refundId.localeCompare(b.refundId),
    );
    for (const refund of refunds) {
      if (refund.status !== 'late' || !refund.late) continue;
      const { late } = refund;
      const refundAmount = refund.full ? late.conversionAmount : refund.amount;
      let share: number | undefined;
      if (late.commission !== undefined) {
        const before = taken.get(late.conversionId) ?? 0;
        const left = Math.max(0, late.commission - before);
        share = Math.min(commissionShare(late.commission, refundAmount, late.conversionAmount), left);
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
        recordedAt: recordedAt(refund),
        origin: refund.origin,
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
  const n = rows.length;
  return (
    `${table}\n${n} late refund${n === 1 ? '' : 's'}` +
    `${total ? `: commission to take back ${total}` : ''} (settle each with a commission adjustment; see docs/runbook.md)`
  );
}

interface LateRefundsOptions {
  program?: string;
  source?: string;
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

Examples:
  $ npx connector late-refunds
  $ npx connector late-refunds --csv > late-refunds.csv

Exit codes: 0 listed (even when there are none), 1 the ledger unreachable, 2 a wrong option or setting.`,
    )
    .action(async (options: LateRefundsOptions) => {
      if (options.csv && options.json) throw new CliError('--csv and --json: choose one');
      await withContext(io, options, async (ctx) => {
        const rows = await listLateRefunds(ctx.ledger(), ctx.programs(options.program, options.source));
        if (options.json) writeLine(io.stdout, terminalJson({ lateRefunds: rows }));
        else if (options.csv) writeLine(io.stdout, lateRefundsCsv(rows));
        else writeLine(io.stdout, lateRefundsText(rows));
      });
    });
}

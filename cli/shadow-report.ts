import type { Command } from 'commander';
import type { AffiliateClient } from '../shared/affiliate/client.ts';
import type { Conversion } from '../shared/affiliate/schemas.ts';
import type { SourceConfig } from '../shared/config/sources.ts';
import type { OrderRecord } from '../shared/ledger.ts';
import { formatMoney, otherCurrency, sumMinor } from '../shared/money.ts';
import type { Ledger } from '../shared/ports.ts';
import { money } from './compare.ts';
import { settingOptions, withContext } from './context.ts';
import { csvCell } from './csv.ts';
import { CliError, type CliIo, cell, formatTable, nowOf, terminalJson, writeLine } from './io.ts';
import { pageProgress } from './progress.ts';
import { listAllConversions, periodBound } from './reconcile.ts';

/**
 * `connector shadow-report`: what a source in shadow mode would have sent, against what the
 * platform's browser pixel recorded, order by order (matched by externalId within a program).
 */

export type ShadowKind =
  | 'only_connector'
  | 'amount_differs'
  | 'currency_differs'
  | 'amount_unknown'
  | 'only_pixel'
  | 'same';
const KINDS: readonly ShadowKind[] = [
  'only_connector',
  'amount_differs',
  'currency_differs',
  'amount_unknown',
  'only_pixel',
  'same',
];

export interface ShadowRow {
  readonly kind: ShadowKind;
  readonly program: string;
  readonly externalId: string;
  readonly pixelConversionId?: string;
  readonly pixelStatus?: string;
  /**
   * The sum of the order's pixel conversions, in `currency`; absent when one of them has no amount,
   * or is in another currency than the order's (`currency_differs`: the detail gives it in its own).
   */
  readonly pixelAmount?: number;
  /** The pixel's currency, when it is another than the order's (`currency_differs`). */
  readonly pixelCurrency?: string;
  /** What the connector's add would have sent: the order's amount, before refunds. */
  readonly connectorAmount?: number;
  /**
   * connector − pixel, a missing side counting 0; absent when the pixel's amount is unknown or in
   * another currency.
   */
  readonly difference?: number;
  /** The order's currency; the pixel's when the connector would send nothing (`only_pixel`). */
  readonly currency?: string;
  readonly detail: string;
}

export interface ShadowTotal {
  readonly kind: ShadowKind;
  readonly currency: string;
  readonly count: number;
  readonly connectorAmount: number;
  readonly pixelAmount: number;
}

export interface ShadowReport {
  readonly from: string;
  readonly to: string;
  readonly sources: string[];
  readonly programs: string[];
  readonly pixelConversions: number;
  readonly shadowOrders: number;
  readonly rows: ShadowRow[];
  readonly totals: ShadowTotal[];
  /** Per currency: the sum of |difference|, what the platform records differently once live. */
  readonly atStake: Record<string, number>;
}

/**
 * Builds the report for `sources` (their programs) over the period. The pixel's side is every
 * conversion of the programs created in the period, less those the ledger holds as the connector's
 * own (a live source's adds). The connector's side is the shadow records of `sources` created in the
 * period; one with no conversion in the period's list is looked up by externalId before it counts as
 * seen by the connector only (the pixel dates a conversion by its own clock).
 */
export async function shadowReport(
  ledger: Pick<Ledger, 'list'>,
  client: Pick<AffiliateClient, 'listConversions' | 'conversionInfo'>,
  sources: readonly SourceConfig[],
  from: Date,
  to: Date,
  onPage?: (read: number, total: number) => void,
): Promise<ShadowReport> {
  const ids = new Set(sources.map((s) => s.id));
  const programs = [...new Set(sources.map((s) => s.program))];
  const rows: ShadowRow[] = [];
  let pixelConversions = 0;
  let shadowOrders = 0;
  for (const program of programs) {
    const shadow = new Map<string, OrderRecord>();
    const live = new Set<string>();
    for await (const record of ledger.list(program)) {
      if (record.shadow && ids.has(record.source)) shadow.set(record.externalId, record);
      else if (['added', 'refused', 'adding'].includes(record.state)) live.add(record.externalId);
    }
    const pixel = new Map<string, Conversion[]>();
    for (const c of await listAllConversions(client, program, from.toISOString(), to.toISOString(), onPage)) {
      if (live.has(c.externalId)) continue;
      pixel.set(c.externalId, [...(pixel.get(c.externalId) ?? []), c]);
    }
    pixelConversions += [...pixel.values()].reduce((n, list) => n + list.length, 0);
    for (const [externalId, found] of pixel)
      rows.push(compare(program, externalId, shadow.get(externalId), found));
    for (const record of shadow.values()) {
      if (record.state !== 'shadowed') continue;
      const created = Date.parse(record.createdAt);
      if (!(created >= from.getTime() && created <= to.getTime())) continue;
      shadowOrders++;
      if (pixel.has(record.externalId)) continue;
      const elsewhere = await client.conversionInfo({ program, externalId: record.externalId });
      rows.push(compare(program, record.externalId, record, elsewhere ? [elsewhere] : []));
    }
  }
  rows.sort(
    (a, b) => KINDS.indexOf(a.kind) - KINDS.indexOf(b.kind) || a.externalId.localeCompare(b.externalId),
  );
  return {
    from: from.toISOString(),
    to: to.toISOString(),
    sources: [...ids],
    programs,
    pixelConversions,
    shadowOrders,
    rows,
    totals: totalsOf(rows),
    atStake: atStakeOf(rows),
  };
}

function compare(
  program: string,
  externalId: string,
  record: OrderRecord | undefined,
  conversions: readonly Conversion[],
): ShadowRow {
  const [conversion] = conversions;
  const sent = record?.state === 'shadowed' ? record.originalAmount : undefined;
  // A conversion in another currency than the order's is other money, by the rule the worker adopts
  // the pixel's conversion or parks the order by at the switch: its amount is compared with nothing.
  const foreign =
    sent === undefined ? undefined : conversions.find((c) => otherCurrency(record?.currency, c.currency));
  // The platform may omit a conversion's amount; a duplicate pixel fire is paid on each conversion.
  const amountUnknown = conversions.some((c) => c.amount === undefined);
  const pixelAmount =
    !conversion || amountUnknown || foreign ? undefined : sumMinor(conversions.map((c) => c.amount ?? 0));
  // A row of the pixel's money alone is in the pixel's currency.
  const currency =
    sent === undefined
      ? (codeOf(conversion?.currency) ?? record?.currency)
      : (record?.currency ?? codeOf(conversion?.currency));
  const pixelCurrency = codeOf(foreign?.currency);
  const base = {
    program,
    externalId,
    ...(conversion ? { pixelConversionId: conversion.id, pixelStatus: String(conversion.status) } : {}),
    ...(pixelAmount === undefined ? {} : { pixelAmount }),
    ...(pixelCurrency ? { pixelCurrency } : {}),
    ...(sent === undefined ? {} : { connectorAmount: sent }),
    ...(amountUnknown || foreign ? {} : { difference: (sent ?? 0) - (pixelAmount ?? 0) }),
    ...(currency ? { currency } : {}),
  };
  const several =
    conversions.length > 1
      ? `; ${conversions.length} pixel conversions for one order${pixelAmount === undefined ? '' : `, ${money(pixelAmount, currency)} in all`}`
      : '';
  const unknown = amountUnknown ? "; the pixel's amount is unknown" : '';
  if (!conversion) {
    return { ...base, kind: 'only_connector', detail: 'the pixel did not record it (ad blocker, consent)' };
  }
  if (sent === undefined) {
    const why = !record
      ? 'the connector never received this order'
      : record.state === 'skipped'
        ? `the connector skipped it: ${record.skipReason ?? 'no affiliate signal'}`
        : `ledger state ${record.state}`;
    return { ...base, kind: 'only_pixel', detail: `${why}${several}${unknown}` };
  }
  if (foreign) {
    const theirs = foreign.amount === undefined ? 'no amount given' : money(foreign.amount, pixelCurrency);
    return {
      ...base,
      kind: 'currency_differs',
      detail:
        `the pixel's conversion is in ${pixelCurrency} (${theirs}), the order in ${currency}: once live, ` +
        `the order is parked, not adopted, until the conversion is put right on the platform${several}`,
    };
  }
  if (amountUnknown) return { ...base, kind: 'amount_unknown', detail: `${unknown.slice(2)}${several}` };
  if (pixelAmount === sent) return { ...base, kind: 'same', detail: several.slice(2) };
  return { ...base, kind: 'amount_differs', detail: several.slice(2) || "the pixel's amount differs" };
}

/** A currency code as the platform gave it, compared and shown upper case; undefined when blank. */
function codeOf(code: string | undefined): string | undefined {
  return code?.trim().toUpperCase() || undefined;
}

function totalsOf(rows: readonly ShadowRow[]): ShadowTotal[] {
  const totals = new Map<string, ShadowTotal>();
  for (const row of rows) {
    const currency = row.currency ?? '';
    const key = `${row.kind}\n${currency}`;
    const now = totals.get(key) ?? { kind: row.kind, currency, count: 0, connectorAmount: 0, pixelAmount: 0 };
    totals.set(key, {
      ...now,
      count: now.count + 1,
      connectorAmount: now.connectorAmount + (row.connectorAmount ?? 0),
      pixelAmount: now.pixelAmount + (row.pixelAmount ?? 0),
    });
  }
  return [...totals.values()].sort(
    (a, b) => KINDS.indexOf(a.kind) - KINDS.indexOf(b.kind) || a.currency.localeCompare(b.currency),
  );
}

function atStakeOf(rows: readonly ShadowRow[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const row of rows) {
    if (!row.difference) continue;
    const currency = row.currency ?? '';
    out[currency] = (out[currency] ?? 0) + Math.abs(row.difference);
  }
  return out;
}

const CSV_HEADER = [
  'kind',
  'program',
  'externalId',
  'pixelConversionId',
  'pixelStatus',
  'pixelAmount',
  'connectorAmount',
  'difference',
  'currency',
  'detail',
];

function decimal(amount: number | undefined, currency: string | undefined): string {
  if (amount === undefined) return '';
  return currency ? formatMoney(amount, currency) : String(amount);
}

/** The rows as CSV, amounts as decimals in the order's currency. */
export function shadowCsv(report: ShadowReport): string {
  const rows = report.rows.map((r) =>
    [
      r.kind,
      r.program,
      r.externalId,
      r.pixelConversionId ?? '',
      r.pixelStatus ?? '',
      decimal(r.pixelAmount, r.currency),
      decimal(r.connectorAmount, r.currency),
      decimal(r.difference, r.currency),
      r.currency ?? '',
      r.detail,
    ].map(csvCell),
  );
  return [CSV_HEADER, ...rows].map((r) => r.join(',')).join('\n');
}

const SUMMARY: Record<ShadowKind, (n: string, t: ShadowTotal) => string> = {
  only_connector: (n, t) => `only the connector saw ${n} (${money(t.connectorAmount, t.currency)})`,
  amount_differs: (n, t) =>
    `amount differs for ${n} (connector ${money(t.connectorAmount, t.currency)}, pixel ${money(t.pixelAmount, t.currency)})`,
  currency_differs: (n, t) =>
    `the pixel's conversion in another currency for ${n} (connector ${money(t.connectorAmount, t.currency)}): ` +
    'parked at the switch until put right on the platform',
  amount_unknown: (n, t) =>
    `the pixel's amount unknown for ${n} (connector ${money(t.connectorAmount, t.currency)})`,
  only_pixel: (n, t) => `only the pixel saw ${n} (${money(t.pixelAmount, t.currency)})`,
  same: (n, t) => `same amount for ${n} (${money(t.connectorAmount, t.currency)})`,
};

function shadowText(report: ShadowReport): string {
  const lines = [
    `${report.from} to ${report.to}, source${report.sources.length === 1 ? '' : 's'} ${report.sources.join(', ')}: ` +
      `${report.pixelConversions} conversion${report.pixelConversions === 1 ? '' : 's'} from the pixel, ` +
      `${report.shadowOrders} shadow order${report.shadowOrders === 1 ? '' : 's'} in the ledger`,
  ];
  if (report.rows.length > 0) {
    lines.push(
      formatTable(
        ['KIND', 'EXTERNAL ID', 'PIXEL', 'CONNECTOR', 'DIFFERENCE', 'DETAIL'],
        report.rows.map((r) => [
          r.kind,
          r.externalId,
          money(r.pixelAmount, r.currency),
          money(r.connectorAmount, r.currency),
          money(r.difference, r.currency),
          cell(r.detail, 60),
        ]),
      ),
    );
  }
  lines.push('');
  for (const t of report.totals)
    lines.push(SUMMARY[t.kind](`${t.count} order${t.count === 1 ? '' : 's'}`, t));
  const stake = Object.entries(report.atStake).map(([currency, amount]) =>
    money(amount, currency || undefined),
  );
  lines.push(
    `money at stake: ${stake.length === 0 ? 'none' : stake.join(', ')} (orders the pixel missed or got wrong, and orders only it saw)`,
  );
  return lines.join('\n');
}

interface ShadowOptions {
  from?: string;
  to?: string;
  source?: string;
  csv?: boolean;
  json?: boolean;
}

export function registerShadowReport(program: Command, io: CliIo): void {
  const command = program
    .command('shadow-report')
    .summary("compare a shadow source's ledger with the conversions the platform's pixel recorded")
    .description(
      'For a source in shadow mode (mode "shadow": the connector records orders and sends nothing), lists ' +
        "the platform's conversions of the period (recorded by its browser pixel) against the orders the " +
        'connector would have sent, matched by externalId, with totals and the money at stake. Read only.',
    )
    .requiredOption('--from <date>', 'start of the period: 2026-05-01, an ISO timestamp, or 7d')
    .option('--to <date>', 'end of the period (a date counts to its end); default: now')
    .option('--source <id>', 'one source (default: every source in shadow mode)')
    .option('--csv', 'print CSV (amounts as decimals)')
    .option('--json', 'print JSON (amounts in minor units)');
  settingOptions(command, ['ledgerTable', 'dynamoEndpoint', 'region', 'affiliateBaseUrl']);
  command
    .addHelpText(
      'after',
      `
Kinds:
  only_connector  the connector has the order, the pixel has no conversion (ad blockers, consent):
                  what server-side tracking adds
  amount_differs  both have it, with different amounts (the pixel often counts tax or shipping;
                  several pixel conversions for one order count with their sum)
  currency_differs
                  both have it, the pixel's conversion in another currency than the order's (the
                  buyer's): once live the order is parked, not adopted, until the conversion is put
                  right on the platform; not counted in the money at stake
  amount_unknown  both have it, the platform gave no amount for the pixel's conversion: not
                  counted in the money at stake
  only_pixel      the pixel has a conversion the connector would not have sent (the order never
                  reached the connector, or it had no click id: check the source's clickIdAttributes)
  same            both have it with the same amount

Amounts: the connector's is what its Conversion Add would have sent (the order's amount, before
refunds); DIFFERENCE is connector minus pixel; money at stake adds up the differences' sizes.

Examples:
  $ npx connector shadow-report --from 2026-05-01 --to 2026-05-31
  $ npx connector shadow-report --from 30d --csv > shadow.csv

Exit codes: 0 the report was made, 1 it could not be (the platform or the ledger unreachable), 2 a
wrong option or setting.`,
    )
    .action(async (options: ShadowOptions) => {
      if (options.csv && options.json) throw new CliError('--csv and --json: choose one');
      await withContext(io, options, async (ctx) => {
        const now = nowOf(io);
        const from = periodBound(options.from ?? '', '--from', now, false);
        const to = options.to === undefined ? now : periodBound(options.to, '--to', now, true);
        if (from.getTime() > to.getTime()) throw new CliError('--from: must not be after --to');
        const sources = shadowSources(ctx.sources(), options.source);
        const ledger = ctx.ledger();
        const client = await ctx.affiliate();
        const progress = pageProgress(io, 'pixel conversions');
        let report: ShadowReport;
        try {
          report = await shadowReport(ledger, client, sources, from, to, (read, total) =>
            progress.page(read, total),
          );
        } finally {
          progress.stop();
        }
        if (options.json) writeLine(io.stdout, terminalJson(report));
        else if (options.csv) writeLine(io.stdout, shadowCsv(report));
        else writeLine(io.stdout, shadowText(report));
      });
    });
}

/** The sources to report on: the one named (shadow or, after the switch, live), else every shadow one. */
function shadowSources(sources: readonly SourceConfig[], named: string | undefined): SourceConfig[] {
  if (named !== undefined) {
    const found = sources.find((s) => s.id === named);
    if (!found) {
      const known = sources.map((s) => s.id).join(', ') || 'none configured';
      throw new CliError(`--source: unknown source "${named}" (known: ${known})`);
    }
    return [found];
  }
  const shadow = sources.filter((s) => s.mode === 'shadow');
  if (shadow.length === 0) {
    throw new CliError(
      'no source is in shadow mode: set "mode": "shadow" on one (locally: SHADOW_SOURCES=<id> npm start), or pass --source',
    );
  }
  return shadow;
}

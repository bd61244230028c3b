import type { Command } from 'commander';
import type { AffiliateClient } from '../shared/affiliate/client.ts';
import type { Conversion } from '../shared/affiliate/schemas.ts';
import { ledgerKey, type OrderRecord, type WaitingRefund, waitingRefunds } from '../shared/ledger.ts';
import { formatMoney } from '../shared/money.ts';
import type { Ledger } from '../shared/ports.ts';
import { compareOrder, type Difference, failedOrderWayOut, money, stuckAddDifference } from './compare.ts';
import { settingOptions, withContext } from './context.ts';
import { csvCell } from './csv.ts';
import {
  ask,
  CliError,
  type CliIo,
  cell,
  explain,
  formatTable,
  isIsoDay,
  nowOf,
  parseWhen,
  terminalJson,
  visibleText,
  writeLine,
} from './io.ts';
import { pageProgress } from './progress.ts';
import { isStuckAdd, repairStuckAdd, type StuckRepair } from './stuck.ts';

/** Page size of Conversions list (the API allows up to 10 000). */
const PAGE = 1000;

export interface ReconcileReport {
  readonly from: string;
  readonly to: string;
  readonly programs: string[];
  /** Ledger records created in the period, and conversions the platform lists for it. */
  readonly ledgerRecords: number;
  readonly platformConversions: number;
  readonly differences: Difference[];
  /** Refunds the ledger holds for orders not added yet, whenever received (not only in the period). */
  readonly waitingRefunds: WaitingRefund[];
}

function waitingText(waiting: readonly WaitingRefund[]): string {
  if (waiting.length === 0) return '';
  const table = formatTable(
    ['WAITING SINCE', 'EXTERNAL ID', 'REFUND ID', 'SOURCE', 'ORDER'],
    waiting.map((w) => [
      w.since,
      w.externalId,
      cell(w.refundId, 40),
      w.source ?? '-',
      // Whether the order's message is parked the ledger cannot tell: both ways out.
      w.ledgerState === 'awaiting' ? 'not arrived' : `failed: ${failedOrderWayOut(w.externalId)}`,
    ]),
  );
  return `\n${waiting.length} refund${waiting.length === 1 ? '' : 's'} waiting for their order (applied when it is added):\n${table}`;
}

/**
 * Every conversion of a program created in the period, paged with limit/offset. `onPage` hears how
 * many were read so far and the platform's total, after each page.
 */
export async function listAllConversions(
  client: Pick<AffiliateClient, 'listConversions'>,
  program: string,
  from: string,
  to: string,
  onPage?: (read: number, total: number) => void,
): Promise<Conversion[]> {
  const all: Conversion[] = [];
  for (let offset = 0; ; offset += PAGE) {
    // Oldest first: conversions created while paging are appended, not shifted into pages already read.
    const page = await client.listConversions({
      program,
      from,
      to,
      limit: PAGE,
      offset,
      orderBy: 'createdAt',
      sort: 'asc',
    });
    all.push(...page.data);
    onPage?.(all.length, Math.max(page.total, all.length));
    if (page.data.length < PAGE || offset + PAGE >= page.total) return all;
  }
}

/** Every conversion of one order on the platform, whenever created, oldest first. */
async function conversionsOf(
  client: Pick<AffiliateClient, 'listConversions'>,
  program: string,
  externalId: string,
): Promise<Conversion[]> {
  const page = await client.listConversions({
    program,
    externalId,
    limit: PAGE,
    orderBy: 'createdAt',
    sort: 'asc',
  });
  return page.data;
}

/**
 * Compares the platform's conversions of the period with the ledger, both ways. Orders are matched
 * by externalId within a program. A ledger record of the period whose conversion is not in the
 * platform's list is looked up by externalId before being called missing (the platform dates a
 * conversion by its creation, which can fall just outside the period); an order whose record is
 * older than the period has its conversions listed whole, so that a second one is told a duplicate
 * whichever side of the period's start the first fell. A `failed` record of the period with no
 * conversion on the platform either is a `failed_add`: nothing else would ever show that order
 * again. `onPage` hears how many conversions were read so far, of how many, over all the programs.
 */
export async function reconcile(
  ledger: Pick<Ledger, 'list'>,
  client: Pick<AffiliateClient, 'listConversions' | 'conversionInfo'>,
  programs: readonly string[],
  from: Date,
  to: Date,
  now: Date = new Date(),
  onPage?: (read: number, total: number) => void,
): Promise<ReconcileReport> {
  const fromIso = from.toISOString();
  const toIso = to.toISOString();
  const differences: Difference[] = [];
  let ledgerRecords = 0;
  let platformConversions = 0;
  const waiting: WaitingRefund[] = [];
  for (const program of programs) {
    const before = platformConversions;
    const conversions = await listAllConversions(client, program, fromIso, toIso, (read, total) =>
      onPage?.(before + read, before + total),
    );
    platformConversions += conversions.length;
    const byExternalId = new Map<string, Conversion[]>();
    for (const c of conversions)
      byExternalId.set(c.externalId, [...(byExternalId.get(c.externalId) ?? []), c]);

    const records = new Map<string, OrderRecord>();
    for await (const record of ledger.list(program)) records.set(record.externalId, record);
    waiting.push(...waitingRefunds(records.values()));

    for (const [externalId, found] of byExternalId) {
      const record = records.get(externalId);
      // An order begun before the period may have had a conversion before it too: the period's list
      // shows only the later one, and no period's list shows both, so its duplicate would never be
      // told. Its conversions are listed whole (one call for each such order, not for every order).
      const all =
        record && Date.parse(record.createdAt) < from.getTime()
          ? await conversionsOf(client, program, externalId)
          : found;
      differences.push(
        ...compareOrder(program, externalId, record, all.length > found.length ? all : found, now.getTime()),
      );
    }
    for (const record of records.values()) {
      const created = Date.parse(record.createdAt);
      if (!(created >= from.getTime() && created <= to.getTime())) continue;
      ledgerRecords++;
      if (byExternalId.has(record.externalId)) continue;
      if (isStuckAdd(record, now.getTime())) {
        differences.push(stuckAddDifference(program, record, now.getTime()));
        continue;
      }
      if (record.state !== 'added' && record.state !== 'refused' && record.state !== 'failed') continue;
      const elsewhere = await client.conversionInfo({ program, externalId: record.externalId });
      differences.push(...compareOrder(program, record.externalId, record, elsewhere ? [elsewhere] : []));
    }
  }
  const order = [
    'stuck_add',
    'failed_add',
    'missing',
    'unexpected',
    'duplicate',
    'status_mismatch',
    'amount_mismatch',
  ];
  differences.sort(
    (a, b) => order.indexOf(a.kind) - order.indexOf(b.kind) || a.externalId.localeCompare(b.externalId),
  );
  return {
    from: fromIso,
    to: toIso,
    programs: [...programs],
    ledgerRecords,
    platformConversions,
    differences,
    waitingRefunds: waiting,
  };
}

/**
 * A period bound: a date (`2026-05-01`: the start of that day, UTC, or its end for `--to`), an ISO
 * timestamp, or a duration back from now (`7d`).
 */
export function periodBound(text: string, flag: string, now: Date, endOfDay: boolean): Date {
  const when = parseWhen(text, now, flag);
  return endOfDay && isIsoDay(text) ? new Date(when.getTime() + 86_400_000 - 1) : when;
}

const CSV_HEADER = [
  'kind',
  'program',
  'externalId',
  'conversionId',
  'ledgerState',
  'ledgerAmount',
  'platformStatus',
  'platformAmount',
  'currency',
  'detail',
];

function decimal(amount: number | undefined, currency: string | undefined): string {
  if (amount === undefined) return '';
  return currency && Number.isSafeInteger(amount) ? formatMoney(amount, currency) : String(amount);
}

/** The differences as CSV (amounts as decimals in the order's currency), for a spreadsheet. */
export function reportCsv(report: ReconcileReport): string {
  const rows = report.differences.map((d) =>
    [
      d.kind,
      d.program,
      d.externalId,
      d.conversionId ?? '',
      d.ledgerState ?? '',
      decimal(d.ledgerAmount, d.currency),
      d.platformStatus ?? '',
      decimal(d.platformAmount, d.platformCurrency ?? d.currency),
      d.currency ?? '',
      d.detail,
    ].map(csvCell),
  );
  return [CSV_HEADER, ...rows].map((r) => r.join(',')).join('\n');
}

function reportText(report: ReconcileReport): string {
  const head = `${report.from} to ${report.to}, program${report.programs.length === 1 ? '' : 's'} ${report.programs.join(', ')}: ${report.ledgerRecords} ledger record${report.ledgerRecords === 1 ? '' : 's'}, ${report.platformConversions} conversion${report.platformConversions === 1 ? '' : 's'} on the platform`;
  if (report.differences.length === 0)
    return `${head}\n✓ no differences${waitingText(report.waitingRefunds)}`;
  const table = formatTable(
    ['KIND', 'EXTERNAL ID', 'CONVERSION', 'LEDGER', 'PLATFORM', 'DETAIL'],
    report.differences.map((d) => [
      d.kind,
      d.externalId,
      d.conversionId ?? '-',
      d.ledgerState
        ? `${d.ledgerState}${d.ledgerAmount === undefined ? '' : ` ${money(d.ledgerAmount, d.currency)}`}`
        : '-',
      d.platformStatus
        ? `${d.platformStatus} ${money(d.platformAmount, d.platformCurrency ?? d.currency)}`
        : '-',
      // The last column: whole, so that the command or the platform's reason at its end is not cut.
      cell(d.detail, 1000),
    ]),
  );
  const n = report.differences.length;
  return `${head}\n${table}\n✗ ${n} difference${n === 1 ? '' : 's'}${waitingText(report.waitingRefunds)}`;
}

interface ReconcileOptions {
  from?: string;
  to?: string;
  program?: string;
  source?: string;
  csv?: boolean;
  json?: boolean;
  repair?: boolean;
  dryRun?: boolean;
  yes?: boolean;
}

/** `connector reconcile`: the platform's conversions of a period against the ledger. */
export function registerReconcile(program: Command, io: CliIo): void {
  const command = program
    .command('reconcile')
    .summary("compare the platform's conversions of a period with the ledger")
    .description(
      "Lists the platform's conversions created in the period and the ledger's records, and reports the " +
        'differences. Exit code 0 when clean, 1 when differences are found.',
    )
    .requiredOption('--from <date>', 'start of the period: 2026-05-01, an ISO timestamp, or 7d')
    .option('--to <date>', 'end of the period (a date counts to its end); default: now')
    .option('--program <id>', 'one program (default: every configured source program)')
    .option('--source <id>', 'the program of this source')
    .option('--csv', 'print CSV (amounts as decimals)')
    .option('--json', 'print JSON (amounts in minor units)')
    .option('--repair', 'settle stuck adds through the platform lookup (shows the plan and asks first)')
    .option('--dry-run', 'with --repair: show what would be repaired; change nothing')
    .option('--yes', 'with --repair: do not ask for confirmation');
  settingOptions(command, ['ledgerTable', 'dynamoEndpoint', 'region', 'affiliateBaseUrl']);
  command
    .addHelpText(
      'after',
      `
Differences:
  missing          in the ledger as added/refused, no conversion on the platform
  unexpected       a conversion on the platform the ledger did not add
  duplicate        several conversions for one order
  amount_mismatch  ledger amount (after refunds) differs from the platform amount
  status_mismatch  refused on one side only
  stuck_add        "adding" long after its lease: the worker died mid-add and its message is gone;
                   --repair asks the platform (Conversion info): added there → added, else failed
                   (send the order again or replay it from the DLQ to add it once)
  failed_add       failed in the ledger, no conversion on the platform: the add was refused for
                   good (its message parked: connector dlq list --external-id <id>) or --repair
                   found nothing for a stuck add; replay it or send the order again

Examples:
  $ npx connector reconcile --from 2026-05-01 --to 2026-05-31
  $ npx connector reconcile --from 7d --csv > differences.csv
  $ npx connector reconcile --from 7d --repair --dry-run

Exit codes: 0 clean (or every stuck add repaired to added, agreeing with the platform, and nothing
else differs), 1 differences found, a repair not confirmed, not done, leaving a difference or
leaving an order failed (no conversion), 2 a wrong option or setting.`,
    )
    .action(async (options: ReconcileOptions) => {
      if (options.csv && options.json) throw new CliError('--csv and --json: choose one');
      if ((options.dryRun || options.yes) && !options.repair)
        throw new CliError('--dry-run and --yes go with --repair');
      await withContext(io, options, async (ctx) => {
        const now = nowOf(io);
        const from = periodBound(options.from ?? '', '--from', now, false);
        const to = options.to === undefined ? now : periodBound(options.to, '--to', now, true);
        if (from.getTime() > to.getTime()) throw new CliError('--from: must not be after --to');
        const programs = ctx.programs(options.program, options.source);
        const ledger = ctx.ledger();
        const client = await ctx.affiliate();
        const progress = pageProgress(io, 'conversions');
        let report: ReconcileReport;
        try {
          report = await reconcile(ledger, client, programs, from, to, now, (read, total) =>
            progress.page(read, total),
          );
        } finally {
          progress.stop();
        }
        if (options.json) writeLine(io.stdout, terminalJson(report));
        else if (options.csv) writeLine(io.stdout, reportCsv(report));
        else writeLine(io.stdout, reportText(report));
        const stuck = report.differences.filter((d) => d.kind === 'stuck_add');
        const others = report.differences.length - stuck.length;
        if (options.repair && stuck.length > 0) {
          const repaired = await repairStuck(io, ledger, client, stuck, now, options);
          if (repaired && others === 0) return;
        }
        if (report.differences.length > 0) throw new CliError('', 1);
      });
    });
}

/**
 * `reconcile --repair`: the plan first (a dry run through Conversion info), then, once confirmed,
 * the same again for real. True when every stuck add was repaired to `added` and agrees with the
 * platform. One repaired to `failed` is not clean: the order has no conversion until it is sent
 * again or replayed, and a scheduled `reconcile --from 1d --repair --yes || notify` may never have
 * it in its period again.
 * Told on stdout after the table, on stderr (with the prompt) when stdout carries the report as JSON
 * or CSV for a script.
 */
async function repairStuck(
  io: CliIo,
  ledger: Pick<Ledger, 'get' | 'update'>,
  client: Pick<AffiliateClient, 'conversionInfo'>,
  stuck: readonly Difference[],
  now: Date,
  options: { dryRun?: boolean; yes?: boolean; json?: boolean; csv?: boolean },
): Promise<boolean> {
  const out = options.json || options.csv ? io.stderr : io.stdout;
  const records: OrderRecord[] = [];
  for (const d of stuck) {
    const record = await ledger.get(ledgerKey(d.program, d.externalId));
    if (record) records.push(record);
  }
  const plan = [];
  for (const record of records) plan.push(await repairStuckAdd(ledger, client, record, now.getTime(), false));
  const n = (count: number) => `${count} stuck add${count === 1 ? '' : 's'}`;
  writeLine(out, '');
  writeLine(
    out,
    formatTable(
      ['EXTERNAL ID', 'REPAIR'],
      plan.map((r) => [r.externalId, repairText(r)]),
    ),
  );
  if (options.dryRun) {
    writeLine(out, `dry run: ${n(plan.length)} would be repaired`);
    return false;
  }
  if (!options.yes) {
    const answer = await ask(io, `Repair ${n(plan.length)} as shown? [y/N] `);
    if (answer === undefined)
      throw new CliError('no confirmation could be read: pass --yes to repair without a prompt');
    if (!/^y(es)?$/i.test(answer.trim())) throw new CliError('not confirmed; nothing repaired', 1);
  }
  const done: StuckRepair[] = [];
  const notRepaired: string[] = [];
  for (const record of records) {
    // One order's lookup or write failing (a 429 or 503 past the client's retries, a timeout) stops
    // nothing: the others are still repaired, and each is told, done or not.
    try {
      done.push(await repairStuckAdd(ledger, client, record, now.getTime(), true));
    } catch (error) {
      notRepaired.push(`${record.externalId}: not repaired: ${explain(error)}; run the repair again`);
    }
  }
  const unchanged = done.filter((r) => r.action === 'unchanged');
  const differing = done.filter((r) => stillDiffers(r) !== undefined);
  const failed = done.filter((r) => r.action === 'failed');
  // Shop ids and the platform's words, escaped: a terminal shows a control sequence instead of obeying it.
  for (const r of [...unchanged, ...differing, ...failed])
    writeLine(out, visibleText(`${r.externalId}: ${repairText(r)}`));
  for (const line of notRepaired) writeLine(out, visibleText(line));
  writeLine(out, `repaired ${n(done.length - unchanged.length)}`);
  return unchanged.length === 0 && differing.length === 0 && failed.length === 0 && notRepaired.length === 0;
}

function repairText(r: StuckRepair): string {
  switch (r.action) {
    case 'added': {
      const differs = stillDiffers(r);
      // Recorded refused, as the worker adopts a conversion the platform shows refused.
      const taken = r.record.state === 'refused' ? 'refused' : 'added';
      return `${taken}: the platform has conversion ${r.conversionId}${taken === 'refused' ? ', refused there: nothing is sent to it' : ''}${differs ? `; still differs: ${differs}` : ''}`;
    }
    case 'failed':
      return 'failed: no conversion on the platform (send the order again or replay it to add it once; reconcile lists it as failed_add until then)';
    case 'unchanged':
      return `unchanged: ${r.why}`;
  }
}

/**
 * What a stuck add taken as added still leaves between the ledger and the platform (a conversion
 * refused there), judged as `reconcile` judges an added order; and the refunds held for the order
 * that the conversion found did not carry (the pixel's, at another amount): no message is left to
 * apply them.
 */
function stillDiffers(r: StuckRepair): string | undefined {
  if (r.action !== 'added') return undefined;
  const told = compareOrder(r.record.program, r.externalId, r.record, [r.conversion]).map(
    (d) => `${d.kind} (${d.detail})`,
  );
  const pending = Object.values(r.record.refunds).filter((refund) => refund.status === 'pending').length;
  if (pending > 0) {
    told.push(
      `${pending} refund${pending === 1 ? '' : 's'} held for the order not applied: send the order again or replay it to apply ${pending === 1 ? 'it' : 'them'}`,
    );
  }
  return told.length > 0 ? told.join('; ') : undefined;
}

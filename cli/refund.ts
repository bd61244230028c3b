import type { Command } from 'commander';
import { backoffDelay, sleep } from '../shared/affiliate/retry.ts';
import { BadInputError } from '../shared/errors.ts';
import {
  type AskedRefund,
  FinanceRefundRequest,
  overRefundMessage,
  refundAmountOf,
  refundedInFullMessage,
  reservedAlongside,
  reserveRefund,
} from '../shared/finance.ts';
import { isRedirect, redirectRefusal, redirectTarget } from '../shared/http/client-answers.ts';
import {
  ledgerKey,
  type OrderRecord,
  type RefundReservation,
  type RefundReservations,
  unrecordedReservations,
} from '../shared/ledger.ts';
import { formatMinor, parseMoney } from '../shared/money.ts';
import type { Ledger, ReservationLedger } from '../shared/ports.ts';
import { issuesOf } from '../shared/validation.ts';
import { CliContext, missingMessage, settingOptions } from './context.ts';
import { type CsvSeparator, decodeCsv, detectSeparator, parseCsv, SAVE_AS_UTF8 } from './csv.ts';
import { CliError, type CliIo, cell, explain, nowOf, unreachable, writeLine } from './io.ts';
import { rowProgress } from './progress.ts';
import { readFileBytes } from './samples.ts';

/** Columns of a refunds CSV, in the documented order (any order is read). */
export const CSV_COLUMNS = [
  'externalId',
  'refundId',
  'amount',
  'full',
  'reason',
  'source',
  'currency',
] as const;
type Column = (typeof CSV_COLUMNS)[number];

export interface RefundIssue {
  /** Line in the CSV; absent for flags. */
  readonly line?: number;
  readonly field: string;
  readonly message: string;
}

export interface RefundRow {
  readonly line?: number;
  readonly request: FinanceRefundRequest;
}

const DECIMAL = /^[0-9]+(\.[0-9]+)?$/;
/** The schema's "exactly one of amount, amountCents or full" in the words of both inputs. */
const AMOUNT_CHOICE =
  'give an amount (--amount, --amount-cents, or the amount column) or a full refund (--full, or full=true), not both';

/**
 * Validates one refund with the server's own schema (`FinanceRefundRequest`), plus what the server
 * checks later against the order (a decimal amount, above zero, with no more decimals than the
 * currency has, when the currency is given), so that a file is rejected before anything is sent.
 * Every problem is reported, not only the first.
 */
export function validateRefund(
  raw: Record<string, unknown>,
  line?: number,
): { request?: FinanceRefundRequest; issues: RefundIssue[] } {
  const issues: RefundIssue[] = [];
  const parsed = FinanceRefundRequest.safeParse(raw);
  if (!parsed.success) {
    for (const { field, message, code } of issuesOf(parsed.error)) {
      let text = message;
      if (code === 'unrecognized_keys') text = 'not a refund field';
      else if (raw[field] === '') text = 'required';
      else if (field === 'amount' && code === 'custom') text = AMOUNT_CHOICE;
      issues.push({ line, field: field || 'row', message: text });
    }
  }
  const amount = raw['amount'];
  if (typeof amount === 'string' && !issues.some((i) => i.field === 'amount')) {
    const currency =
      typeof raw['currency'] === 'string' && /^[A-Z]{3}$/.test(raw['currency']) ? raw['currency'] : undefined;
    if (!DECIMAL.test(amount)) {
      issues.push({
        line,
        field: 'amount',
        message: `"${cell(amount, 20)}" is not a decimal amount such as 12.50 ("." before the cents, no currency sign or thousands separator)`,
      });
    } else if (/^0+(\.0+)?$/.test(amount)) {
      issues.push({ line, field: 'amount', message: 'must be greater than zero' });
    } else if (currency) {
      try {
        parseMoney(amount, currency);
      } catch (error) {
        if (!(error instanceof BadInputError)) throw error;
        issues.push({ line, field: 'amount', message: error.message.replace(/^amount: /, '') });
      }
    }
  }
  return issues.length === 0 && parsed.success ? { request: parsed.data, issues } : { issues };
}

/**
 * What a spreadsheet writes in the `full` column for TRUE and FALSE, read in any case: Excel's and
 * LibreOffice's words in the locales whose `;` files are read, beside true/false, yes/no and 1/0. Empty
 * is false. Anything else (`x`, `ja`) is refused, never guessed: a full refund refuses the conversion.
 */
const SPREADSHEET_BOOLEANS: readonly (readonly [yes: string, no: string])[] = [
  ['true', 'false'],
  ['yes', 'no'],
  ['1', '0'],
  ['wahr', 'falsch'], // de
  ['vrai', 'faux'], // fr
  ['verdadero', 'falso'], // es
  ['vero', 'falso'], // it
  ['waar', 'onwaar'], // nl
  ['verdadeiro', 'falso'], // pt
  ['prawda', 'fałsz'], // pl
  ['sant', 'falskt'], // sv
  ['sand', 'falsk'], // da
  ['sann', 'usann'], // nb
  ['tosi', 'epätosi'], // fi
];
const FULL_VALUES: ReadonlyMap<string, boolean> = new Map(
  SPREADSHEET_BOOLEANS.flatMap(([yes, no]): [string, boolean][] => [
    [yes, true],
    [no, false],
  ]),
);

/** A cell holding U+FFFD, which is never sent: the message says where it came from. */
function garbledCell(value: string, notUtf8: boolean): string {
  return notUtf8
    ? `"${cell(value)}" is not UTF-8 text`
    : `"${cell(value)}" holds \ufffd (U+FFFD), left where text was garbled before this file was written: type the value again`;
}

/** How a separator is named in a message. */
const SEPARATOR_NAME: Record<CsvSeparator, string> = { ',': 'a comma', ';': 'a ";"', '\t': 'a tab' };

/**
 * An amount cell of a `;`- or tab-separated file, as the decimal string the API takes. Those come
 * from spreadsheets in decimal-comma locales, where `12,50` is twelve-fifty; `12.50` is read too.
 * A thousands separator is refused, never guessed: `1.250` is 1250 to a German spreadsheet and 1.25
 * to an English one, so one `.` (or, in a tab-separated file, `,`) before exactly three digits is
 * refused as well, unless the whole part is 0 (no group starts with a 0: `0.125` is a three-decimal
 * amount, in KWD say). The suggested decimal is one the file reads: `1,005` in a `;` file, `1.0050`
 * in a tab-separated one, where `1.005` and `1,005` are both ambiguous. The decimal string is then
 * read by `parseMoney`, like any other amount.
 */
function csvAmount(value: string, separator: CsvSeparator): { amount: string } | { problem: string } {
  if (separator === ',') return { amount: value };
  const decimalMark = separator === ';' ? ',' : '.';
  const grouped = /^([1-9][0-9]{0,2})([.,])([0-9]{3})$/.exec(value);
  if (grouped && (grouped[2] === '.' || separator === '\t')) {
    const [, whole = '', , group = ''] = grouped;
    const fraction = group.replace(/0+$/, '');
    // In a tab-separated file three decimals are as ambiguous as the value itself; a fourth, 0, is not.
    const written = separator === '\t' && fraction.length === 3 ? `${fraction}0` : fraction;
    const decimal = fraction === '' ? whole : `${whole}${decimalMark}${written}`;
    return {
      problem: `"${value}" could be ${whole}${group} or ${decimal.replace(',', '.')}: write ${whole}${group} or ${decimal}`,
    };
  }
  if (/^[0-9]+([.,][0-9]+)?$/.test(value)) return { amount: value.replace(',', '.') };
  if (/^[0-9]{1,3}([.,'\u2019 \u00a0\u202f][0-9]{3})+([.,][0-9]+)?$/.test(value)) {
    return {
      problem: `"${cell(value, 20)}" looks like it has a thousands separator, which is not read: write the amount without one, such as 1250,00 or 1250.00`,
    };
  }
  return {
    problem: `"${cell(value, 20)}" is not a decimal amount such as 12,50 or 12.50 (no currency sign or thousands separator)`,
  };
}

/**
 * Reads and validates a whole refunds CSV, its bytes (whose encoding `decodeCsv` finds) or its text
 * (header `externalId,refundId,amount,full,reason,source,currency`),
 * separated by `,`, `;` or a tab (found from the header); in a `;`- or tab-separated file an amount
 * may have a decimal comma (`12,50`). Returns every row, or every problem with its line and field; a
 * file with any problem sends nothing.
 */
export function refundsFromCsv(input: string | Uint8Array): { rows: RefundRow[]; issues: RefundIssue[] } {
  const decoded = typeof input === 'string' ? { text: input, notUtf8: false } : decodeCsv(input);
  if ('problem' in decoded)
    return { rows: [], issues: [{ line: 1, field: 'csv', message: decoded.problem }] };
  const { text, notUtf8 } = decoded;
  const separator = detectSeparator(text, CSV_COLUMNS);
  const { records, problems } = parseCsv(text, separator ?? ',');
  const issues: RefundIssue[] = problems.map((p) => ({ line: p.line, field: 'csv', message: p.message }));
  if (notUtf8) {
    issues.unshift({
      field: 'csv',
      message: `the file is not UTF-8, so its accented letters cannot be read: Excel's plain "CSV" is saved in the code page of its locale (Windows-1252 in Western Europe, 1250 in Central Europe…), which the file does not name; ${SAVE_AS_UTF8}`,
    });
  }
  const [header, ...data] = records;
  if (!header)
    return { rows: [], issues: [...issues, { line: 1, field: 'csv', message: 'the file is empty' }] };
  if (separator === undefined) {
    return {
      rows: [],
      issues: [
        {
          line: header.line,
          field: 'csv',
          message: `no refund column found in the header: columns must be separated by "," or ";" (or a tab) and named ${CSV_COLUMNS.join(',')}`,
        },
      ],
    };
  }

  const columns: (Column | undefined)[] = header.fields.map((name) =>
    CSV_COLUMNS.find((c) => c.toLowerCase() === name.trim().toLowerCase()),
  );
  header.fields.forEach((name, i) => {
    if (columns[i] === undefined) {
      issues.push({
        line: header.line,
        field: name.trim() || `column ${i + 1}`,
        message: `unknown column (expected ${CSV_COLUMNS.join(',')})`,
      });
    } else if (columns.indexOf(columns[i]) !== i) {
      issues.push({ line: header.line, field: name.trim(), message: 'column given twice' });
    }
  });
  for (const required of ['externalId', 'refundId'] as const) {
    if (!columns.includes(required))
      issues.push({ line: header.line, field: required, message: 'missing column' });
  }
  if (issues.some((i) => i.line === header.line)) return { rows: [], issues };
  if (data.length === 0)
    issues.push({ line: header.line, field: 'csv', message: 'no refund rows after the header' });

  const rows: RefundRow[] = [];
  const seen = new Map<string, number>();
  for (const record of data) {
    if (record.fields.length !== columns.length) {
      issues.push({
        line: record.line,
        field: 'csv',
        message: `${record.fields.length} fields where the header has ${columns.length} (${SEPARATOR_NAME[separator]} inside a value must be quoted)`,
      });
      continue;
    }
    const values: Partial<Record<Column, string>> = {};
    columns.forEach((column, i) => {
      const value = record.fields[i]?.trim() ?? '';
      if (column && value !== '') values[column] = value;
      if (column && value.includes('\ufffd'))
        issues.push({ line: record.line, field: column, message: garbledCell(value, notUtf8) });
    });
    const raw: Record<string, unknown> = {
      externalId: values.externalId ?? '',
      refundId: values.refundId ?? '',
    };
    if (values.amount !== undefined) {
      const amount = csvAmount(values.amount, separator);
      if ('problem' in amount) {
        issues.push({ line: record.line, field: 'amount', message: amount.problem });
        continue;
      }
      raw['amount'] = amount.amount;
    }
    if (values.reason !== undefined) raw['reason'] = values.reason;
    if (values.source !== undefined) raw['source'] = values.source;
    // Spreadsheets lower-case or reformat codes; ISO 4217 codes are upper case.
    if (values.currency !== undefined) raw['currency'] = values.currency.toUpperCase();
    const full = values.full === undefined ? false : FULL_VALUES.get(values.full.toLowerCase());
    if (full === true) raw['full'] = true;
    else if (full === undefined) {
      issues.push({
        line: record.line,
        field: 'full',
        message: `"${cell(values.full, 20)}" is not true or false (true/false, yes/no, 1/0 or the spreadsheet's own TRUE/FALSE such as WAHR/FALSCH or VRAI/FAUX; empty is false)`,
      });
      continue;
    }
    const result = validateRefund(raw, record.line);
    issues.push(...result.issues);
    if (!result.request) continue;
    const key = `${result.request.externalId}\u0000${result.request.refundId}`;
    const earlier = seen.get(key);
    if (earlier !== undefined) {
      issues.push({
        line: record.line,
        field: 'refundId',
        message: `same externalId and refundId as line ${earlier}`,
      });
      continue;
    }
    seen.set(key, record.line);
    rows.push({ line: record.line, request: result.request });
  }
  return { rows, issues };
}

interface RefundOptions {
  externalId?: string;
  refundId?: string;
  amount?: string;
  amountCents?: string;
  full?: boolean;
  reason?: string;
  source?: string;
  currency?: string;
  csv?: string;
  dryRun?: boolean;
}

const ROW_FLAGS = [
  'externalId',
  'refundId',
  'amount',
  'amountCents',
  'full',
  'reason',
  'source',
  'currency',
] as const;

const EXAMPLES = `
Examples:
  $ npx connector refund --external-id 1001 --refund-id RF-2026-001 --amount 12.50 --reason "damaged item"
  $ npx connector refund --external-id 1002 --refund-id RF-2026-002 --full --reason "order returned"
  $ npx connector refund --csv refunds.csv --dry-run      # check the whole file, send nothing
  $ npx connector refund --csv refunds.csv

CSV header: ${CSV_COLUMNS.join(',')} (any order)
  Columns separated by "," or ";" (or a tab), found from the header; a spreadsheet in a
  decimal-comma locale (de, fr, es, it, nl, pl…) writes ";" and a decimal comma, which is read:
    externalId;refundId;amount;currency;full;reason
    1001;RF-1001-1;12,50;EUR;;damaged item
  amount is a decimal in the order's currency ("12.50", or "12,50" in a ";"-separated file), with no
  thousands separator ("1.250,00" is refused: write 1250,00); leave it empty with full=true for a full
  refund. full is true/false, yes/no, 1/0 or the spreadsheet's own TRUE/FALSE (WAHR, VRAI…).
  The file is UTF-8 (Excel: save as "CSV UTF-8"), or UTF-16 with its byte-order mark; plain "CSV"
  with accented letters is refused, never guessed.
  The whole file is validated first: with any bad row, every problem is listed (line and
  field) and nothing is sent. A refund id counts once, so sending a file twice is harmless.
A partial refund larger than what is left of its order (after the refunds requested and not yet
applied) is refused before anything is sent (it would refuse the conversion): give --full to refund
the whole order. So is a partial refund of an order being refunded in full, a refund id the ledger
holds at another amount (the worker applies a refund id once): give another refund id, a currency
other than the order's, and a decimal amount without --currency (or a currency column) for an order
the ledger does not know. This is checked against the ledger (--ledger-table, LEDGER_TABLE or
.local-stack.json) when it can be read, else by the connector as each row arrives; a partial
refund after a full refund of its order in the same file is refused either way. The ledger is read
once, before the first row is sent: a change made meanwhile is answered by the connector.
The key: --api-key, FINANCE_API_KEY, .local-stack.json, else the current version of the Secrets
Manager secret FINANCE_API_KEY_SECRET names (the stack's financeApiKeySecret). A key from a variable
or Secrets Manager goes only to a URL given by --url or CONNECTOR_URL, not one from .local-stack.json.
Exit codes: 0 all queued, 1 some row failed, 2 invalid input or missing setting.`;

/** `connector refund`: finance refunds from flags or a CSV, through `POST /refunds`. */
export function registerRefund(program: Command, io: CliIo): void {
  const command = program
    .command('refund')
    .summary('refund orders (one from flags, or many from a CSV)')
    .description(
      'Sends finance refunds to <url>/refunds (header x-api-key). The connector queues each one behind its ' +
        "order's earlier events; the worker then lowers the conversion's amount, or refuses it on a full refund.",
    )
    .option('--external-id <id>', "the shop's order id")
    .option('--refund-id <id>', 'your refund reference (a refund id counts once)')
    .option(
      '--amount <decimal>',
      "amount refunded excluding tax and shipping, in the order's currency (12.50)",
    )
    .option('--amount-cents <n>', 'the same in minor units (1250)')
    .option('--full', 'refund the whole order (refuses the conversion)')
    .option('--reason <text>', 'why (kept in the ledger and on the platform)')
    .option('--source <id>', 'source of the order, when several programs are configured')
    .option(
      '--currency <code>',
      "the order's currency (ISO 4217), checked against the ledger; needed with --amount for an order the ledger does not know yet",
    )
    .option('--csv <file>', 'many refunds from a CSV file (see below)')
    .option('--dry-run', 'validate and print what would be sent; send nothing');
  settingOptions(command, ['connectorUrl', 'financeApiKey', 'ledgerTable', 'dynamoEndpoint', 'region']);
  command.addHelpText('after', EXAMPLES).action(async (options: RefundOptions) => {
    const ctx = new CliContext(io, options);
    try {
      await refund(ctx, options);
    } finally {
      ctx.close();
    }
  });
}

async function refund(ctx: CliContext, options: RefundOptions): Promise<void> {
  const { io } = ctx;
  let rows: RefundRow[];
  if (options.csv !== undefined) {
    const given = ROW_FLAGS.filter((f) => options[f] !== undefined);
    if (given.length > 0)
      throw new CliError(`--csv: cannot be combined with ${given.map(flagOf).join(', ')}`);
    const result = refundsFromCsv(readFileBytes(options.csv, '--csv'));
    if (result.issues.length > 0) {
      reportIssues(io, result.issues, `${options.csv}: nothing sent`);
    }
    rows = result.rows;
  } else {
    rows = [{ request: requestFromFlags(io, options) }];
  }

  const checked = await checkRemaining(ctx, rows);
  // Said before any problem too: rows fixed from the list may still fail at the connector.
  if (checked.note) writeLine(io.stderr, checked.note);
  if (checked.issues.length > 0) {
    reportIssues(
      io,
      checked.issues,
      options.csv === undefined ? 'nothing sent' : `${options.csv}: nothing sent`,
    );
  }

  if (options.dryRun) {
    for (const row of rows)
      writeLine(io.stdout, `${where(row)}would POST /refunds ${JSON.stringify(row.request)}`);
    writeLine(io.stdout, `dry run: ${plural(rows.length, 'refund')} valid, nothing sent`);
    return;
  }

  const url = `${ctx.require('connectorUrl').replace(/\/+$/, '')}/refunds`;
  const key = await ctx.requireSecret('financeApiKey');
  const progress = options.csv !== undefined ? rowProgress(io, rows.length, 'refunds', 'text') : undefined;
  let queued = 0;
  let failed = 0;
  let stopped: string | undefined;
  try {
    for (const row of rows) {
      if (stopped) break;
      const outcome = await postRefund(url, key, row.request, io);
      const line = `${where(row)}order ${row.request.externalId}  refund ${row.request.refundId}  → ${outcome.text}`;
      if (progress) progress.row(line);
      else writeLine(io.stdout, line);
      if (outcome.ok) queued++;
      else failed++;
      stopped = outcome.stop;
    }
  } finally {
    progress?.stop();
  }
  const notSent = rows.length - queued - failed;
  const parts = [`${queued} queued`, `${failed} failed`, ...(notSent > 0 ? [`${notSent} not sent`] : [])];
  writeLine(io.stdout, `${plural(rows.length, 'refund')}: ${parts.join(', ')}`);
  if (stopped) writeLine(io.stderr, `stopped: ${stopped}`);
  if (queued > 0) {
    writeLine(
      io.stdout,
      'Queued refunds are applied by the worker in order; check one with: connector status <externalId>',
    );
  }
  if (failed > 0 || notSent > 0) throw new CliError('', 1);
}

function requestFromFlags(io: CliIo, options: RefundOptions): FinanceRefundRequest {
  if (options.externalId === undefined && options.refundId === undefined) {
    throw new CliError(
      'give --external-id and --refund-id (one refund), or --csv <file> (many); see connector refund --help',
    );
  }
  const raw: Record<string, unknown> = {
    externalId: options.externalId ?? '',
    refundId: options.refundId ?? '',
  };
  const issues: RefundIssue[] = [];
  if (options.amount !== undefined) raw['amount'] = options.amount.trim();
  if (options.amountCents !== undefined) {
    if (/^[0-9]+$/.test(options.amountCents.trim())) raw['amountCents'] = Number(options.amountCents.trim());
    else issues.push({ field: 'amountCents', message: 'must be a whole number of minor units (1250)' });
  }
  if (options.full) raw['full'] = true;
  if (options.reason !== undefined) raw['reason'] = options.reason;
  if (options.source !== undefined) raw['source'] = options.source;
  if (options.currency !== undefined) raw['currency'] = options.currency.trim().toUpperCase();
  const result = validateRefund(raw);
  issues.push(...result.issues);
  if (!result.request || issues.length > 0) reportIssues(io, issues, 'nothing sent');
  return result.request as FinanceRefundRequest;
}

/**
 * Each row is checked against the ledger before anything is sent (dry run too), with the rules
 * `POST /refunds` applies (`refundAmountOf` and `reserveRefund`, the door's own): a currency other
 * than the order's, or none for a decimal amount of an order the ledger does not know; a refund id the
 * ledger holds (recorded, or reserved by the connector) at another amount or `full` flag would be
 * dropped by the worker as a duplicate; a partial refund of an order being refunded in full would
 * never be applied; a partial refund larger than what is left of its order, after the refunds reserved
 * and not yet recorded, would refuse the whole conversion, which cannot be undone.
 * When the ledger cannot be read from here, the rows are still judged against the file's earlier rows
 * (a partial refund after a full one of its order), the rest is left to the connector on arrival,
 * and `note` says so, when there are amounts or currencies to check.
 */
async function checkRemaining(
  ctx: CliContext,
  rows: readonly RefundRow[],
): Promise<{ issues: RefundIssue[]; note?: string }> {
  const now = nowOf(ctx.io);
  const withoutLedger = async (why: string) => {
    const issues = await judgeRows(rows, fileOnly(ctx, rows), now);
    const checked = rows.some((r) => r.request.full !== true || r.request.currency !== undefined);
    if (!checked) return { issues };
    const exceptFile = rows.some((r) => r.line !== undefined)
      ? ' other than by an earlier row of this file'
      : '';
    const note =
      `amounts not checked against the ledger (${why}): neither what is left of each order (refunds ` +
      `requested and not yet applied included), nor an order being refunded in full${exceptFile}, nor ` +
      "the order's currency; the connector checks them when they arrive";
    return { issues, note };
  };
  if (ctx.get('ledgerTable') === undefined) return withoutLedger(missingMessage('ledgerTable'));
  try {
    return { issues: await judgeRows(rows, fromLedger(ctx, ctx.ledger()), now) };
  } catch (error) {
    if (error instanceof LedgerUnread) return withoutLedger(error.message);
    throw error;
  }
}

/** Why the ledger could not be read for the pre-check (the message is the note's reason). */
class LedgerUnread extends Error {
  override readonly name = 'LedgerUnread';
}

/** Where the pre-check finds a row's order: its view, read once a run, and whether the ledger told. */
interface OrderLookup {
  /** False when nothing was read: the order's record and currency are unknown, not absent. */
  readonly ledgerRead: boolean;
  orderOf(request: FinanceRefundRequest): Promise<OrderView>;
}

/** Each row's order as the ledger holds it; `LedgerUnread` when it cannot be read. */
function fromLedger(
  ctx: CliContext,
  ledger: Pick<Ledger, 'get'> & Pick<ReservationLedger, 'reservationsOf'>,
): OrderLookup {
  const orders = new Map<string, OrderView>();
  return {
    ledgerRead: true,
    orderOf: async (request) => {
      let programs: string[];
      try {
        programs = ctx.programs(undefined, request.source);
      } catch (error) {
        if (error instanceof CliError) throw new LedgerUnread(error.message);
        throw error;
      }
      try {
        return await viewOf(ledger, orders, programs, request.externalId);
      } catch (error) {
        throw new LedgerUnread(`the ledger could not be read: ${explain(error)}`);
      }
    },
  };
}

/** A ledger that holds nothing: the pre-check without one sees only the file's own rows. */
const NOTHING_READ: Pick<Ledger, 'get'> & Pick<ReservationLedger, 'reservationsOf'> = {
  get: async () => undefined,
  reservationsOf: async () => undefined,
};

/**
 * Each row's order as the file alone tells it. The configured sources' programs when known; else
 * rows naming one source, or none, are taken as one order of their `externalId` (most connectors run
 * one program), and rows naming two different sources as two (they may be of two programs).
 */
function fileOnly(ctx: CliContext, rows: readonly RefundRow[]): OrderLookup {
  const orders = new Map<string, OrderView>();
  const named = [...new Set(rows.flatMap((r) => (r.request.source ? [`source ${r.request.source}`] : [])))];
  return {
    ledgerRead: false,
    orderOf: (request) => {
      let programs: string[];
      try {
        programs = ctx.programs(undefined, request.source);
      } catch (error) {
        if (!(error instanceof CliError)) throw error;
        programs = request.source ? [`source ${request.source}`, ''] : ['', ...named];
      }
      return viewOf(NOTHING_READ, orders, programs, request.externalId);
    },
  };
}

/** The problems the rows will meet at `POST /refunds`, each judged after the file's earlier rows. */
async function judgeRows(rows: readonly RefundRow[], lookup: OrderLookup, now: Date): Promise<RefundIssue[]> {
  const issues: RefundIssue[] = [];
  // Rows of one order sent one after the other are all queued before the worker records the first,
  // and the door reserves each one it queues: each row is judged as the door will judge it, after
  // the file's earlier rows, not against the ledger alone.
  for (const row of rows) {
    const { request } = row;
    const order = await lookup.orderOf(request);
    const field = request.amountCents === undefined ? 'amount' : 'amountCents';
    // Without the ledger the order's currency is unknown, so a decimal amount given without one is
    // not read in minor units here (the door reads it in the order's currency).
    const unread = !lookup.ledgerRead && request.amount !== undefined && request.currency === undefined;
    const read: ReturnType<typeof refundAmountOf> | { amount: undefined; currency?: undefined } = unread
      ? { amount: undefined }
      : refundAmountOf(order.record, request);
    if ('field' in read) {
      issues.push({ line: row.line, field: read.field, message: read.message.replace(/^amount: /, '') });
      continue;
    }
    const judged = judgeAsSent(
      order,
      {
        externalId: request.externalId,
        refundId: request.refundId,
        amount: read.amount,
        ...(read.currency ? { currency: read.currency } : {}),
      },
      now,
    );
    if ('conflict' in judged) issues.push({ line: row.line, field: 'refundId', message: judged.conflict });
    else if ('refused' in judged) issues.push({ line: row.line, field, message: judged.refused });
    else if (judged.reservation && row.line !== undefined)
      order.fromFile.push({ reservation: judged.reservation, line: row.line });
  }
  return issues;
}

/** One order as the ledger holds it (read once a run), and what the file's earlier rows add to it. */
interface OrderView {
  readonly record: OrderRecord | undefined;
  /** The refunds `POST /refunds` reserved for it, as read. */
  readonly held: RefundReservations;
  /** Whether the ledger has a record or a reservations item of it. */
  readonly known: boolean;
  /** The reservations the door will write as it queues the file's earlier rows. */
  readonly fromFile: { readonly reservation: RefundReservation; readonly line: number }[];
}

/**
 * The order in the first of `programs` whose ledger knows it (or one the file's earlier rows
 * reserve in), else in the first of them; each key read once (`orders`).
 */
async function viewOf(
  ledger: Pick<Ledger, 'get'> & Pick<ReservationLedger, 'reservationsOf'>,
  orders: Map<string, OrderView>,
  programs: readonly string[],
  externalId: string,
): Promise<OrderView> {
  let first: OrderView | undefined;
  for (const program of programs) {
    const key = ledgerKey(program, externalId);
    let order = orders.get(key);
    if (!order) {
      const [record, reservations] = await Promise.all([ledger.get(key), ledger.reservationsOf(key)]);
      order = {
        record,
        held: reservations ?? { key, version: 0, refunds: [] },
        known: record !== undefined || reservations !== undefined,
        fromFile: [],
      };
      orders.set(key, order);
    }
    if (order.known || order.fromFile.length > 0) return order;
    first ??= order;
  }
  if (!first) throw new CliError('no program to look in');
  return first;
}

/** A row's refund as judged here: `amount` undefined for a partial refund not read in minor units. */
type RowRefund = Omit<AskedRefund, 'amount'> & { readonly amount: AskedRefund['amount'] | undefined };

/**
 * How `POST /refunds` will answer `asked` once the file's earlier rows are sent: the door's own
 * `reserveRefund` on the refunds the ledger holds reserved and those the earlier rows will reserve.
 * A refusal is in the door's words, or, when it is the file's earlier rows that leave no room, in
 * words that name their lines. Else the reservation the door will write, if any (none for a refund
 * id recorded or reserved already: it counts once).
 */
function judgeAsSent(
  order: OrderView,
  asked: RowRefund,
  now: Date,
): { conflict: string } | { refused: string } | { reservation?: RefundReservation } {
  const fromFile = order.fromFile.map((f) => f.reservation);
  if (asked.amount === undefined) {
    // A partial refund whose minor units are unknown here: the door's one rule that needs none.
    const held = unrecordedReservations(order.record, order.held);
    const refused = refundedInFullMessage(order.record, [...held, ...fromFile], asked.externalId);
    return refused ? { refused: refusalNamingFile(order, asked, refused) } : {};
  }
  const withFile = { ...order.held, refunds: [...order.held.refunds, ...fromFile] };
  const judged = reserveRefund(order.record, withFile, { ...asked, amount: asked.amount }, now);
  if ('conflict' in judged) return judged;
  if ('refused' in judged) return { refused: refusalNamingFile(order, asked, judged.refused) };
  const reservation = judged.reservations?.refunds.find((r) => r.refundId === asked.refundId);
  return reservation ? { reservation } : {};
}

/**
 * The door's refusal of a row, with the file's earlier rows it counted named by their lines (the door
 * would call them refunds "requested and not yet applied", which they are not yet). The rule applied
 * is the door's (`refused`); only its words change.
 */
function refusalNamingFile(order: OrderView, asked: RowRefund, refused: string): string {
  if (order.fromFile.length === 0 || asked.amount === 'full') return refused;
  const held = unrecordedReservations(order.record, order.held).filter((r) => r.refundId !== asked.refundId);
  const fromFile = order.fromFile.map((f) => f.reservation);
  if (refused === refundedInFullMessage(order.record, [...held, ...fromFile], asked.externalId)) {
    // A full refund the ledger holds comes first, and the door's words name it.
    const full = order.fromFile.find((f) => f.reservation.full);
    if (refundedInFullMessage(order.record, held, asked.externalId) || !full) return refused;
    return (
      `order ${asked.externalId} is being refunded in full by line ${full.line} of this file ` +
      `(refund ${full.reservation.refundId}): a partial refund of it would never be applied; the full ` +
      'refund gives back all of it'
    );
  }
  const rows = order.fromFile.filter((f) => !f.reservation.full);
  if (rows.length === 0 || asked.amount === undefined) return refused;
  const inFile = `${rows.length === 1 ? 'line' : 'lines'} ${rows.map((f) => f.line).join(', ')} of this file`;
  const reserved = reservedAlongside(held);
  const alongside = {
    amount: (reserved?.amount ?? 0) + rows.reduce((sum, f) => sum + f.reservation.amount, 0),
    what: reserved ? `${reserved.what}, and ${inFile}` : inFile,
  };
  return overRefundMessage(order.record, asked.refundId, asked.amount, alongside) ?? refused;
}

function reportIssues(io: CliIo, issues: readonly RefundIssue[], closing: string): never {
  for (const issue of issues) {
    const field = issue.line === undefined ? flagOf(issue.field) : issue.field;
    writeLine(
      io.stderr,
      `${issue.line === undefined ? '' : `line ${issue.line}: `}${field}: ${issue.message}`,
    );
  }
  throw new CliError(`${plural(issues.length, 'problem')}; ${closing}`, 2);
}

/** `amountCents` → `--amount-cents`, for messages about flags. */
function flagOf(field: string): string {
  return ROW_FLAGS.includes(field as (typeof ROW_FLAGS)[number])
    ? `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`
    : field;
}

function where(row: RefundRow): string {
  return row.line === undefined ? '' : `line ${row.line}  `;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

interface PostOutcome {
  readonly ok: boolean;
  readonly text: string;
  /** Set when sending more is pointless (wrong key, connector unreachable). */
  readonly stop?: string;
}

const RETRYABLE = new Set([429, 502, 503, 504]);
const ATTEMPTS = 3;

/**
 * POSTs one refund. 429/502/503/504 are retried (a refund id counts once, so a repeat is
 * harmless); a refused key or an unreachable connector stops the run, since every row would fail
 * the same way.
 */
async function postRefund(
  url: string,
  key: string,
  request: FinanceRefundRequest,
  { sleep: pause = sleep, random }: Pick<CliIo, 'sleep' | 'random'>,
): Promise<PostOutcome> {
  for (let attempt = 1; ; attempt++) {
    let response: Response;
    try {
      // biome-ignore lint/style/noRestrictedGlobals: bounded by its AbortSignal.timeout
      response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key, 'user-agent': 'connector-cli' },
        body: JSON.stringify(request),
        // A redirect would carry the API key wherever it points (fetch keeps x-api-key across hosts).
        redirect: 'manual',
        signal: AbortSignal.timeout(15_000),
      });
    } catch (error) {
      const reason = unreachable(error)
        ? `could not reach ${url}: ${explain(error)}. Is the connector running (npm start)?`
        : `could not reach ${url}: ${explain(error)}`;
      return { ok: false, text: `not sent (${reason})`, stop: reason };
    }
    if (isRedirect(response.status)) {
      await response.body?.cancel();
      const location = response.headers.get('location');
      const fix = { setting: 'CONNECTOR_URL (or --url)', what: 'the connector', carries: 'the API key' };
      return {
        ok: false,
        text: `${response.status} ${redirectTarget(url, location)}`,
        stop: `the connector URL ${redirectRefusal(response.status, url, location, fix)}`,
      };
    }
    const body = await readJson(response);
    if (response.status === 202 || response.ok) {
      const id = typeof body['messageId'] === 'string' ? `  message ${body['messageId']}` : '';
      const amount = queuedAmount(body);
      return {
        ok: true,
        text: `${response.status} ${String(body['status'] ?? 'ok')}${id}${amount ? `  ${amount}` : ''}`,
      };
    }
    if (RETRYABLE.has(response.status) && attempt < ATTEMPTS) {
      const after = Number(response.headers.get('retry-after'));
      // Full jitter: finance tools that failed in the same outage do not all come back in step.
      const wait =
        Number.isFinite(after) && after > 0
          ? Math.min(after * 1000, 5000)
          : backoffDelay(attempt, { baseMs: 500, capMs: 5000, random });
      await pause(wait);
      continue;
    }
    const field = typeof body['field'] === 'string' && body['field'] ? `${body['field']}: ` : '';
    const message = typeof body['message'] === 'string' ? body['message'] : response.statusText;
    const text = `${response.status} ${field}${message}`;
    if (response.status === 401 || response.status === 403) {
      return {
        ok: false,
        text,
        stop: `the connector refused the API key (HTTP ${response.status}); check FINANCE_API_KEY`,
      };
    }
    return { ok: false, text };
  }
}

/** The queued amount of a 202 answer as a person reads it (`USD 10.00`, `full refund`), if it says. */
function queuedAmount(body: Record<string, unknown>): string | undefined {
  if (body['full'] === true) return 'full refund';
  const amount = body['amount'];
  const currency = typeof body['currency'] === 'string' ? body['currency'] : undefined;
  return Number.isSafeInteger(amount) ? formatMinor(amount as number, currency) : undefined;
}

async function readJson(response: Response): Promise<Record<string, unknown>> {
  const text = await response.text();
  try {
    const json: unknown = JSON.parse(text);
    return typeof json === 'object' && json !== null ? (json as Record<string, unknown>) : {};
  } catch {
    return { message: cell(text, 200) };
  }
}

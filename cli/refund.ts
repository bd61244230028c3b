import type { Command } from 'commander';
import { backoffDelay, sleep } from '../shared/affiliate/retry.ts';
import { BadInputError } from '../shared/errors.ts';
import {
  type AskedRefund,
  FinanceRefundRequest,
  overRefundMessage,
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
the whole order. So is a partial refund of an order being refunded in full, and a refund id the
ledger holds at another amount (the worker applies a refund id once): give another refund id. This
is checked against the ledger (--ledger-table, LEDGER_TABLE or .local-stack.json) when it can be
read, else by the connector.
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
  if (checked.issues.length > 0) {
    reportIssues(
      io,
      checked.issues,
      options.csv === undefined ? 'nothing sent' : `${options.csv}: nothing sent`,
    );
  }
  if (checked.note) writeLine(io.stderr, checked.note);

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
 * `POST /refunds` applies (`reserveRefund`, the door's own): a refund id the ledger holds (recorded,
 * or reserved by the connector) at another amount or `full` flag would be dropped by the worker as a
 * duplicate; a partial refund of an order being refunded in full would never be applied; a partial
 * refund larger than what is left of its order, after the refunds reserved and not yet recorded,
 * would refuse the whole conversion, which cannot be undone.
 * When the ledger cannot be read from here, the rows are not held back (the connector checks them on
 * arrival) and `note` says why, when there are amounts to check.
 */
async function checkRemaining(
  ctx: CliContext,
  rows: readonly RefundRow[],
): Promise<{ issues: RefundIssue[]; note?: string }> {
  const anyPartial = rows.some((r) => r.request.full !== true);
  const unchecked = (why: string) =>
    anyPartial
      ? `amounts not checked against the ledger (${why}): neither what is left of each order (refunds ` +
        'requested and not yet applied included) nor an order being refunded in full; the connector ' +
        'checks them when they arrive'
      : undefined;
  const issues: RefundIssue[] = [];
  const uncheckedResult = (why: string) => {
    const note = unchecked(why);
    return note === undefined ? { issues } : { issues, note };
  };
  if (ctx.get('ledgerTable') === undefined) return uncheckedResult(missingMessage('ledgerTable'));
  const ledger = ctx.ledger();
  const now = nowOf(ctx.io);
  // Rows of one order sent one after the other are all queued before the worker records the first,
  // and the door reserves each one it queues: each row is judged as the door will judge it, after
  // the file's earlier rows, not against the ledger alone.
  const orders = new Map<string, OrderView>();
  for (const row of rows) {
    const { request } = row;
    let programs: string[];
    try {
      programs = ctx.programs(undefined, request.source);
    } catch (error) {
      if (error instanceof CliError) return uncheckedResult(error.message);
      throw error;
    }
    let order: OrderView;
    try {
      order = await viewOf(ledger, orders, programs, request.externalId);
    } catch (error) {
      return uncheckedResult(`the ledger could not be read: ${explain(error)}`);
    }
    const field = request.amountCents === undefined ? 'amount' : 'amountCents';
    const currency = order.record?.currency ?? request.currency;
    const minor = request.full === true ? 'full' : minorOf(request, currency);
    if (typeof minor === 'object') {
      issues.push({ line: row.line, field, message: minor.problem });
      continue;
    }
    if (minor === undefined) continue;
    const judged = judgeAsSent(
      order,
      {
        externalId: request.externalId,
        refundId: request.refundId,
        amount: minor,
        ...(currency ? { currency } : {}),
      },
      now,
    );
    if ('conflict' in judged) issues.push({ line: row.line, field: 'refundId', message: judged.conflict });
    else if ('refused' in judged) issues.push({ line: row.line, field, message: judged.refused });
    else if (judged.reservation && row.line !== undefined)
      order.fromFile.push({ reservation: judged.reservation, line: row.line });
  }
  return { issues };
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

/**
 * How `POST /refunds` will answer `asked` once the file's earlier rows are sent: the door's own
 * `reserveRefund` on the refunds the ledger holds reserved and those the earlier rows will reserve.
 * A refusal is in the door's words, or, when it is the file's earlier rows that leave no room, in
 * words that name their lines. Else the reservation the door will write, if any (none for a refund
 * id recorded or reserved already: it counts once).
 */
function judgeAsSent(
  order: OrderView,
  asked: AskedRefund,
  now: Date,
): { conflict: string } | { refused: string } | { reservation?: RefundReservation } {
  const fromFile = order.fromFile.map((f) => f.reservation);
  const withFile = { ...order.held, refunds: [...order.held.refunds, ...fromFile] };
  const judged = reserveRefund(order.record, withFile, asked, now);
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
function refusalNamingFile(order: OrderView, asked: AskedRefund, refused: string): string {
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
  if (rows.length === 0) return refused;
  const inFile = `${rows.length === 1 ? 'line' : 'lines'} ${rows.map((f) => f.line).join(', ')} of this file`;
  const reserved = reservedAlongside(held);
  const alongside = {
    amount: (reserved?.amount ?? 0) + rows.reduce((sum, f) => sum + f.reservation.amount, 0),
    what: reserved ? `${reserved.what}, and ${inFile}` : inFile,
  };
  return overRefundMessage(order.record, asked.refundId, asked.amount, alongside) ?? refused;
}

/**
 * The refund's amount in minor units when it can be read in the order's currency (undefined when
 * that is unknown), or why it cannot: more decimals than the currency has is a bad row, like on the
 * server, and found here before any row is sent.
 */
function minorOf(
  request: FinanceRefundRequest,
  currency: string | undefined,
): number | undefined | { problem: string } {
  if (request.amountCents !== undefined) return request.amountCents;
  if (request.amount === undefined || currency === undefined) return undefined;
  try {
    return parseMoney(request.amount, currency);
  } catch (error) {
    if (error instanceof BadInputError) return { problem: error.message.replace(/^amount: /, '') };
    throw error;
  }
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

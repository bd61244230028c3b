/**
 * A small RFC 4180 reader: fields separated by commas (or the `;` or tab a spreadsheet writes in a
 * decimal-comma locale), optionally quoted with `"` (a quoted field may hold separators, line breaks
 * and `""` for a quote), CRLF or LF line ends, a UTF-8 BOM (Excel writes one) ignored (`decodeCsv`
 * turns a file's bytes into that text). Blank lines
 * are skipped. Each record keeps the line it starts on, so errors can point finance staff to the
 * line their spreadsheet shows.
 */

export interface CsvRecord {
  /** 1-based line of the file where the record starts. */
  readonly line: number;
  readonly fields: string[];
}

export interface CsvProblem {
  readonly line: number;
  readonly message: string;
}

/** The text of a CSV file, or why its bytes are not read as one. */
export type CsvText = { readonly text: string; readonly notUtf8: boolean } | { readonly problem: string };

/** How to get a file this reader takes, in the words of the spreadsheets' Save As dialogs. */
export const SAVE_AS_UTF8 =
  'save it again as "CSV UTF-8 (Comma delimited)" in Excel, or as Text CSV with the character set "Unicode (UTF-8)" in LibreOffice';

const UTF16_BOMS: readonly { readonly bom: readonly number[]; readonly encoding: string }[] = [
  { bom: [0xff, 0xfe], encoding: 'utf-16le' },
  { bom: [0xfe, 0xff], encoding: 'utf-16be' },
];

/**
 * The text of a CSV file's bytes: UTF-8, with or without a BOM, or UTF-16 with its byte-order mark
 * (Excel's "Unicode Text"). Bytes that are not UTF-8 are never guessed: Excel's plain "CSV" writes
 * the Windows code page of its locale, where the byte 0xEA is "ê" in Western Europe (1252) and "ę"
 * in Poland (1250). They become U+FFFD and `notUtf8` is set, for the caller to name each cell
 * holding one. A NUL byte without a UTF-16 BOM (a workbook, or UTF-16 without its mark) is a problem.
 */
export function decodeCsv(bytes: Uint8Array): CsvText {
  const utf16 = UTF16_BOMS.find(({ bom }) => bom.every((b, i) => bytes[i] === b));
  if (utf16) return { text: new TextDecoder(utf16.encoding).decode(bytes), notUtf8: false };
  if (bytes.includes(0)) {
    return {
      problem: `not a text CSV (it holds NUL bytes: a workbook such as .xlsx, .xls or .ods, or UTF-16 text without its byte-order mark); ${SAVE_AS_UTF8}`,
    };
  }
  try {
    return { text: new TextDecoder('utf-8', { fatal: true }).decode(bytes), notUtf8: false };
  } catch {
    return { text: new TextDecoder('utf-8').decode(bytes), notUtf8: true };
  }
}

/**
 * Separators read. Excel and LibreOffice write `;` where the locale's decimal separator is a comma
 * (de, fr, es, it, nl, pl…), and a tab for "Text (tab-delimited)".
 */
export type CsvSeparator = ',' | ';' | '\t';
const SEPARATORS: readonly CsvSeparator[] = [',', ';', '\t'];

/**
 * The separator of a file, from its header (first non-blank line): the one that splits it into the
 * most of the `known` column names (case-insensitive), `,` on a tie. With no known name at all, the
 * only separator the header holds, if it holds exactly one (its unknown columns are then reported
 * one by one); otherwise undefined.
 */
export function detectSeparator(text: string, known: readonly string[]): CsvSeparator | undefined {
  const source = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const header = source.split(/\r?\n/).find((l) => l.trim() !== '') ?? '';
  const names = new Set(known.map((k) => k.toLowerCase()));
  let best: { separator: CsvSeparator; found: number } | undefined;
  for (const separator of SEPARATORS) {
    const fields = parseCsv(header, separator).records[0]?.fields ?? [];
    const found = fields.filter((f) => names.has(f.trim().toLowerCase())).length;
    if (found > (best?.found ?? 0)) best = { separator, found };
  }
  if (best) return best.separator;
  const present = SEPARATORS.filter((s) => header.includes(s));
  return present.length === 1 ? present[0] : undefined;
}

export function parseCsv(
  text: string,
  separator: CsvSeparator = ',',
): { records: CsvRecord[]; problems: CsvProblem[] } {
  const source = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const records: CsvRecord[] = [];
  const problems: CsvProblem[] = [];
  let line = 1;
  let start = 1;
  let fields: string[] = [];
  let field = '';
  let quoted = false;
  let wasQuoted = false;

  const endRecord = () => {
    fields.push(field);
    if (!(fields.length === 1 && fields[0] === '' && !wasQuoted)) records.push({ line: start, fields });
    fields = [];
    field = '';
    wasQuoted = false;
  };

  for (let i = 0; i < source.length; i++) {
    const c = source[i];
    if (quoted) {
      if (c === '"') {
        if (source[i + 1] === '"') {
          field += '"';
          i++;
        } else {
          quoted = false;
        }
      } else {
        if (c === '\n') line++;
        field += c;
      }
      continue;
    }
    if (c === '"') {
      if (field.trim() !== '') problems.push({ line, message: 'a quote in the middle of an unquoted field' });
      field = '';
      quoted = true;
      wasQuoted = true;
    } else if (c === separator) {
      fields.push(field);
      field = '';
    } else if (c === '\r' && source[i + 1] === '\n') {
      // CRLF: the \n ends the record.
    } else if (c === '\n') {
      endRecord();
      line++;
      start = line;
    } else {
      field += c;
    }
  }
  if (quoted) problems.push({ line: start, message: 'a quoted field is not closed' });
  if (field !== '' || fields.length > 0 || wasQuoted) endRecord();
  return { records, problems };
}

/** A number as a spreadsheet reads it: kept as is even with a leading minus. */
const PLAIN_NUMBER = /^-?\d+(\.\d+)?$/;
/** First characters a spreadsheet takes as the start of a formula (or that hide one: tab, CR). */
const FORMULA_START = /^[=+\-@\t\r]/;

/**
 * One CSV cell for a file finance staff open in a spreadsheet: a value starting like a formula gets
 * a leading `'` (OWASP's CSV-injection advice, shown as text by Excel and LibreOffice), then the
 * field is quoted when it holds a comma, a quote or a line break.
 */
export function csvCell(value: string): string {
  const safe = FORMULA_START.test(value) && !PLAIN_NUMBER.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

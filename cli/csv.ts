/**
 * A small RFC 4180 reader: fields separated by commas (or the `;` or tab a spreadsheet writes in a
 * decimal-comma locale), optionally quoted with `"` (a quoted field may hold separators, line breaks
 * and `""` for a quote), CRLF or LF line ends, a UTF-8 BOM (Excel writes one) ignored. Blank lines
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

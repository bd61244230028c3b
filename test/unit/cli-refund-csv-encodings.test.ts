import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { refundsFromCsv } from '../../cli/refund.ts';
import { emptyDir, runCli } from '../support/cli.ts';

/** What Excel writes in a decimal-comma locale (de, fr, es, it, nl, pl…). */
const EU_HEADER = 'externalId;refundId;amount;currency;full;reason';
const issuesOf = (input: string | Uint8Array) =>
  refundsFromCsv(input).issues.map((i) => `${i.line ?? '-'}:${i.field}: ${i.message}`);

/** Excel's plain "CSV" in a Western European locale: Windows-1252 (ü is 0xFC, é 0xE9, € 0x80). */
const windows1252 = (text: string) =>
  Buffer.concat([Buffer.from(text, 'latin1'), Buffer.from([0x80]), Buffer.from('\r\n', 'latin1')]);

/** Excel's "Unicode Text": UTF-16 little-endian with its byte-order mark, tab-separated. */
const utf16le = (text: string) => Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]);
const utf16be = (text: string) => utf16le(text).swap16();

/** Runs `connector refund --csv <bytes> --dry-run` on a file holding exactly `bytes`. */
async function dryRun(bytes: Uint8Array) {
  const dir = emptyDir();
  try {
    const csv = join(dir.dir, 'refunds.csv');
    writeFileSync(csv, bytes);
    const result = await runCli(['refund', '--csv', csv, '--dry-run'], { cwd: dir.dir });
    return { ...result, csv };
  } finally {
    dir.remove();
  }
}

/** The requests a dry run printed. */
const requestsOf = (stdout: string) =>
  stdout
    .split('\n')
    .filter((l) => l.includes('would POST /refunds '))
    .map((l) => JSON.parse(l.slice(l.indexOf('{'))) as Record<string, unknown>);

describe('connector refund --csv with the encodings spreadsheets save', () => {
  it('refuses a Windows-1252 file (Excel\'s plain "CSV"), naming each cell and how to save it as UTF-8', async () => {
    // Prepare
    const bytes = windows1252(
      `${EU_HEADER}\r\n1001;RF-1;12,50;EUR;;Rückerstattung\r\n1002;RF-2;3,00;EUR;;remboursé\r\n1003;RF-3;1,00;EUR;;ok\r\n1004;RF-4;2,00;EUR;;`,
    );
    // Act
    const result = await dryRun(bytes);
    // Assess
    expect(result.code).toBe(2);
    expect(result.stdout).not.toContain('\ufffd');
    expect(result.stdout).not.toContain('would POST');
    const lines = result.stderr.trim().split('\n');
    expect(lines[0]).toMatch(/^csv: the file is not UTF-8, .*Windows-1252.*"CSV UTF-8 \(Comma delimited\)"/);
    expect(lines.slice(1, 4)).toEqual([
      'line 2: reason: "R\ufffdckerstattung" is not UTF-8 text',
      'line 3: reason: "rembours\ufffd" is not UTF-8 text',
      'line 5: reason: "\ufffd" is not UTF-8 text',
    ]);
    expect(lines[4]).toBe(`error: 4 problems; ${result.csv}: nothing sent`);
  });

  it('reads a UTF-8 file with a BOM and CRLF, accents intact', async () => {
    // Prepare
    const bytes = Buffer.concat([
      Buffer.from([0xef, 0xbb, 0xbf]),
      Buffer.from(`${EU_HEADER}\r\n1001;RF-1;12,50;EUR;;Rückerstattung – remboursé €\r\n`, 'utf8'),
    ]);
    // Act
    const result = await dryRun(bytes);
    // Assess
    expect(result.code, result.stderr).toBe(0);
    expect(requestsOf(result.stdout)).toEqual([
      {
        externalId: '1001',
        refundId: 'RF-1',
        amount: '12.50',
        currency: 'EUR',
        reason: 'Rückerstattung – remboursé €',
      },
    ]);
  });

  it('reads a UTF-16 file with its byte-order mark (Excel\'s "Unicode Text"), little- or big-endian', async () => {
    // Prepare
    const text =
      'externalId\trefundId\tamount\tcurrency\treason\r\n1001\tRF-1\t12,50\tEUR\tRückerstattung\r\n';
    const expected = [
      { externalId: '1001', refundId: 'RF-1', amount: '12.50', currency: 'EUR', reason: 'Rückerstattung' },
    ];
    // Act
    const result = await dryRun(utf16le(text));
    // Assess
    expect(result.code, result.stderr).toBe(0);
    expect(requestsOf(result.stdout)).toEqual(expected);
    expect(refundsFromCsv(utf16be(text)).rows.map((r) => r.request)).toEqual(expected);
  });

  it('refuses a file holding NUL bytes (UTF-16 without a byte-order mark, a workbook) with one problem', async () => {
    // Prepare
    const noBom = Buffer.from('externalId\trefundId\tamount\r\n1001\tRF-1\t12,50\r\n', 'utf16le');
    const xlsx = Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00, 0x06, 0x00, 0x08, 0x00, 0x00, 0x00]);
    // Act
    const result = await dryRun(noBom);
    // Assess
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^line 1: csv: not a text CSV .*"CSV UTF-8 \(Comma delimited\)"/);
    expect(result.stderr.match(/^line /gm)).toHaveLength(1);
    expect(issuesOf(xlsx)).toEqual([expect.stringMatching(/^1:csv: not a text CSV/)]);
  });

  it('refuses a replacement character already in a UTF-8 file, naming the line and column', () => {
    // Act and assess
    expect(issuesOf(Buffer.from(`${EU_HEADER}\n1001;RF-1;1,00;EUR;;R\ufffdckerstattung\n`, 'utf8'))).toEqual([
      '2:reason: "R\ufffdckerstattung" holds \ufffd (U+FFFD), left where text was garbled before this file was written: type the value again',
    ]);
  });
});

describe('refundsFromCsv reading the full column', () => {
  it("reads a spreadsheet's TRUE and FALSE in its own language, in any case", () => {
    // Prepare
    const words = [
      ['WAHR', 'FALSCH'],
      ['VRAI', 'FAUX'],
      ['VERDADERO', 'FALSO'],
      ['VERO', 'FALSO'],
      ['WAAR', 'ONWAAR'],
      ['VERDADEIRO', 'FALSO'],
      ['PRAWDA', 'FAŁSZ'],
      ['True', 'False'],
      ['yes', 'NO'],
      ['1', '0'],
    ];
    const rows = words.flatMap(([yes, no], i) => [
      `${1000 + i};F${i};;EUR;${yes};`,
      `${1000 + i};P${i};1,00;EUR;${no?.toLowerCase()};`,
    ]);
    // Act
    const { rows: read, issues } = refundsFromCsv([EU_HEADER, ...rows].join('\n'));
    // Assess
    expect(issues).toEqual([]);
    expect(read.map((r) => r.request.full ?? false)).toEqual(words.flatMap(() => [true, false]));
  });

  it('keeps refusing anything else, naming the line, the column and what is read', () => {
    // Act
    const issues = issuesOf(`${EU_HEADER}\n1001;R1;;EUR;x;\n1002;R2;;EUR;ja;\n1003;R3;;EUR;perhaps;\n`);
    // Assess
    expect(issues.map((i) => i.slice(0, i.indexOf(' is not')))).toEqual([
      '2:full: "x"',
      '3:full: "ja"',
      '4:full: "perhaps"',
    ]);
    expect(issues[0]).toMatch(
      /is not true or false \(true\/false, yes\/no, 1\/0 .*WAHR\/FALSCH.*empty is false\)$/,
    );
  });
});

describe('refundsFromCsv with three-decimal currencies (KWD, BHD, OMR)', () => {
  it('reads 0.125 in a ;-separated file: no thousands separator follows a 0', () => {
    // Act
    const { rows, issues } = refundsFromCsv(`${EU_HEADER}\n1001;R1;0.125;KWD;;\n`);
    // Assess
    expect(issues).toEqual([]);
    expect(rows.map((r) => r.request.amount)).toEqual(['0.125']);
  });

  it('suggests for an ambiguous amount only what the file then reads, as the amount meant', () => {
    // Prepare
    const cases: [separator: string, value: string, thousands: string, decimal: string][] = [
      [';', '1.250', '1250', '1.25'],
      [';', '1.005', '1005', '1.005'],
      ['\t', '1.250', '1250', '1.25'],
      ['\t', '1.005', '1005', '1.005'],
      ['\t', '1,005', '1005', '1.005'],
    ];
    for (const [separator, value, thousands, decimal] of cases) {
      const file = (amount: string) =>
        `externalId${separator}refundId${separator}amount${separator}currency\n1001${separator}R1${separator}${amount}${separator}KWD\n`;
      const [issue] = refundsFromCsv(file(value)).issues;
      // Act
      const suggested = /: write (\S+) or (\S+)$/.exec(issue?.message ?? '');
      // Assess
      expect(issue?.message, `${JSON.stringify(separator)} ${value}`).toContain(
        `could be ${thousands} or ${decimal}`,
      );
      const read = suggested?.slice(1).map((amount) => refundsFromCsv(file(amount)));
      expect(
        read?.map((r) => r.issues),
        `${JSON.stringify(separator)} ${value}`,
      ).toEqual([[], []]);
      const trimmed = (amount = '') => (amount.includes('.') ? amount.replace(/0+$/, '') : amount);
      expect(read?.map((r) => trimmed(r.rows[0]?.request.amount))).toEqual([thousands, decimal]);
    }
  });
});

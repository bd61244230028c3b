import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { detectSeparator, parseCsv } from '../../cli/csv.ts';
import { CSV_COLUMNS, refundsFromCsv } from '../../cli/refund.ts';
import { emptyDir, runCli } from '../support/cli.ts';

const issuesOf = (text: string) =>
  refundsFromCsv(text).issues.map((i) => `${i.line}:${i.field}: ${i.message}`);
const amountsOf = (text: string) => refundsFromCsv(text).rows.map((r) => r.request.amount);

/** What Excel or LibreOffice write in a decimal-comma locale (de, fr, es, it, nl, pl…). */
const EU_HEADER = 'externalId;refundId;amount;currency;full;reason';

describe('detectSeparator', () => {
  it('reads the separator from the header: comma, semicolon or tab', () => {
    // Act and assess
    expect(detectSeparator('externalId,refundId,amount\n1,R,"1,5"\n', CSV_COLUMNS)).toBe(',');
    expect(detectSeparator(`\ufeff${EU_HEADER}\r\n1001;R;12,50;EUR;;a, b\r\n`, CSV_COLUMNS)).toBe(';');
    expect(detectSeparator('\nexternalId\trefundId\tamount\n', CSV_COLUMNS)).toBe('\t');
    expect(detectSeparator('externalId\n1001\n', CSV_COLUMNS)).toBe(',');
    expect(detectSeparator('externalId|refundId|amount\n', CSV_COLUMNS)).toBeUndefined();
  });

  it('lets parseCsv split on a semicolon, quotes working the same', () => {
    // Act
    const { records, problems } = parseCsv('a;b;c\r\n"x; y";a, b;"say ""hi"""\r\n', ';');
    // Assess
    expect(problems).toEqual([]);
    expect(records).toEqual([
      { line: 1, fields: ['a', 'b', 'c'] },
      { line: 2, fields: ['x; y', 'a, b', 'say "hi"'] },
    ]);
  });
});

describe('refundsFromCsv with a spreadsheet export from a decimal-comma locale', () => {
  it('reads a ;-separated file whose amounts have a decimal comma', () => {
    // Act
    const { rows, issues } = refundsFromCsv(`${EU_HEADER}\n1001;RF-1;12,50;EUR;;damaged\n`);
    // Assess
    expect(issues).toEqual([]);
    expect(rows).toEqual([
      {
        line: 2,
        request: {
          externalId: '1001',
          refundId: 'RF-1',
          amount: '12.50',
          currency: 'EUR',
          reason: 'damaged',
        },
      },
    ]);
  });

  it('reads the ;-separated fixture, with quoted and unquoted separators in reasons', () => {
    // Prepare
    const text = readFileSync(new URL('../fixtures/refunds.sample-semicolon.csv', import.meta.url), 'utf8');
    // Act
    const { rows, issues } = refundsFromCsv(text);
    // Assess
    expect(issues).toEqual([]);
    expect(rows.map((r) => r.request)).toEqual([
      {
        externalId: '1001',
        refundId: 'RF-1001-1',
        amount: '10.00',
        reason: 'damaged item; partial refund',
        source: 'shopify',
        currency: 'USD',
      },
      {
        externalId: '1002',
        refundId: 'RF-1002-1',
        full: true,
        reason: 'order returned',
        source: 'woocommerce',
      },
      {
        externalId: '1003',
        refundId: 'RF-1003-1',
        amount: '5.5',
        reason: 'price adjustment, agreed by phone',
        source: 'generic',
        currency: 'EUR',
      },
    ]);
  });

  it('accepts a "." decimal in a ;-separated file too, and reads a tab-separated export', () => {
    // Act and assess
    expect(amountsOf(`${EU_HEADER}\n1001;R1;12.50;EUR;;\n1002;R2;7;EUR;;\n`)).toEqual(['12.50', '7']);
    expect(amountsOf('externalId\trefundId\tamount\treason\n1001\tR1\t12,50\tsize; colour, fit\n')).toEqual([
      '12.50',
    ]);
  });

  it("reads the comma amount with the order's currency's decimals, through the same money parser", () => {
    // Act and assess
    expect(
      issuesOf(`${EU_HEADER}\n1001;R1;12,345;EUR;;\n1002;R2;1000,5;JPY;;\n1003;R3;0,00;EUR;;\n`),
    ).toEqual([
      '2:amount: more than 2 decimals for EUR',
      '3:amount: more than 0 decimals for JPY',
      '4:amount: must be greater than zero',
    ]);
  });

  it('refuses anything that looks like a thousands separator, naming the line and the column', () => {
    // Prepare
    const text = [
      EU_HEADER,
      '1001;R1;1.250,00;EUR;;',
      '1002;R2;1,250.00;EUR;;',
      '1003;R3;1 250,00;EUR;;',
      '1004;R4;1\u00a0250,00;EUR;;',
      '1005;R5;1\u202f250,00;EUR;;',
      "1006;R6;1'250.00;EUR;;",
      '1007;R7;1.250.000;EUR;;',
      '1008;R8;1.250;EUR;;',
    ].join('\n');
    // Act
    const issues = refundsFromCsv(text).issues;
    // Assess
    expect(refundsFromCsv(text).rows).toEqual([]);
    expect(issues.map((i) => `${i.line}:${i.field}`)).toEqual([
      '2:amount',
      '3:amount',
      '4:amount',
      '5:amount',
      '6:amount',
      '7:amount',
      '8:amount',
      '9:amount',
    ]);
    for (const issue of issues.slice(0, 7)) {
      expect(issue.message).toMatch(/thousands separator/);
      expect(issue.message).toContain('1250,00 or 1250.00');
    }
    // "1.250" is 1250 to a German spreadsheet and 1.25 to an English one: never guessed.
    expect(issues[7]?.message).toMatch(/^"1\.250" could be 1250 or 1\.25: write 1250 or 1,25/);
  });

  it('says which amounts it reads when an amount is no number', () => {
    // Act and assess
    expect(issuesOf(`${EU_HEADER}\n1001;R1;12,50 €;EUR;;\n1002;R2;-12,50;EUR;;\n`)).toEqual([
      '2:amount: "12,50 €" is not a decimal amount such as 12,50 or 12.50 (no currency sign or thousands separator)',
      '3:amount: "-12,50" is not a decimal amount such as 12,50 or 12.50 (no currency sign or thousands separator)',
    ]);
  });

  it("names the file's own separator when a row has too many fields", () => {
    // Act and assess
    expect(issuesOf(`${EU_HEADER}\n1001;R1;12,50;EUR;;damaged; returned\n`)).toEqual([
      '2:csv: 7 fields where the header has 6 (a ";" inside a value must be quoted)',
    ]);
  });

  it('refuses a file separated by anything else with one message saying what is read', () => {
    // Act
    const issues = issuesOf('externalId|refundId|amount\n1001|RF-1|12.50\n');
    // Assess
    expect(issues).toEqual([
      '1:csv: no refund column found in the header: columns must be separated by "," or ";" (or a tab) and named externalId,refundId,amount,full,reason,source,currency',
    ]);
  });
});

describe('connector refund --csv with a ;-separated export', () => {
  it('--dry-run prints the request with the amount read as 12.50', async () => {
    // Prepare
    const dir = emptyDir();
    try {
      const csv = join(dir.dir, 'eu.csv');
      writeFileSync(csv, `${EU_HEADER}\n1001;RF-1;12,50;EUR;;damaged\n`);
      // Act
      const result = await runCli(['refund', '--csv', csv, '--dry-run'], { cwd: dir.dir });
      // Assess
      expect(result.code, result.stderr).toBe(0);
      const [line, summary] = result.stdout.trim().split('\n');
      expect(line?.startsWith('line 2  would POST /refunds ')).toBe(true);
      expect(JSON.parse(line?.replace('line 2  would POST /refunds ', '') ?? '')).toEqual({
        externalId: '1001',
        refundId: 'RF-1',
        amount: '12.50',
        currency: 'EUR',
        reason: 'damaged',
      });
      expect(summary).toBe('dry run: 1 refund valid, nothing sent');
    } finally {
      dir.remove();
    }
  });

  it('refuses a file with another separator with one problem, and exit code 2', async () => {
    // Prepare
    const dir = emptyDir();
    try {
      const csv = join(dir.dir, 'pipes.csv');
      writeFileSync(csv, 'externalId|refundId|amount\n1001|RF-1|12.50\n');
      // Act
      const result = await runCli(['refund', '--csv', csv, '--dry-run'], { cwd: dir.dir });
      // Assess
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(
        /^line 1: csv: no refund column found in the header: columns must be separated by "," or ";"/,
      );
      expect(result.stderr).toContain(`1 problem; ${csv}: nothing sent`);
      expect(result.stderr.match(/^line /gm)).toHaveLength(1);
    } finally {
      dir.remove();
    }
  });

  it('--help says which separators and decimal commas are read', async () => {
    // Act
    const result = await runCli(['refund', '--help'], { cwd: process.cwd() });
    // Assess
    expect(result.stdout).toContain('separated by "," or ";" (or a tab)');
    expect(result.stdout).toContain('1001;RF-1001-1;12,50');
  });
});

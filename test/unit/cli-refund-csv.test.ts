import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseCsv } from '../../cli/csv.ts';
import { refundsFromCsv, validateRefund } from '../../cli/refund.ts';

const HEADER = 'externalId,refundId,amount,full,reason,source,currency';
const csv = (...rows: string[]) => [HEADER, ...rows].join('\n');
const issuesOf = (text: string) =>
  refundsFromCsv(text).issues.map((i) => `${i.line}:${i.field}: ${i.message}`);

describe('parseCsv', () => {
  it('reads quoted fields with commas, quotes and line breaks, CRLF, a BOM, and skips blank lines', () => {
    // Prepare
    const text = '\ufeffa,b\r\n"x, y","say ""hi"""\r\n\r\n"two\nlines",z\n';
    // Act
    const { records, problems } = parseCsv(text);
    // Assess
    expect(problems).toEqual([]);
    expect(records).toEqual([
      { line: 1, fields: ['a', 'b'] },
      { line: 2, fields: ['x, y', 'say "hi"'] },
      { line: 4, fields: ['two\nlines', 'z'] },
    ]);
  });

  it('reports a quote left open', () => {
    // Act
    const { problems } = parseCsv('a,b\n"open,b\n');
    // Assess
    expect(problems).toEqual([{ line: 2, message: 'a quoted field is not closed' }]);
  });
});

describe('refundsFromCsv', () => {
  it('reads the sample CSV into the requests the API takes', () => {
    // Prepare
    const text = readFileSync(new URL('../fixtures/refunds.sample.csv', import.meta.url), 'utf8');
    // Act
    const { rows, issues } = refundsFromCsv(text);
    // Assess
    expect(issues).toEqual([]);
    expect(rows).toEqual([
      {
        line: 2,
        request: {
          externalId: '1001',
          refundId: 'RF-1001-1',
          amount: '10.00',
          reason: 'damaged item, partial refund',
          source: 'shopify',
          currency: 'USD',
        },
      },
      {
        line: 3,
        request: {
          externalId: '1002',
          refundId: 'RF-1002-1',
          full: true,
          reason: 'order returned',
          source: 'woocommerce',
        },
      },
      {
        line: 4,
        request: {
          externalId: '1003',
          refundId: 'RF-1003-1',
          amount: '5.00',
          reason: 'price adjustment',
          source: 'generic',
          currency: 'EUR',
        },
      },
    ]);
  });

  it('accepts columns in any order and case, and upper-cases currency codes', () => {
    // Act
    const { rows, issues } = refundsFromCsv('RefundID,externalid,Amount,Currency\nR1,1001,12.5,eur\n');
    // Assess
    expect(issues).toEqual([]);
    expect(rows[0]?.request).toEqual({ externalId: '1001', refundId: 'R1', amount: '12.5', currency: 'EUR' });
  });

  it('lists every bad row with its line and field, and returns no row to send', () => {
    // Prepare
    const text = csv(
      '1001,R1,10.00,,,,',
      '1002,R2,"1,000.00",,,,',
      '1003,R3,0.00,,,,',
      '1004,R4,12.345,,,,EUR',
      '1005,R5,10.00,true,,,',
      '1006,R6,,,,,',
      ',R7,1.00,,,,',
      '1008,R8,1.00,perhaps,,,',
      '1009,R9,1.00,,,,euro',
      '1001,R1,2.00,,,,',
      '1010,R10,1.00',
    );
    // Act
    const issues = issuesOf(text);
    // Assess
    expect(issues).toEqual([
      '3:amount: "1,000.00" is not a decimal amount such as 12.50 ("." before the cents, no currency sign or thousands separator)',
      '4:amount: must be greater than zero',
      '5:amount: more than 2 decimals for EUR',
      expect.stringMatching(/^6:amount: give an amount .* or a full refund/),
      expect.stringMatching(/^7:amount: give an amount/),
      '8:externalId: required',
      expect.stringMatching(/^9:full: "perhaps" is not true or false/),
      '10:currency: must be an ISO 4217 currency code',
      '11:refundId: same externalId and refundId as line 2',
      '12:csv: 3 fields where the header has 7 (a comma inside a value must be quoted)',
    ]);
  });

  it('rejects a header with an unknown or missing column', () => {
    // Act and assess
    expect(issuesOf('externalId,refund,amount\n1,R,1.00\n')).toEqual([
      '1:refund: unknown column (expected externalId,refundId,amount,full,reason,source,currency)',
      '1:refundId: missing column',
    ]);
    expect(issuesOf(`${HEADER}\n`)).toEqual(['1:csv: no refund rows after the header']);
    expect(issuesOf('')).toEqual(['1:csv: the file is empty']);
  });
});

describe('validateRefund', () => {
  it('uses the server schema: unknown fields and bad currencies are refused', () => {
    // Act
    const { issues } = validateRefund({
      externalId: '1',
      refundId: 'R',
      amountCents: 100,
      // XTS is ISO 4217's test code: no order is in it (a lower-case code is read like the webhooks do).
      currency: 'XTS',
      note: 'x',
    });
    // Assess
    expect(issues.map((i) => i.field).sort()).toEqual(['currency', 'note']);
  });

  it('accepts a JPY amount without decimals and refuses one with cents', () => {
    // Act and assess
    expect(
      validateRefund({ externalId: '1', refundId: 'R', amount: '1000', currency: 'JPY' }).issues,
    ).toEqual([]);
    expect(
      validateRefund({ externalId: '1', refundId: 'R', amount: '1000.5', currency: 'JPY' }).issues,
    ).toEqual([{ line: undefined, field: 'amount', message: 'more than 0 decimals for JPY' }]);
  });
});

import { describe, expect, it } from 'vitest';
import { compareOrder } from '../../cli/compare.ts';
import { formatAge, parseWhen } from '../../cli/io.ts';
import { periodBound } from '../../cli/reconcile.ts';
import { statusText } from '../../cli/status.ts';
import type { Conversion } from '../../shared/affiliate/schemas.ts';
import type { OrderRecord } from '../../shared/ledger.ts';

const PROGRAM = '5ad000000000000000000101';
const NOW = new Date('2026-06-01T12:00:00.000Z');

function record(overrides: Partial<OrderRecord> = {}): OrderRecord {
  return {
    key: `${PROGRAM}#1001`,
    program: PROGRAM,
    externalId: '1001',
    source: 'shopify',
    state: 'added',
    version: 3,
    conversionId: 'c00000000000000000000001',
    originalAmount: 5000,
    currentAmount: 4000,
    currency: 'EUR',
    refunds: {},
    createdAt: '2026-05-01T10:00:00.000Z',
    updatedAt: '2026-05-02T10:00:00.000Z',
    ...overrides,
  };
}

function conversion(overrides: Partial<Conversion> = {}): Conversion {
  return {
    id: 'c00000000000000000000001',
    externalId: '1001',
    amount: 4000,
    currency: 'EUR',
    status: 'pending',
    ...overrides,
  };
}

const kinds = (r: OrderRecord | undefined, c: Conversion[]) =>
  compareOrder(PROGRAM, '1001', r, c).map((d) => d.kind);

describe('compareOrder', () => {
  it('finds nothing when the ledger and the platform agree', () => {
    // Act and assess
    expect(kinds(record(), [conversion()])).toEqual([]);
    expect(kinds(record({ state: 'refused' }), [conversion({ status: 'refused', amount: 0 })])).toEqual([]);
    expect(kinds(record({ state: 'skipped' }), [])).toEqual([]);
  });

  it('tells each kind of difference', () => {
    // Act and assess
    expect(kinds(record(), [])).toEqual(['missing']);
    expect(kinds(undefined, [conversion()])).toEqual(['unexpected']);
    expect(kinds(record({ state: 'skipped' }), [conversion()])).toEqual(['unexpected']);
    expect(kinds(record(), [conversion({ amount: 3999 })])).toEqual(['amount_mismatch']);
    expect(kinds(record(), [conversion({ status: 'refused' })])).toEqual(['status_mismatch']);
    expect(kinds(record({ state: 'refused' }), [conversion({ status: 'accepted' })])).toEqual([
      'status_mismatch',
    ]);
    expect(kinds(record(), [conversion(), conversion({ id: 'c00000000000000000000002' })])).toEqual([
      'duplicate',
    ]);
  });

  it('does not judge an add in flight', () => {
    // Act and assess
    expect(kinds(record({ state: 'adding' }), [])).toEqual([]);
  });

  it('names both amounts with the currency', () => {
    // Act
    const [difference] = compareOrder(PROGRAM, '1001', record(), [conversion({ amount: 3999 })]);
    // Assess
    expect(difference?.detail).toBe('ledger EUR 40.00, platform EUR 39.99');
  });
});

describe('time flags', () => {
  it('reads durations back from now and ISO dates', () => {
    // Act and assess
    expect(parseWhen('2d', NOW, '--since').toISOString()).toBe('2026-05-30T12:00:00.000Z');
    expect(parseWhen('90m', NOW, '--since').toISOString()).toBe('2026-06-01T10:30:00.000Z');
    expect(parseWhen('2026-05-01T08:00:00Z', NOW, '--since').toISOString()).toBe('2026-05-01T08:00:00.000Z');
    expect(() => parseWhen('soon', NOW, '--since')).toThrow(/^--since: "soon" is neither a date/);
  });

  it.each(['2', '7', '12', '30', '90', '2026'])(
    'refuses a duration without its unit ("%s"), naming the flag and the unit to add',
    (text) => {
      // Act and assess: V8's Date.parse reads "2" as 2001-02-01 and "90" as 1990-01-01
      expect(() => parseWhen(text, NOW, '--since')).toThrow(
        new RegExp(
          `^--since: "${text}" is neither a date .* nor a duration .*: give its unit, as in ${text}d`,
        ),
      );
      expect(() => periodBound(text, '--from', NOW, false)).toThrow(
        new RegExp(`^--from: "${text}" is neither`),
      );
      expect(() => periodBound(text, '--to', NOW, true)).toThrow(new RegExp(`^--to: "${text}" is neither`));
    },
  );

  it.each([
    'May 1',
    '1 May 2026',
    '2026/05/01',
    'Fri, 01 May 2026 10:00:00 GMT',
    '2026-05',
    '2026-5-1',
    '2026-02-30',
    '2026-13-01',
    '2026-05-01T24:00Z',
    '2026-05-01T10:00:00+02',
    '2d ago',
    '-2d',
  ])('refuses "%s", which is not ISO 8601 or a real day, though Date.parse may read it', (text) => {
    // Act and assess
    expect(() => parseWhen(text, NOW, '--since')).toThrow(/^--since: /);
    expect(() => periodBound(text, '--from', NOW, false)).toThrow(/^--from: /);
  });

  it.each([
    ['2026-05-01', '2026-05-01T00:00:00.000Z'],
    ['2026-02-28', '2026-02-28T00:00:00.000Z'],
    ['2024-02-29', '2024-02-29T00:00:00.000Z'],
    ['2026-05-01T08:00:00Z', '2026-05-01T08:00:00.000Z'],
    ['2026-05-01T08:00Z', '2026-05-01T08:00:00.000Z'],
    ['2026-05-01T08:00:00.250Z', '2026-05-01T08:00:00.250Z'],
    ['2026-05-01T10:00:00+02:00', '2026-05-01T08:00:00.000Z'],
    ['2026-05-01T10:00:00+0200', '2026-05-01T08:00:00.000Z'],
    ['2026-05-01T03:30:00-04:30', '2026-05-01T08:00:00.000Z'],
    ['30s', '2026-06-01T11:59:30.000Z'],
    ['1w', '2026-05-25T12:00:00.000Z'],
    ['2D', '2026-05-30T12:00:00.000Z'],
  ])('reads the ISO 8601 date or time, or the duration, "%s"', (text, iso) => {
    // Act and assess
    expect(parseWhen(text, NOW, '--since').toISOString()).toBe(iso);
  });

  it('reads an ISO time without an offset as local time, as JavaScript does', () => {
    // Act and assess
    expect(parseWhen('2026-05-01T10:00', NOW, '--since').getTime()).toBe(
      new Date(2026, 4, 1, 10, 0, 0, 0).getTime(),
    );
  });

  it('refuses a duration reaching further back than a date can', () => {
    // Act and assess
    expect(() => parseWhen(`${'9'.repeat(20)}d`, NOW, '--since')).toThrow(/^--since: /);
  });

  it('counts a bare --to date to the end of its day', () => {
    // Act and assess
    expect(periodBound('2026-05-31', '--to', NOW, true).toISOString()).toBe('2026-05-31T23:59:59.999Z');
    expect(periodBound('2026-05-01', '--from', NOW, false).toISOString()).toBe('2026-05-01T00:00:00.000Z');
  });

  it('formats ages in the largest whole unit', () => {
    // Act and assess
    expect([formatAge(59_000), formatAge(61_000), formatAge(7_200_000), formatAge(3 * 86_400_000)]).toEqual([
      '59s',
      '1m',
      '2h',
      '3d',
    ]);
  });
});

describe('statusText of an order whose add got no clear answer', () => {
  it('says the worker is verifying with the platform, not that an add is in flight', () => {
    const text = statusText({
      program: 'p',
      externalId: '1001',
      record: record({ state: 'adding', unclearAddAt: Date.parse('2026-05-01T10:00:00Z') }),
      conversion: undefined,
      differences: [],
    });
    expect(text).toContain(
      '… the Conversion Add of 2026-05-01T10:00:00.000Z got no clear answer: no new add is sent for the order',
    );
    expect(text).toContain('the worker first asks the platform (Conversion info)');
    expect(text).not.toContain('in flight');
  });
});

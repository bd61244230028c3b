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
      '… the Conversion Add of 2026-05-01T10:00:00.000Z got no clear answer: the worker asks the platform again',
    );
    expect(text).not.toContain('in flight');
  });
});

import { describe, expect, it } from 'vitest';
import type { RefundBasis } from '../../shared/domain/events.ts';
import {
  MAX_RECORD_BYTES,
  type OrderRecord,
  type RefundRecord,
  storableRecord,
} from '../../shared/ledger.ts';
import { CURRENT_RULES, HELD_RULES, netHeldRefunds, netRefund } from '../../shared/worker/refund-net.ts';

/**
 * Issue 19: how the worker turns a refund net against the order's recorded lines, case by case
 * (the end-to-end runs and the per-platform property are in test/integration/refund-*.test.ts).
 */

/** A tax-inclusive order: line A 3 × 10.00 net (tax 1.90 each), line B 1 × 50.00 net (tax 9.50). */
const BASIS: RefundBasis = {
  taxesIncluded: true,
  net: 8_000,
  tax: 1_520,
  shipping: 500,
  lines: [
    { id: 'A', net: 3_000, tax: 570, quantity: 3 },
    { id: 'B', net: 5_000, tax: 950, quantity: 1 },
  ],
  truncated: false,
};

let n = 0;
function refund(fields: Partial<RefundRecord>): RefundRecord {
  n += 1;
  return {
    refundId: `r${n}`,
    amount: 0,
    full: false,
    origin: 'shop',
    receivedAt: `2026-03-02T10:00:0${n % 10}.000Z`,
    status: 'pending',
    ...fields,
  };
}

describe('a refund turned net from its lines', () => {
  it('gives each unit its cumulative share, so the refunds of a whole line add up to its net', () => {
    // Prepare: a line of 3 units worth 10.01 net, refunded one unit at a time.
    const basis = { ...BASIS, net: 3_003, lines: [{ id: 'A', net: 3_003, tax: 0, quantity: 3 }] };
    const done: RefundRecord[] = [];
    // Act
    for (let i = 0; i < 3; i++) {
      const next = refund({ amount: 999_999, lines: [{ id: 'A', quantity: 1 }] });
      netRefund(basis, next, done);
      done.push(next);
    }
    // Assess: 1001 each here, and Σ is the line's net whatever the rounding of each share.
    expect(done.map((r) => r.amount)).toEqual([1_001, 1_001, 1_001]);
    const odd = { ...basis, lines: [{ id: 'A', net: 1_000, tax: 0, quantity: 3 }] };
    const shares: RefundRecord[] = [];
    for (let i = 0; i < 3; i++) {
      const next = refund({ lines: [{ id: 'A', quantity: 1 }] });
      netRefund(odd, next, shares);
      shares.push(next);
    }
    expect(shares.map((r) => r.amount)).toEqual([333, 334, 333]);
  });

  it('counts a line paid back for less than its share as what it paid back (Shopify docs: subtotal 0.00)', () => {
    const next = refund({ lines: [{ id: 'B', quantity: 1, amount: 0, tax: 0 }] });
    netRefund(BASIS, next, []);
    expect(next.amount).toBe(0);
  });

  it('takes a line the ledger did not keep (past the cap) from its own money less its tax, in a tax-inclusive order', () => {
    const next = refund({ lines: [{ id: 'Z', quantity: 2, amount: 2_380, tax: 380 }] });
    netRefund({ ...BASIS, truncated: true }, next, []);
    expect(next.amount).toBe(2_000);
    expect(next.amountFrom).toMatch(/refund's own lines/);
  });

  it('keeps the adapter’s amount, and says so, when a line names no recorded line and states no money', () => {
    const next = refund({ amount: 1_234, lines: [{ id: 'Z', quantity: 1 }] });
    netRefund(BASIS, next, []);
    expect(next.amount).toBe(1_234);
    expect(next.amountFrom).toMatch(/^current rules/);
  });

  it('keeps the adapter’s amount for an order the ledger holds no lines of, and says so', () => {
    const next = refund({ amount: 1_234, lines: [{ id: 'A', quantity: 1 }] });
    netRefund(undefined, next, []);
    expect(next.amount).toBe(1_234);
    expect(next.amountFrom).toBe(CURRENT_RULES);
  });

  it('leaves a refund stating only an amount (finance, generic) as given', () => {
    const next = refund({ amount: 1_234 });
    netRefund(BASIS, next, []);
    expect(next).not.toHaveProperty('amountFrom');
    expect(next.amount).toBe(1_234);
  });
});

describe('a refund turned net from its gross alone', () => {
  it('matches the gross of a few units of one line and takes that line’s rate', () => {
    const next = refund({ gross: 2_380 });
    netRefund(BASIS, next, []);
    expect(next.amount).toBe(2_000);
    expect(next.lines).toEqual([{ id: 'A', quantity: 2 }]);
  });

  it('matches all that is left', () => {
    const first = refund({ gross: 1_190 });
    netRefund(BASIS, first, []);
    const rest = refund({ gross: 2_380 + 5_950 });
    netRefund(BASIS, rest, [first]);
    expect(first.amount + rest.amount).toBe(BASIS.net);
  });

  it('falls back to the order’s net/gross ratio over its lines when it matches nothing, and says it is approximate', () => {
    const next = refund({ gross: 1_000 });
    netRefund(BASIS, next, []);
    // 10.00 × 80.00 / 95.20 = 8.403… → 8.40
    expect(next.amount).toBe(840);
    expect(next.amountFrom).toMatch(/^approximate/);
  });
});

describe('refunds held before their order', () => {
  it('are turned net when the order brings its lines, in the order they came', () => {
    const record = {
      refundBasis: BASIS,
      refunds: {
        r1: refund({
          refundId: 'r1',
          gross: 1_190,
          amount: 1_190,
          amountFrom: HELD_RULES,
          receivedAt: '2026-03-02T10:00:01.000Z',
        }),
        r2: refund({
          refundId: 'r2',
          lines: [{ id: 'A', quantity: 2 }],
          amountFrom: HELD_RULES,
          receivedAt: '2026-03-02T10:00:02.000Z',
        }),
      },
    } as unknown as OrderRecord;
    netHeldRefunds(record);
    expect([record.refunds['r1']?.amount, record.refunds['r2']?.amount]).toEqual([1_000, 2_000]);
  });
});

describe('the record as stored', () => {
  it('drops the kept lines, not the totals or the tax mode, past the size DynamoDB allows', () => {
    const id = (i: number) => `${i}`.padStart(256, '0');
    const lines = Array.from({ length: 200 }, (_, i) => ({ id: id(i), net: 100, tax: 19, quantity: 1 }));
    const refunds: Record<string, RefundRecord> = {};
    for (let r = 0; r < 8; r++) {
      refunds[`r${r}`] = refund({ refundId: `r${r}`, lines: lines.map((l) => ({ id: l.id, quantity: 1 })) });
    }
    const record = {
      key: 'p#1',
      refundBasis: { ...BASIS, net: 20_000, tax: 3_800, lines },
      refunds,
    } as unknown as OrderRecord;
    expect(Buffer.byteLength(JSON.stringify(record))).toBeGreaterThan(MAX_RECORD_BYTES);

    const stored = storableRecord(record);

    expect(Buffer.byteLength(JSON.stringify(stored))).toBeLessThan(MAX_RECORD_BYTES);
    expect(stored.refundBasis).toMatchObject({
      taxesIncluded: true,
      net: 20_000,
      tax: 3_800,
      lines: [],
      truncated: true,
    });
    expect(Object.keys(stored.refunds)).toHaveLength(8);
    expect(stored.refunds['r0']).not.toHaveProperty('lines');
    // A record of ordinary size is stored as it is.
    expect(storableRecord({ ...record, refunds: {}, refundBasis: BASIS })).toMatchObject({
      refundBasis: BASIS,
    });
  });
});

import { describe, expect, it } from 'vitest';
import { commissionShare, lateRefunds } from '../../cli/late-refunds.ts';
import type { OrderRecord } from '../../shared/ledger.ts';

/** Issue 17, part 3: what finance reads of a refund the platform could no longer apply. */

const record = (refunds: OrderRecord['refunds']): OrderRecord => ({
  key: 'p#1001',
  program: 'p',
  externalId: '1001',
  source: 'shop',
  state: 'added',
  version: 3,
  conversionId: 'c'.repeat(24),
  originalAmount: 20_000,
  currentAmount: 20_000,
  currency: 'EUR',
  refunds,
  createdAt: '2026-05-01T10:00:00.000Z',
  updatedAt: '2026-05-01T10:00:00.000Z',
});
const late = { because: 'locked' as const, conversionId: 'c'.repeat(24), conversionAmount: 20_000 };

describe('commissionShare', () => {
  it('is commission × refund / amount in minor units, rounded half away from zero', () => {
    // Assess: 2 000 × 5 000 / 20 000 exactly; 333 × 1 000 / 3 333 = 99.9…; 1 × 1 / 2 = 0.5.
    expect(commissionShare(2_000, 5_000, 20_000)).toBe(500);
    expect(commissionShare(333, 1_000, 3_333)).toBe(100);
    expect(commissionShare(1, 1, 2)).toBe(1);
    expect(commissionShare(1, 1, 3)).toBe(0);
  });

  it('is the whole commission for a refund of the whole amount or more, and 0 for a conversion of 0', () => {
    expect(commissionShare(2_000, 20_000, 20_000)).toBe(2_000);
    expect(commissionShare(2_000, 25_000, 20_000)).toBe(2_000);
    expect(commissionShare(2_000, 5_000, 0)).toBe(0);
  });

  it('stays exact where floating point would round the wrong way', () => {
    // 755 040 354 696 × 105 413 139 / 387 806 898 = 205 234 033 408.4…; in doubles it comes out …409.
    expect(commissionShare(755_040_354_696, 105_413_139, 387_806_898)).toBe(205_234_033_408);
  });
});

describe('lateRefunds', () => {
  it('lists only late refunds, a full one at what the earlier late ones left of the conversion’s amount, without a share when the commission is unknown', () => {
    // Prepare
    const records = [
      record({
        a: {
          refundId: 'a',
          amount: 5_000,
          full: false,
          origin: 'shop',
          receivedAt: '2026-06-01T00:00:00.000Z',
          status: 'late',
          appliedAt: '2026-06-01T00:00:01.000Z',
          late: { ...late, commission: 2_000 },
        },
        b: {
          refundId: 'b',
          amount: 0,
          full: true,
          origin: 'finance',
          receivedAt: '2026-06-02T00:00:00.000Z',
          status: 'late',
          appliedAt: '2026-06-02T00:00:01.000Z',
          late,
        },
        c: {
          refundId: 'c',
          amount: 1_000,
          full: false,
          origin: 'shop',
          receivedAt: '2026-05-02T00:00:00.000Z',
          status: 'applied',
        },
      }),
    ];
    // Act
    const rows = lateRefunds(records);
    // Assess
    expect(rows.map((r) => [r.refundId, r.refundAmount, r.commission, r.commissionShare])).toEqual([
      ['a', 5_000, 2_000, 500],
      ['b', 15_000, undefined, undefined],
    ]);
    expect(rows[0]).toMatchObject({ externalId: '1001', currency: 'EUR', because: 'locked', source: 'shop' });
  });
});

import { describe, expect, it } from 'vitest';
import { lateRefunds } from '../../cli/late-refunds.ts';
import type { OrderRecord, RefundRecord } from '../../shared/ledger.ts';

/** The commission shares finance claws back for one conversion never add up past its commission. */

const CONVERSION = 'c'.repeat(24);
const lateRefund = (refundId: string, amount: number, day: number, full = false): RefundRecord => ({
  refundId,
  amount,
  full,
  origin: 'shop',
  receivedAt: `2026-06-0${day}T00:00:00.000Z`,
  status: 'late',
  appliedAt: `2026-06-0${day}T00:00:01.000Z`,
  late: { because: 'locked', conversionId: CONVERSION, conversionAmount: 20_000, commission: 1_001 },
});
const order = (...refunds: RefundRecord[]): OrderRecord => ({
  key: 'p#1001',
  program: 'p',
  externalId: '1001',
  source: 'shop',
  state: 'added',
  version: 3,
  conversionId: CONVERSION,
  originalAmount: 20_000,
  currentAmount: 20_000,
  currency: 'EUR',
  refunds: Object.fromEntries(refunds.map((r) => [r.refundId, r])),
  createdAt: '2026-05-01T10:00:00.000Z',
  updatedAt: '2026-05-01T10:00:00.000Z',
});

describe('lateRefunds, the shares of one conversion', () => {
  it('caps the later share at what is left when two halves each round half a cent up', () => {
    // Prepare: 1 001 × 10 000 / 20 000 = 500.5 → 501 each, 1 002 in all, past the commission.
    const records = [order(lateRefund('b', 10_000, 2), lateRefund('a', 10_000, 1))];
    // Act
    const rows = lateRefunds(records);
    // Assess
    expect(rows.map((r) => [r.refundId, r.commissionShare])).toEqual([
      ['a', 501],
      ['b', 500],
    ]);
  });

  it('gives a full refund after a partial one only the commission left', () => {
    // Prepare
    const records = [order(lateRefund('part', 5_000, 1), lateRefund('full', 0, 2, true))];
    // Act
    const rows = lateRefunds(records);
    // Assess: 1 001 × 5 000 / 20 000 = 250.25 → 250; the whole commission less that is 751.
    expect(rows.map((r) => [r.refundId, r.commissionShare])).toEqual([
      ['part', 250],
      ['full', 751],
    ]);
    expect(rows.reduce((n, r) => n + (r.commissionShare ?? 0), 0)).toBe(1_001);
  });
});

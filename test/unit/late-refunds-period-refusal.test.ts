import { describe, expect, it } from 'vitest';
import { inPeriod, lateRefunds, lateRefundsCsv } from '../../cli/late-refunds.ts';
import type { OrderRecord } from '../../shared/ledger.ts';

/**
 * `connector late-refunds --from/--to`, settled a month at a time (docs/cli.md, "Late refunds"): a
 * late partial refund of an accepted conversion is settled in its month at its commission share; a
 * full refund the next month refuses the conversion, and the platform takes the whole commission
 * back itself. The month of the refusal must tell finance to reverse the adjustment made for the
 * late refund, or the affiliate pays that share twice.
 */

const CONVERSION = 'c'.repeat(24);

/** Order 8301, EUR 50.00, commission 5.00: 20.00 refunded late in May, refunded in full in June. */
const refusedInJune = (): OrderRecord => ({
  key: 'p#8301',
  program: 'p',
  externalId: '8301',
  source: 'shop',
  state: 'refused',
  version: 4,
  conversionId: CONVERSION,
  originalAmount: 5_000,
  currentAmount: 0,
  currency: 'EUR',
  refunds: {
    'r-may': {
      refundId: 'r-may',
      amount: 2_000,
      full: false,
      origin: 'shop',
      receivedAt: '2026-05-20T09:00:00.000Z',
      status: 'late',
      appliedAt: '2026-05-20T09:00:01.000Z',
      late: { because: 'accepted', conversionId: CONVERSION, conversionAmount: 5_000, commission: 500 },
    },
    'r-june': {
      refundId: 'r-june',
      amount: 0,
      full: true,
      origin: 'shop',
      receivedAt: '2026-06-03T09:00:00.000Z',
      status: 'applied',
      appliedAt: '2026-06-03T09:00:01.000Z',
      resultingAmount: 0,
    },
  },
  createdAt: '2026-05-10T09:00:00.000Z',
  updatedAt: '2026-06-03T09:00:01.000Z',
});

const MAY = [new Date('2026-05-01T00:00:00.000Z'), new Date('2026-05-31T23:59:59.999Z')] as const;
const JUNE = [new Date('2026-06-01T00:00:00.000Z'), new Date('2026-06-30T23:59:59.999Z')] as const;

describe('late refunds of a period, a conversion refused in a later one', () => {
  it('lists the late refund again in the period of the refusal, with a share of 0 and the refusal named', () => {
    // Prepare
    const rows = lateRefunds([refusedInJune()]);
    // Act
    const june = inPeriod(rows, ...JUNE);
    // Assess: nothing more to take back, and the row that says to reverse May's adjustment.
    expect(june).toHaveLength(1);
    expect(june[0]).toMatchObject({
      refundId: 'r-may',
      commissionShare: 0,
      refusedBy: 'r-june',
      refusedAt: '2026-06-03T09:00:01.000Z',
    });
    expect(lateRefundsCsv(june)).toContain('r-june');
  });

  it('lists it in its own period too, and in no period that holds neither', () => {
    // Prepare
    const rows = lateRefunds([refusedInJune()]);
    // Act
    const may = inPeriod(rows, ...MAY);
    const july = inPeriod(rows, new Date('2026-07-01T00:00:00.000Z'), new Date('2026-07-31T23:59:59.999Z'));
    // Assess
    expect(may.map((r) => r.refundId)).toEqual(['r-may']);
    expect(july).toEqual([]);
  });

  it('lists a late refund refused in its own period once', () => {
    // Prepare: the same, refused in May
    const record = refusedInJune();
    const full = record.refunds['r-june'];
    if (!full) throw new Error('built above');
    record.refunds['r-june'] = {
      ...full,
      receivedAt: '2026-05-25T09:00:00.000Z',
      appliedAt: '2026-05-25T09:00:01.000Z',
    };
    // Act
    const may = inPeriod(lateRefunds([record]), ...MAY);
    // Assess
    expect(may.map((r) => r.refundId)).toEqual(['r-may']);
  });
});

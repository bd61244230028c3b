import { describe, expect, it } from 'vitest';
import type { RefundRecord } from '../../shared/ledger.ts';
import { answerAndQueued, ledgerWithOrder, recordedRefund, submitRefund } from '../support/finance-door.ts';

/**
 * A late refund (status `late`) is one the platform could no longer apply (its conversion locked, or
 * accepted for a partial refund), though the buyer got the money back all the same. What is left of
 * the order for `POST /refunds` is what the buyer has not been paid back: a late refund takes from
 * it like an applied one, or finance can refund more than the order's amount through the door (the
 * worker records the excess late too, and `late-refunds` lists it for a commission share).
 */

const LATE = {
  because: 'locked',
  conversionId: 'c'.repeat(24),
  conversionAmount: 10_000,
  commission: 1_000,
} as const;

/** A refund of order 1001 the platform could not apply: its conversion was locked. */
function lateRefund(refundId: string, overrides: Partial<RefundRecord> = {}): RefundRecord {
  return recordedRefund(refundId, { status: 'late', late: LATE, ...overrides });
}

describe('POST /refunds of an order with a late partial refund', () => {
  it('answers 400 naming amount to a partial refund past what the late refund left, and queues nothing', async () => {
    // Prepare: USD 100.00, USD 60.00 refunded late (the platform's amount stays 100.00)
    const ledger = await ledgerWithOrder([lateRefund('RF-LATE', { amount: 6_000 })], {
      currentAmount: 10_000,
    });

    // Act
    const over = await submitRefund({ ledger, reservations: ledger }, { refundId: 'RF-2', amount: '50.00' });

    // Assess
    expect(answerAndQueued(over)).toMatchObject({ status: 400, body: { field: 'amount' }, queued: 0 });
    expect(over.answer.body['message']).toBe(
      'USD 50.00 is more than is left of order 1001: USD 40.00 remains, with late refund RF-LATE (USD 60.00) ' +
        'counted: the buyer got it back, though the platform could not apply it. A partial refund past it would ' +
        "pay the buyer back more than the order's amount; to refund the whole order, send a full refund " +
        '(full: true, or --full) instead',
    );
  });

  it('queues a partial refund of what the late refund left, the applied refunds counted too', async () => {
    // Prepare: USD 100.00 − 10.00 applied − 60.00 late = 30.00 left
    const ledger = await ledgerWithOrder(
      [recordedRefund('RF-APPLIED'), lateRefund('RF-LATE', { amount: 6_000 })],
      { currentAmount: 9_000 },
    );

    // Act
    const over = await submitRefund({ ledger, reservations: ledger }, { refundId: 'RF-2', amount: '30.01' });
    const fits = await submitRefund({ ledger, reservations: ledger }, { refundId: 'RF-3', amount: '30.00' });

    // Assess
    expect(answerAndQueued(over)).toMatchObject({ status: 400, queued: 0 });
    expect(over.answer.body['message']).toContain('USD 30.00 remains');
    expect(answerAndQueued(fits)).toMatchObject({ status: 202, queued: 1 });
  });

  it('counts the late refund before the partial refunds reserved and not yet recorded', async () => {
    // Prepare: USD 60.00 late, then USD 30.00 requested and queued
    const ledger = await ledgerWithOrder([lateRefund('RF-LATE', { amount: 6_000 })], {
      currentAmount: 10_000,
    });
    const first = await submitRefund({ ledger, reservations: ledger }, { refundId: 'RF-2', amount: '30.00' });

    // Act
    const second = await submitRefund(
      { ledger, reservations: ledger },
      { refundId: 'RF-3', amount: '20.00' },
    );

    // Assess
    expect(answerAndQueued(first)).toMatchObject({ status: 202, queued: 1 });
    expect(answerAndQueued(second)).toMatchObject({ status: 400, body: { field: 'amount' }, queued: 0 });
    expect(second.answer.body['message']).toContain(
      'USD 10.00 remains after refund RF-2, requested and not yet applied (USD 30.00)',
    );
  });

  it('queues a resend of the late refund itself: a refund id counts once', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([lateRefund('RF-LATE', { amount: 6_000 })], {
      currentAmount: 10_000,
    });

    // Act
    const resent = await submitRefund(
      { ledger, reservations: ledger },
      { refundId: 'RF-LATE', amount: '60.00' },
    );

    // Assess
    expect(answerAndQueued(resent)).toMatchObject({ status: 202 });
  });
});

describe('POST /refunds of an order refunded in full, late', () => {
  it('answers 400 naming amount to any partial refund, naming the late full refund, and still takes a full one', async () => {
    // Prepare: the whole order refunded after its conversion locked
    const ledger = await ledgerWithOrder([lateRefund('RF-ALL', { amount: 0, full: true })], {
      currentAmount: 10_000,
    });

    // Act
    const partial = await submitRefund(
      { ledger, reservations: ledger },
      { refundId: 'RF-2', amount: '1.00' },
    );
    const full = await submitRefund({ ledger, reservations: ledger }, { refundId: 'RF-3', full: true });

    // Assess
    expect(answerAndQueued(partial)).toMatchObject({ status: 400, body: { field: 'amount' }, queued: 0 });
    expect(partial.answer.body['message']).toBe(
      'order 1001 is refunded in full (refund RF-ALL, late): a partial refund of it would never be applied; ' +
        'the full refund gives back all of it',
    );
    expect(answerAndQueued(full)).toMatchObject({ status: 202, queued: 1 });
  });
});

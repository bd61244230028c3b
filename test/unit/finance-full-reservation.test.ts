import { describe, expect, it } from 'vitest';
import { ledgerKey, type RefundRecord } from '../../shared/ledger.ts';
import {
  answerAndQueued,
  FINANCE_PROGRAM,
  ledgerWithOrder,
  recordedRefund,
  submitRefund,
} from '../support/finance-door.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * `POST /refunds` reserves a full refund as it reserves a partial one (`full: true`, amount 0), so
 * that the same refund id as a partial refund is a 409, and a further partial refund of an order
 * being refunded in full a 400 naming `amount`: the worker would never apply it. Reservation items
 * written before full refunds were reserved (no `full`) still read as partial refunds.
 */

const KEY = ledgerKey(FINANCE_PROGRAM, '1001');
const RESERVED_AT = '2026-06-01T11:00:00.000Z';

/** Refund RF-1 of order 1001 recorded in full (`overrides` replaces any field). */
const recordedInFull = (overrides: Partial<RefundRecord> = {}) =>
  recordedRefund('RF-1', { amount: 0, full: true, ...overrides });

/** Finance's refund `body` of order 1001 on `ledger`'s records and reservations. */
const submit = async (ledger: MemoryLedger, body: Record<string, unknown>) =>
  answerAndQueued(await submitRefund({ ledger, reservations: ledger }, body));

const IN_FULL = 'a partial refund of it would never be applied; the full refund gives back all of it';

describe('POST /refunds: a full refund is reserved', () => {
  it('writes it with full and amount 0, once: the same full refund again is a 202 that writes nothing', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([]);
    // Act
    const first = await submit(ledger, { refundId: 'RF-1', full: true });
    const again = await submit(ledger, { refundId: 'RF-1', full: true });
    // Assess
    expect([first.status, again.status]).toEqual([202, 202]);
    expect(await ledger.reservationsOf(KEY)).toEqual({
      key: KEY,
      version: 1,
      refunds: [{ refundId: 'RF-1', amount: 0, full: true, reservedAt: '2026-06-01T12:00:00.000Z' }],
    });
  });

  it('takes a full refund under another refund id too: the order is refunded in full either way', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([]);
    await submit(ledger, { refundId: 'RF-1', full: true });
    // Act
    const other = await submit(ledger, { refundId: 'RF-2', full: true });
    // Assess
    expect(other).toMatchObject({ status: 202, queued: 1 });
  });

  it('refuses a new partial refund (400 naming amount), yet takes again a partial one reserved before it', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([]);
    expect((await submit(ledger, { refundId: 'RF-0', amount: '5.00' })).status).toBe(202);
    expect((await submit(ledger, { refundId: 'RF-1', full: true })).status).toBe(202);
    // Act
    const partial = await submit(ledger, { refundId: 'RF-2', amount: '1.00' });
    const retried = await submit(ledger, { refundId: 'RF-0', amount: '5.00' });
    // Assess
    expect(partial).toEqual({
      status: 400,
      body: {
        error: 'bad_request',
        field: 'amount',
        message: `order 1001 is being refunded in full (refund RF-1, requested and not yet applied): ${IN_FULL}`,
      },
      queued: 0,
    });
    expect(retried).toMatchObject({ status: 202, queued: 1 });
  });

  it('refuses it for an order the ledger does not know yet', async () => {
    // Prepare
    const ledger = new MemoryLedger();
    await submit(ledger, { refundId: 'RF-1', full: true, currency: 'USD' });
    // Act
    const partial = await submit(ledger, { refundId: 'RF-2', amountCents: 100 });
    // Assess
    expect(partial).toMatchObject({ status: 400, body: { field: 'amount' }, queued: 0 });
  });
});

describe('POST /refunds: a partial refund of an order whose record holds a full refund', () => {
  it.each([
    [
      'pending (held for an order not yet arrived)',
      'pending',
      { state: 'awaiting' },
      'is being refunded in full (refund RF-1, pending)',
    ],
    ['applied', 'applied', { state: 'refused' }, 'is refunded in full (refund RF-1, applied)'],
    ['settled by hand', 'manual', {}, 'is refunded in full (refund RF-1, manual)'],
    // The platform could no longer apply it (locked); the buyer got all of it back all the same.
    ['late', 'late', {}, 'is refunded in full (refund RF-1, late)'],
  ] as const)('answers 400 naming amount when it is %s', async (_, status, overrides, what) => {
    // Prepare
    const ledger = await ledgerWithOrder([recordedInFull({ status })], overrides);
    // Act
    const partial = await submit(ledger, { refundId: 'RF-2', amount: '1.00' });
    // Assess
    expect(partial).toMatchObject({ status: 400, body: { field: 'amount' }, queued: 0 });
    expect(partial.body['message']).toBe(`order 1001 ${what}: ${IN_FULL}`);
  });

  it('leaves it to the worker when the full refund paid nothing back (rejected: another currency)', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([recordedInFull({ status: 'rejected' })]);
    // Act
    const partial = await submit(ledger, { refundId: 'RF-2', amount: '1.00' });
    // Assess
    expect(partial).toMatchObject({ status: 202, queued: 1 });
  });
});

describe('POST /refunds: a reservation item written before full refunds were reserved', () => {
  it('reads its refunds as partial ones: the same refund id in full is a 409, another partial refund fits', async () => {
    // Prepare: as stored then, with no full flag
    const ledger = await ledgerWithOrder([]);
    await ledger.saveReservations({
      key: KEY,
      version: 0,
      refunds: [{ refundId: 'RF-1', amount: 1_000, reservedAt: RESERVED_AT }],
    });
    // Act
    const full = await submit(ledger, { refundId: 'RF-1', full: true });
    const same = await submit(ledger, { refundId: 'RF-1', amount: '10.00' });
    const other = await submit(ledger, { refundId: 'RF-2', amount: '90.00' });
    const over = await submit(ledger, { refundId: 'RF-3', amount: '0.01' });
    // Assess
    expect(full).toMatchObject({ status: 409, body: { field: 'refundId' } });
    expect(full.body['message']).toContain('is reserved at USD 10.00 (requested, not yet applied)');
    expect([same.status, other.status, over.status]).toEqual([202, 202, 400]);
  });
});

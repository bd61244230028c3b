import { describe, expect, it } from 'vitest';
import { ledgerKey, recordRefund } from '../../shared/ledger.ts';
import type { Ledger } from '../../shared/ports.ts';
import { answerAndQueued, FINANCE_PROGRAM, ledgerWithOrder, submitRefund } from '../support/finance-door.ts';
import type { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * `POST /refunds` judges a partial refund against the order's record and the reservations the record
 * does not hold yet. Another request drops from the reservations item those the record holds; a
 * request that read the record before the worker recorded such a refund, and the reservations after
 * that drop, would count that refund nowhere, and two refunds that together take more than the order
 * would both be queued (the worker then refuses the whole conversion).
 */

const KEY = ledgerKey(FINANCE_PROGRAM, '1001');

/** Finance's refund `body` of order 1001, the record read from `ledger`, reserved in `store`. */
const submit = async (ledger: Pick<Ledger, 'get'>, store: MemoryLedger, body: Record<string, unknown>) =>
  answerAndQueued(await submitRefund({ ledger, reservations: store }, body));

/** The worker recording a finance refund applied, as `applyRefunds` leaves it. */
async function workerApplies(ledger: MemoryLedger, refundId: string, amount: number): Promise<void> {
  const record = await ledger.get(KEY);
  if (!record) throw new Error('no record');
  recordRefund(record, {
    refundId,
    amount,
    full: false,
    origin: 'finance',
    receivedAt: '2026-06-01T11:00:00.000Z',
    status: 'applied',
    resultingAmount: record.originalAmount - amount,
  });
  record.currentAmount = record.originalAmount - amount;
  expect(await ledger.update(record)).toBe(true);
}

describe('POST /refunds judged while the worker records a reserved refund and another request reserves', () => {
  it('still counts the recorded refund: 50.00 of an order with 60.00 refunded and 1.00 reserved is a 400', async () => {
    // Prepare: RF-1 (60.00) reserved and queued.
    const ledger = await ledgerWithOrder();
    expect((await submit(ledger, ledger, { refundId: 'RF-1', amount: '60.00' })).status).toBe(202);
    // Request A reads the order's record; before it reads the reservations, the worker records
    // RF-1 applied and request B reserves RF-3, dropping RF-1's reservation (the record holds it).
    let interleaved = false;
    const slowRead: Pick<Ledger, 'get'> = {
      async get(key) {
        const read = await ledger.get(key);
        if (!interleaved) {
          interleaved = true;
          await workerApplies(ledger, 'RF-1', 6_000);
          expect((await submit(ledger, ledger, { refundId: 'RF-3', amount: '1.00' })).status).toBe(202);
        }
        return read;
      },
    };

    // Act
    const late = await submit(slowRead, ledger, { refundId: 'RF-2', amount: '50.00' });

    // Assess: 100.00 − 60.00 applied − 1.00 reserved leaves 39.00; 50.00 would refuse the conversion.
    expect(interleaved).toBe(true);
    expect(late).toMatchObject({ status: 400, body: { field: 'amount' }, queued: 0 });
    expect(late.body['message']).toContain('USD 39.00 remains after refund RF-3');
    expect((await ledger.reservationsOf(KEY))?.refunds.map((r) => r.refundId)).toEqual(['RF-3']);
  });
});

import { describe, expect, it } from 'vitest';
import { answerFor } from '../../shared/http/answers.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { FINANCE_PROGRAM, ledgerWithOrder, recordedRefund, submitRefund } from '../support/finance-door.ts';
import type { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * `POST /refunds` and a refund id the ledger already holds at another amount (or `full` flag). A
 * refund id counts once: the worker treats the second message as a duplicate of what it recorded
 * (and SQS drops it within 5 minutes, its deduplication id being the refund id's), so a 202 would
 * tell finance of a refund that never happens. The door answers 409 naming `refundId` and saying
 * what is recorded, or reserved, and queues nothing; the same refund again stays a harmless repeat.
 */

const PROGRAM = FINANCE_PROGRAM;

/** Refund RF-1 of order 1001 (`body` overrides), on `ledger`'s records and reservations. */
const submit = (ledger: MemoryLedger, body: Record<string, unknown>) =>
  submitRefund({ ledger, reservations: ledger }, { refundId: 'RF-1', ...body });

const COUNTS_ONCE = 'a refund id counts once; send another refund id for another refund';

describe('POST /refunds: a refund id the worker recorded', () => {
  it('answers 202 to the same refund again, which counts once', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([recordedRefund('RF-1')]);
    // Act
    const byDecimal = await submit(ledger, { amount: '10.00' });
    const byCents = await submit(ledger, { amountCents: 1_000 });
    // Assess
    expect(byDecimal.answer.status).toBe(202);
    expect(byCents.answer.status).toBe(202);
  });

  it('answers 409 naming refundId and what is recorded to another amount, and queues nothing', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([recordedRefund('RF-1')]);
    // Act
    const { answer, queue, outcomes } = await submit(ledger, { amount: '20.00' });
    // Assess
    expect(answer).toEqual({
      status: 409,
      body: {
        error: 'conflict',
        field: 'refundId',
        message: `refund RF-1 of order 1001 is recorded at USD 10.00 (applied): ${COUNTS_ONCE}`,
      },
    });
    expect(queue.events).toHaveLength(0);
    expect(outcomes).toMatchObject([{ status: 409, result: 'rejected', field: 'refundId' }]);
  });

  it('answers 409 to a smaller amount, amountCents and a full refund alike', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([recordedRefund('RF-1')]);
    // Act
    const answers = await Promise.all([
      submit(ledger, { amount: '5.00' }),
      submit(ledger, { amountCents: 1_001 }),
      submit(ledger, { full: true }),
    ]);
    // Assess
    expect(answers.map((a) => a.answer.status)).toEqual([409, 409, 409]);
    expect(answers.flatMap((a) => a.queue.events)).toHaveLength(0);
  });

  it('says a full refund is recorded as one, and takes the same full refund again', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([recordedRefund('RF-1', { amount: 0, full: true })], {
      state: 'refused',
    });
    // Act
    const again = await submit(ledger, { full: true });
    const partial = await submit(ledger, { amount: '10.00' });
    // Assess
    expect(again.answer.status).toBe(202);
    expect(partial.answer).toMatchObject({ status: 409, body: { field: 'refundId' } });
    expect(partial.answer.body['message']).toBe(
      `refund RF-1 of order 1001 is recorded as a full refund (applied): ${COUNTS_ONCE}`,
    );
  });

  it('names a refund id the shop reported, with the net amount the worker recorded', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([
      recordedRefund('5001', { origin: 'shop', amount: 872, status: 'pending' }),
    ]);
    // Act
    const { answer } = await submit(ledger, { refundId: '5001', amount: '10.00' });
    // Assess
    expect(answer.status).toBe(409);
    expect(answer.body['message']).toBe(
      `refund 5001 of order 1001 is recorded at USD 8.72 (pending, reported by the shop): ${COUNTS_ONCE}`,
    );
  });
});

describe('POST /refunds: a refund id reserved and not yet recorded', () => {
  it('answers 409 naming the reserved amount to another amount or a full refund, and 202 to the same again', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([]);
    const first = await submit(ledger, { amount: '10.00' });
    // Act
    const larger = await submit(ledger, { amount: '20.00' });
    const smaller = await submit(ledger, { amount: '5.00' });
    const full = await submit(ledger, { full: true });
    const same = await submit(ledger, { amount: '10.00' });
    // Assess
    expect(first.answer.status).toBe(202);
    expect(larger.answer).toEqual({
      status: 409,
      body: {
        error: 'conflict',
        field: 'refundId',
        message: `refund RF-1 of order 1001 is reserved at USD 10.00 (requested, not yet applied): ${COUNTS_ONCE}`,
      },
    });
    expect([smaller.answer.status, full.answer.status]).toEqual([409, 409]);
    expect([larger, smaller, full].flatMap((a) => a.queue.events)).toHaveLength(0);
    expect(same.answer.status).toBe(202);
    expect((await ledger.reservationsOf(ledgerKey(PROGRAM, '1001')))?.refunds).toMatchObject([
      { refundId: 'RF-1', amount: 1_000 },
    ]);
  });

  it('queues one of two requests of one refund id at different amounts sent together, and answers 409 to the other', async () => {
    // Prepare
    const ledger = await ledgerWithOrder([]);
    // Act
    const answers = await Promise.all([
      submit(ledger, { amount: '10.00' }),
      submit(ledger, { amount: '20.00' }),
    ]);
    // Assess
    expect(answers.map((a) => a.answer.status).sort()).toEqual([202, 409]);
    expect(answers.flatMap((a) => a.queue.events)).toHaveLength(1);
  });
});

describe('answerFor: a conflict', () => {
  it('is a 409 naming the field', () => {
    expect(answerFor({ kind: 'conflict', field: 'refundId', message: 'taken' })).toEqual({
      status: 409,
      body: { error: 'conflict', field: 'refundId', message: 'taken' },
    });
  });
});

import { describe, expect, it } from 'vitest';
import { submitFinanceRefund } from '../../shared/finance.ts';
import { ledgerKey, type OrderRecord, type RefundRecord } from '../../shared/ledger.ts';
import type { ReservationLedger } from '../../shared/ports.ts';
import { FINANCE_KEY, FINANCE_PROGRAM, financeDeps } from '../support/finance-door.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { RecordingQueue } from '../support/recording-queue.ts';

/**
 * `POST /refunds` and a partial refund larger than what remains: the worker would refuse the whole
 * conversion, which cannot be undone, so the door answers 400 naming `amount` and what remains.
 */

const PROGRAM = FINANCE_PROGRAM;

function refund(refundId: string, amount: number, status: RefundRecord['status']): RefundRecord {
  return { refundId, amount, full: false, origin: 'shop', receivedAt: '2026-06-01T10:00:00.000Z', status };
}

/** Order 1001: EUR 999.90 added, then EUR 500.00 refunded and EUR 456.00 waiting to be applied. */
async function ledgerWithOrder(overrides: Partial<OrderRecord> = {}): Promise<MemoryLedger> {
  const ledger = new MemoryLedger();
  await ledger.create({
    key: ledgerKey(PROGRAM, '1001'),
    program: PROGRAM,
    externalId: '1001',
    source: 'shopify',
    state: 'added',
    version: 0,
    conversionId: 'c'.repeat(24),
    originalAmount: 99_990,
    currentAmount: 49_990,
    currency: 'EUR',
    refunds: { r1: refund('r1', 50_000, 'applied'), r2: refund('r2', 45_600, 'pending') },
    createdAt: '2026-06-01T09:00:00.000Z',
    updatedAt: '2026-06-01T10:00:00.000Z',
    ...overrides,
  });
  return ledger;
}

async function submit(
  ledger: MemoryLedger,
  body: Record<string, unknown>,
  reservations: ReservationLedger = ledger,
) {
  const queue = new RecordingQueue();
  const answer = await submitFinanceRefund(
    financeDeps({ ledger, reservations, queue }),
    { 'x-api-key': FINANCE_KEY },
    Buffer.from(JSON.stringify({ externalId: '1001', refundId: 'RF-9', ...body })),
  );
  return { answer, queue };
}

describe('POST /refunds: a partial refund larger than what remains', () => {
  it('answers 400 naming amount and saying what remains in decimals, and queues nothing (the typo 1000.00)', async () => {
    // Prepare
    const ledger = await ledgerWithOrder();
    // Act
    const { answer, queue } = await submit(ledger, { amount: '1000.00' });
    // Assess: 999.90 − 500.00 applied − 456.00 pending = 43.90
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ error: 'bad_request', field: 'amount' });
    expect(answer.body['message']).toContain('EUR 43.90 remains');
    expect(answer.body['message']).toContain('EUR 1000.00');
    expect(answer.body['message']).not.toMatch(/4390|100000/);
    expect(queue.events).toHaveLength(0);
  });

  it('checks amountCents the same way', async () => {
    // Prepare
    const ledger = await ledgerWithOrder();
    // Act
    const { answer, queue } = await submit(ledger, { amountCents: 4_391 });
    // Assess
    expect(answer).toMatchObject({ status: 400, body: { field: 'amount' } });
    expect(answer.body['message']).toContain('EUR 43.90 remains');
    expect(queue.events).toHaveLength(0);
  });

  it('queues a refund of exactly what remains, and a full refund', async () => {
    // Prepare
    const ledger = await ledgerWithOrder();
    // Act
    const exact = await submit(ledger, { amount: '43.90' });
    const full = await submit(ledger, { refundId: 'RF-10', full: true });
    // Assess
    expect(exact.answer.status).toBe(202);
    expect(exact.queue.events).toMatchObject([{ amount: 4_390, full: false }]);
    expect(full.answer.status).toBe(202);
    expect(full.queue.events).toMatchObject([{ full: true }]);
  });

  it('queues a resend of a refund id already recorded, which counts once', async () => {
    // Prepare
    const ledger = await ledgerWithOrder();
    // Act: r1 (EUR 500.00) again, more than the EUR 43.90 left, but already counted
    const { answer } = await submit(ledger, { refundId: 'r1', amount: '500.00' });
    // Assess
    expect(answer.status).toBe(202);
  });

  it('leaves alone what the ledger cannot judge: an unknown order, an amount-less import, a refused conversion', async () => {
    // Prepare
    const unknown = new MemoryLedger();
    const amountless = await ledgerWithOrder({ imported: true, amountUnknown: true, originalAmount: 0 });
    const refused = await ledgerWithOrder({ state: 'refused', currentAmount: 0 });
    // Act
    const answers = await Promise.all([
      submit(unknown, { amount: '1000.00', currency: 'EUR' }),
      submit(amountless, { amount: '1000.00' }),
      submit(refused, { amount: '1000.00' }),
    ]);
    // Assess: the worker records these (waits, parks or skips); none can refuse by a typo here
    expect(answers.map((a) => a.answer.status)).toEqual([202, 202, 202]);
  });
});

describe('POST /refunds: partial refunds of one order not yet recorded by the worker', () => {
  it('queues one of two refunds sent together that fit alone but not together, and answers 400 naming amount to the other', async () => {
    // Prepare: EUR 43.90 left
    const ledger = await ledgerWithOrder();
    // Act
    const answers = await Promise.all([
      submit(ledger, { refundId: 'RF-a', amount: '30.00' }),
      submit(ledger, { refundId: 'RF-b', amount: '30.00' }),
    ]);
    // Assess
    expect(answers.map((a) => a.answer.status).sort()).toEqual([202, 400]);
    expect(answers.flatMap((a) => a.queue.events)).toHaveLength(1);
    const refused = answers.find((a) => a.answer.status === 400);
    expect(refused?.answer.body).toMatchObject({ field: 'amount' });
    expect(refused?.answer.body['message']).toMatch(
      /^EUR 30\.00 is more than is left of order 1001: EUR 13\.90 remains after refund RF-[ab], requested and not yet applied \(EUR 30\.00\)\./,
    );
  });

  it('names at most three of the refunds it counted', async () => {
    // Prepare: four refunds of EUR 10.00 queued, EUR 3.90 left
    const ledger = await ledgerWithOrder();
    for (const id of ['RF-a', 'RF-b', 'RF-c', 'RF-d']) {
      expect((await submit(ledger, { refundId: id, amount: '10.00' })).answer.status).toBe(202);
    }
    // Act
    const { answer } = await submit(ledger, { amount: '10.00' });
    // Assess
    expect(answer.status).toBe(400);
    expect(answer.body['message']).toContain(
      'EUR 3.90 remains after refunds RF-a, RF-b, RF-c and 1 more, requested and not yet applied (EUR 40.00)',
    );
  });

  it('counts a refund of an order the ledger did not know yet once the order is there', async () => {
    // Prepare: the refund comes before the order's record (the order still in the queue)
    const ledger = new MemoryLedger();
    const early = await submit(ledger, { refundId: 'RF-early', amount: '30.00', currency: 'EUR' });
    await ledger.create({
      key: ledgerKey(PROGRAM, '1001'),
      program: PROGRAM,
      externalId: '1001',
      source: 'shopify',
      state: 'added',
      version: 0,
      originalAmount: 5_000,
      currentAmount: 5_000,
      currency: 'EUR',
      refunds: {},
      createdAt: '2026-06-01T09:00:00.000Z',
      updatedAt: '2026-06-01T09:00:00.000Z',
    });
    // Act
    const { answer } = await submit(ledger, { amount: '30.00' });
    // Assess
    expect(early.answer.status).toBe(202);
    expect(answer.status).toBe(400);
    expect(answer.body['message']).toContain('EUR 20.00 remains after refund RF-early');
  });

  it('answers 503 with retry-after, and queues nothing, when its reservation keeps losing to other requests', async () => {
    // Prepare: every write of the reservations finds another request's written first
    const ledger = await ledgerWithOrder();
    const busy: ReservationLedger = {
      reservationsOf: (key) => ledger.reservationsOf(key),
      saveReservations: async () => false,
    };
    // Act
    const { answer, queue } = await submit(ledger, { amount: '10.00' }, busy);
    // Assess
    expect(answer.status).toBe(503);
    expect(answer.headers?.['retry-after']).toBe('1');
    expect(queue.events).toHaveLength(0);
  });
});

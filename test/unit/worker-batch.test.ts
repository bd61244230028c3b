import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { makeHandler, WAITING_REFUNDS_CHECK } from '../../functions/worker.ts';
import type { ConnectorEventInput } from '../../shared/domain/events.ts';
import { PermanentError, TransientError } from '../../shared/errors.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import type { AddConversionInput, ConversionBackend, PlatformConversion } from '../../shared/ports.ts';
import { type BatchDeps, processBatch } from '../../shared/worker/batch.ts';
import { NO_PLATFORM_AMOUNT } from '../../shared/worker/refunds.ts';
import type { WaitingMeasure } from '../../shared/worker/waiting.ts';
import {
  type BatchHarness,
  batchHarness,
  orderPlaced,
  PROGRAM,
  SOURCE,
  START,
  sqsRecord,
  unavailable,
} from '../support/batch-harness.ts';
import type { FakeClock } from '../support/clock.ts';

/**
 * Issue 5, section 1: a transient failure is retried inside the invocation while its time allows,
 * then given back to the queue hidden for a backoff that grows with its receive count (exponential
 * with jitter, capped); a permanent one is parked in the DLQ with its reason at once; a failed
 * message holds back the rest of its order (message group) in the batch, and only that.
 */

const rateLimited = (retryAfterMs: number) =>
  new TransientError(`conversions.add answered 429: rate limited, retry after ${retryAfterMs} ms`, {
    status: 429,
    retryAfterMs,
  });

/** The platform as the worker sees it: `add` fails as `failAdd` says, and otherwise stores. */
class FakeBackend implements ConversionBackend {
  readonly adds: AddConversionInput[] = [];
  readonly amountUpdates: { id: string; amount: number }[] = [];
  readonly refusals: string[] = [];
  readonly #stored = new Map<string, PlatformConversion>();
  readonly #failAdd: (input: AddConversionInput) => Error | undefined;

  constructor(failAdd: (input: AddConversionInput) => Error | undefined = () => undefined) {
    this.#failAdd = failAdd;
  }

  async add(input: AddConversionInput): Promise<{ id: string | undefined }> {
    this.adds.push(input);
    const failure = this.#failAdd(input);
    if (failure) throw failure;
    const id = `conv-${this.#stored.size + 1}`;
    this.#stored.set(input.externalId, {
      id,
      externalId: input.externalId,
      amount: input.amount,
      status: 'pending',
    });
    return { id };
  }

  async find(_program: string, externalId: string): Promise<PlatformConversion | undefined> {
    return this.#stored.get(externalId);
  }

  /** A conversion the platform has from before the connector. */
  seed(conversion: PlatformConversion): void {
    this.#stored.set(conversion.externalId, conversion);
  }

  async updateAmount(_program: string, id: string, amount: number): Promise<void> {
    this.amountUpdates.push({ id, amount });
  }

  async refuse(_program: string, id: string): Promise<void> {
    this.refusals.push(id);
  }

  async accept(_program: string, _id: string): Promise<void> {}
}

interface Harness extends BatchHarness {
  readonly backend: FakeBackend;
}

/** `random` is what the backoff's jitter draws (default 0). */
function harness(
  options: { random?: number; failAdd?: (input: AddConversionInput) => Error | undefined } = {},
): Harness {
  const backend = new FakeBackend(options.failAdd);
  return { ...batchHarness(backend, { random: () => options.random ?? 0 }), backend };
}

function orderRefunded(externalId: string, refundId: string, amount: number): ConnectorEventInput {
  return {
    type: 'OrderRefunded',
    eventId: `evt-${refundId}`,
    source: SOURCE.id,
    platform: 'shopify',
    externalId,
    receivedAt: new Date(START - 30_000).toISOString(),
    refundId,
    amount,
    currency: 'EUR',
  };
}

function orderCancelled(externalId: string): ConnectorEventInput {
  return {
    type: 'OrderCancelled',
    eventId: `evt-cancel-${externalId}`,
    source: SOURCE.id,
    platform: 'shopify',
    externalId,
    receivedAt: new Date(START - 20_000).toISOString(),
    reason: 'customer',
  };
}

/** Seconds the message is hidden for when the platform keeps failing at this receive count. */
async function givenBackFor(receiveCount: number, random: number): Promise<number> {
  const h = harness({ random, failAdd: unavailable });
  await h.clock.run(
    processBatch(h.deps, [sqsRecord('m1', orderPlaced('1001'), { receiveCount })], START + 30_000),
  );
  if (h.failures.delays.length !== 1) throw new Error(`delay called ${h.failures.delays.length} times`);
  return h.failures.delays[0]?.seconds ?? Number.NaN;
}

describe('processBatch: a transient failure', () => {
  // Base 5 s, cap 900 s: the ceiling is min(900, 5·2^(receives−1)); the jitter draws from its upper half.
  const BACKOFF: readonly (readonly [receiveCount: number, lowest: number, highest: number])[] = [
    [1, 3, 5],
    [2, 5, 10],
    [3, 10, 20],
    [4, 20, 40],
    [5, 40, 80],
    [6, 80, 160],
    [7, 160, 320],
    [8, 320, 640],
    [9, 450, 900],
    [10, 450, 900],
  ];

  it.each(BACKOFF)(
    'at receive %i is retried inline twice, then hidden for %i to %i s',
    async (receiveCount, lowest, highest) => {
      // Prepare
      const low = harness({ random: 0, failAdd: unavailable });
      const high = harness({ random: 0.999, failAdd: unavailable });
      const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount });

      // Act
      const lowResponse = await low.clock.run(processBatch(low.deps, [record], START + 30_000));
      const highResponse = await high.clock.run(processBatch(high.deps, [record], START + 30_000));

      // Assess
      for (const [h, response, seconds] of [
        [low, lowResponse, lowest],
        [high, highResponse, highest],
      ] as const) {
        expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
        expect(h.backend.adds).toHaveLength(3);
        expect(h.failures.delays).toEqual([{ receiptHandle: `rh-m1-${receiveCount}`, seconds }]);
        expect(h.failures.parked).toEqual([]);
        expect(h.reports).toEqual([
          expect.objectContaining({
            messageId: 'm1',
            receiveCount,
            status: 'retry',
            failureClass: 'transient',
            platformStatus: 503,
          }),
        ]);
        expect((await h.ledger.get(ledgerKey(PROGRAM, '1001')))?.state).toBe('adding');
      }
      // The inline waits are jittered exponential too: up to 200 ms, then up to 400 ms.
      expect(low.clock.sleeps).toEqual([0, 0]);
      expect(high.clock.sleeps).toEqual([200, 400]);
    },
  );

  it('is hidden within [ceiling/2, ceiling], never less than at an earlier receive and never over the cap', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 40 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        async (receiveCount, random) => {
          // Act
          const now = await givenBackFor(receiveCount, random);
          const next = await givenBackFor(receiveCount + 1, random);

          // Assess
          const ceiling = Math.min(900, 5 * 2 ** (receiveCount - 1));
          expect(now).toBeGreaterThanOrEqual(ceiling / 2);
          expect(now).toBeLessThanOrEqual(ceiling);
          expect(next).toBeGreaterThanOrEqual(now);
          expect(next).toBeLessThanOrEqual(900);
        },
      ),
      { numRuns: 200, seed: 5_001 },
    );
  });

  it('waits as long as a retry-after hint asks, inline and as the floor of its visibility', async () => {
    // Prepare
    const h = harness({ random: 0, failAdd: () => rateLimited(7_300) });
    const record = sqsRecord('m1', orderPlaced('1001'));

    // Act
    const response = await h.clock.run(processBatch(h.deps, [record], START + 60_000));

    // Assess: the backoff alone would hide it 3 s; the platform asked for 7.3 s.
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(h.clock.sleeps).toEqual([7_300, 7_300]);
    expect(h.backend.adds).toHaveLength(3);
    expect(h.failures.delays).toEqual([{ receiptHandle: 'rh-m1-1', seconds: 8 }]);
    expect(h.reports).toEqual([expect.objectContaining({ status: 'retry', platformStatus: 429 })]);
  });

  it('keeps the longer backoff when a retry-after hint is shorter', async () => {
    // Prepare
    const h = harness({ random: 0, failAdd: () => rateLimited(1_500) });
    const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: 4 });

    // Act
    await h.clock.run(processBatch(h.deps, [record], START + 60_000));

    // Assess
    expect(h.clock.sleeps).toEqual([1_500, 1_500]);
    expect(h.failures.delays).toEqual([{ receiptHandle: 'rh-m1-4', seconds: 20 }]);
  });

  it('is given back at once when the invocation has no time left for an inline retry', async () => {
    // Prepare: a wait plus a second of margin must end before the deadline.
    const h = harness({ random: 0, failAdd: unavailable });
    const record = sqsRecord('m1', orderPlaced('1001'));

    // Act
    const response = await h.clock.run(processBatch(h.deps, [record], START + 1_000));

    // Assess
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(h.backend.adds).toHaveLength(1);
    expect(h.clock.sleeps).toEqual([]);
    expect(h.clock.time).toBe(START);
    expect(h.failures.delays).toEqual([{ receiptHandle: 'rh-m1-1', seconds: 3 }]);
  });

  it('stops retrying inline as soon as the next wait would overrun the deadline', async () => {
    // Prepare: waits of 200 then 400 ms; only the first fits in 1.3 s with its margin.
    const h = harness({ random: 0.999, failAdd: unavailable });
    const record = sqsRecord('m1', orderPlaced('1001'));

    // Act
    await h.clock.run(processBatch(h.deps, [record], START + 1_300));

    // Assess
    expect(h.backend.adds).toHaveLength(2);
    expect(h.clock.sleeps).toEqual([200]);
    expect(h.failures.delays).toEqual([{ receiptHandle: 'rh-m1-1', seconds: 5 }]);
  });

  it('does not sleep through the deadline for a retry-after longer than the time left', async () => {
    // Prepare
    const h = harness({ random: 0, failAdd: () => rateLimited(7_300) });
    const record = sqsRecord('m1', orderPlaced('1001'));

    // Act
    await h.clock.run(processBatch(h.deps, [record], START + 5_000));

    // Assess
    expect(h.backend.adds).toHaveLength(1);
    expect(h.clock.sleeps).toEqual([]);
    expect(h.failures.delays).toEqual([{ receiptHandle: 'rh-m1-1', seconds: 8 }]);
  });

  it('that clears on an inline retry settles the message in the same invocation', async () => {
    // Prepare
    let failuresLeft = 2;
    const h = harness({
      random: 0,
      failAdd: () => (failuresLeft-- > 0 ? unavailable() : undefined),
    });
    const record = sqsRecord('m1', orderPlaced('1001'));

    // Act
    const response = await h.clock.run(processBatch(h.deps, [record], START + 30_000));

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(h.backend.adds).toHaveLength(3);
    expect(h.failures.delays).toEqual([]);
    expect(h.reports).toEqual([
      expect.objectContaining({ status: 'done', outcome: expect.objectContaining({ result: 'added' }) }),
    ]);
    expect((await h.ledger.get(ledgerKey(PROGRAM, '1001')))?.state).toBe('added');
  });
});

describe('processBatch: a permanent failure', () => {
  const refused = () =>
    new PermanentError('conversions.add answered 422: no click matches the cids', {
      status: 422,
      platformMessage: 'no click matches the cids',
    });

  it('is parked in the DLQ at once with its reason and history, and counts as handled', async () => {
    // Prepare
    const h = harness({ failAdd: refused });
    const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: 2 });

    // Act
    const response = await h.clock.run(processBatch(h.deps, [record], START + 30_000));

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(h.backend.adds).toHaveLength(1);
    expect(h.failures.delays).toEqual([]);
    expect(h.failures.parked).toHaveLength(1);
    const [parked] = h.failures.parked;
    expect(parked?.message).toMatchObject({
      body: record.body,
      groupId: record.attributes.MessageGroupId,
    });
    expect(parked?.message.deduplicationId).toMatch(/^m1-/);
    expect(parked?.failure).toEqual({
      failureClass: 'permanent',
      reason: 'conversions.add answered 422: no click matches the cids',
      platformStatus: '422',
      platformMessage: 'no click matches the cids',
      attempts: '2',
      firstFailureAt: '2026-03-02T09:00:00.000Z',
      lastFailureAt: '2026-03-02T09:00:00.000Z',
      eventType: 'OrderPlaced',
      externalId: '1001',
      source: 'shop',
    });
    expect(h.reports).toEqual([expect.objectContaining({ status: 'parked', failureClass: 'permanent' })]);
    expect((await h.ledger.get(ledgerKey(PROGRAM, '1001')))?.state).toBe('failed');
  });

  it('of a replayed message adds to the attempts and keeps its first failure time', async () => {
    // Prepare
    const h = harness({ failAdd: refused });
    const record = sqsRecord('m1', orderPlaced('1001'), {
      attributes: { attempts: '3', firstFailureAt: '2026-03-01T18:30:00.000Z' },
    });

    // Act
    await h.clock.run(processBatch(h.deps, [record], START + 30_000));

    // Assess
    expect(h.failures.parked[0]?.failure).toMatchObject({
      attempts: '4',
      firstFailureAt: '2026-03-01T18:30:00.000Z',
      lastFailureAt: '2026-03-02T09:00:00.000Z',
    });
  });

  it('stays in the queue when it cannot be parked', async () => {
    // Prepare
    const h = harness({ failAdd: refused });
    h.failures.parkError = Object.assign(new Error('queue does not exist'), { name: 'QueueDoesNotExist' });
    const record = sqsRecord('m1', orderPlaced('1001'));

    // Act
    const response = await h.clock.run(processBatch(h.deps, [record], START + 30_000));

    // Assess
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(h.failures.delays).toEqual([]);
    expect(h.reports).toEqual([
      expect.objectContaining({
        status: 'retry',
        reason: 'could not park in the DLQ (QueueDoesNotExist); left in the queue',
      }),
    ]);
  });
});

describe('processBatch: message groups', () => {
  it('holds back the rest of a failing order, and only that order', async () => {
    // Prepare: order A's add keeps failing; order B is placed, then partly refunded.
    const h = harness({ failAdd: (input) => (input.externalId === 'A-100' ? unavailable() : undefined) });
    const records = [
      sqsRecord('a1', orderPlaced('A-100')),
      sqsRecord('b1', orderPlaced('B-200')),
      sqsRecord('a2', orderRefunded('A-100', 'RF-A', 500)),
      sqsRecord('b2', orderRefunded('B-200', 'RF-B', 500)),
    ];

    // Act
    const response = await h.clock.run(processBatch(h.deps, records, START + 30_000));

    // Assess
    expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['a1', 'a2']);
    // A FIFO group stays blocked while any of its messages is in flight, so the held-back a2 is
    // hidden for a1's backoff too: the order comes back after the backoff, not the queue's timeout.
    expect(h.failures.delays).toEqual([
      { receiptHandle: 'rh-a1-1', seconds: 3 },
      { receiptHandle: 'rh-a2-1', seconds: 3 },
    ]);
    const reportsOf = (messageId: string) =>
      h.reports.filter((r) => r.messageId === messageId).map((r) => r.status);
    expect(reportsOf('a1')).toEqual(['retry']);
    expect(reportsOf('a2')).toEqual(['skipped_after_group_failure']);
    expect((await h.ledger.get(ledgerKey(PROGRAM, 'A-100')))?.refunds).toEqual({});
    // Order B went through in its order: added, then its amount lowered by the refund.
    expect(reportsOf('b1')).toEqual(['done']);
    expect(reportsOf('b2')).toEqual(['done']);
    const b = await h.ledger.get(ledgerKey(PROGRAM, 'B-200'));
    expect(b).toMatchObject({ state: 'added', currentAmount: 1500 });
    expect(h.backend.amountUpdates).toEqual([{ id: b?.conversionId, amount: 1500 }]);
  });
});

describe('processBatch: orders side by side', () => {
  it('does not hold up an order behind another order whose add is still waiting', async () => {
    // Prepare: A's add answers only once B's add has been sent; one order at a time never ends.
    const h = harness();
    let bSent: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      bSent = resolve;
    });
    const backend: ConversionBackend = {
      add: async (input) => {
        if (input.externalId === 'A-100') await gate;
        else bSent();
        return h.backend.add(input);
      },
      find: (program, externalId) => h.backend.find(program, externalId),
      updateAmount: (program, id, amount) => h.backend.updateAmount(program, id, amount),
      refuse: (program, id) => h.backend.refuse(program, id),
      accept: (program, id) => h.backend.accept(program, id),
    };
    const records = [sqsRecord('a1', orderPlaced('A-100')), sqsRecord('b1', orderPlaced('B-200'))];

    // Act
    const response = await h.clock.run(
      processBatch({ ...h.deps, backendFor: () => backend }, records, START + 30_000),
    );

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(h.backend.adds.map((a) => a.externalId)).toEqual(['B-200', 'A-100']);
  });
});

/** Client timeout 1 s, so the platform's 1.5 s write lands after the client gave up on its answer. */
const timedOut = () =>
  new TransientError(
    'conversions.add got no answer within 1000 ms: not retried, the platform may have recorded it (look it up before sending it again)',
    { ambiguous: true },
  );

/**
 * A platform that records each add 1.5 s after it arrives, while the client stops waiting for the
 * answer after 1 s: Conversion info shows nothing until the write lands.
 */
class SlowPlatform implements ConversionBackend {
  readonly adds: AddConversionInput[] = [];
  readonly #writes: { at: number; conversion: PlatformConversion }[] = [];
  readonly #clock: FakeClock;
  readonly #lateMs: number;

  constructor(clock: FakeClock, lateMs = 1_500) {
    this.#clock = clock;
    this.#lateMs = lateMs;
  }

  async add(input: AddConversionInput): Promise<{ id: string | undefined }> {
    this.adds.push(input);
    this.#writes.push({
      at: this.#clock.now() + this.#lateMs,
      conversion: {
        id: `conv-${this.adds.length}`,
        externalId: input.externalId,
        amount: input.amount,
        status: 'pending',
      },
    });
    throw timedOut();
  }

  async find(_program: string, externalId: string): Promise<PlatformConversion | undefined> {
    return this.#writes.find((w) => w.conversion.externalId === externalId && w.at <= this.#clock.now())
      ?.conversion;
  }

  async updateAmount(): Promise<void> {}

  async refuse(): Promise<void> {}

  async accept(): Promise<void> {}
}

describe('processBatch: an add that got no clear answer', () => {
  const SETTLE_MS = 10_000;

  function slowHarness(): Harness & { platform: SlowPlatform } {
    const h = harness({ random: 0 });
    const platform = new SlowPlatform(h.clock);
    return { ...h, platform, deps: { ...h.deps, backendFor: () => platform, settleMs: SETTLE_MS } };
  }

  it('is hidden for the settle period (not retried asleep), then looked up, not sent again: one conversion', async () => {
    // Prepare
    const h = slowHarness();

    // Act
    const first = await h.clock.run(
      processBatch(h.deps, [sqsRecord('m1', orderPlaced('1001'))], START + 60_000),
    );
    h.clock.time += SETTLE_MS;
    const response = await h.clock.run(
      processBatch(h.deps, [sqsRecord('m1', orderPlaced('1001'), { receiveCount: 2 })], START + 120_000),
    );

    // Assess: given back hidden for the settle period; then Conversion info has the first add.
    expect(first.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(h.failures.delays).toEqual([{ receiptHandle: 'rh-m1-1', seconds: 10 }]);
    expect(response.batchItemFailures).toEqual([]);
    expect(h.platform.adds).toHaveLength(1);
    expect(h.clock.sleeps).toEqual([]);
    expect(h.reports.slice(1)).toEqual([
      expect.objectContaining({
        status: 'done',
        outcome: expect.objectContaining({ result: 'reconciled', conversionId: 'conv-1' }),
      }),
    ]);
    expect(await h.ledger.get(ledgerKey(PROGRAM, '1001'))).toMatchObject({
      state: 'added',
      conversionId: 'conv-1',
    });
  });

  it('keeps its lease and is hidden for the settle period when the invocation cannot wait; a redelivery before it adds nothing', async () => {
    // Prepare
    const h = slowHarness();

    // Act: the invocation ends before the settle period; then the message is delivered again early
    // (as after a Lambda timeout), then once more when the period is over.
    await h.clock.run(processBatch(h.deps, [sqsRecord('m1', orderPlaced('1001'))], START + 5_000));
    const held = await h.ledger.get(ledgerKey(PROGRAM, '1001'));
    h.clock.time = START + 4_000;
    await h.clock.run(
      processBatch(h.deps, [sqsRecord('m1', orderPlaced('1001'), { receiveCount: 2 })], START + 5_000),
    );
    h.clock.time = START + SETTLE_MS;
    const response = await h.clock.run(
      processBatch(h.deps, [sqsRecord('m1', orderPlaced('1001'), { receiveCount: 3 })], START + 60_000),
    );

    // Assess
    expect(held).toMatchObject({ state: 'adding', leaseOwner: 'worker-1', leaseUntil: START + SETTLE_MS });
    expect(h.failures.delays).toEqual([
      { receiptHandle: 'rh-m1-1', seconds: 10 },
      // Hidden until the lease ends (6 s left), not for its receive count's 5 s backoff.
      { receiptHandle: 'rh-m1-2', seconds: 6 },
    ]);
    expect(h.clock.sleeps).toEqual([]);
    expect(response.batchItemFailures).toEqual([]);
    expect(h.platform.adds).toHaveLength(1);
    expect((await h.ledger.get(ledgerKey(PROGRAM, '1001')))?.conversionId).toBe('conv-1');
  });

  it('a 503 (nothing done yet) still expires the lease at once, for the fast inline retries', async () => {
    // Prepare
    const h = harness({ random: 0, failAdd: unavailable });

    // Act
    await h.clock.run(processBatch(h.deps, [sqsRecord('m1', orderPlaced('1001'))], START + 30_000));

    // Assess
    expect(h.backend.adds).toHaveLength(3);
    expect(h.clock.sleeps).toEqual([0, 0]);
    expect((await h.ledger.get(ledgerKey(PROGRAM, '1001')))?.leaseUntil).toBe(0);
  });

  it.each([
    ['its own lease a hair before it ends', 'worker-1', 50, 'added'],
    ['its own lease once it ended', 'worker-1', 0, 'added'],
    ["another worker's lease that has not ended", 'worker-2', 50, 'retry'],
  ] as const)('takes over %s', async (_what, owner, leftMs, expected) => {
    // Prepare: a record left by an earlier unclear add that the platform never recorded.
    const h = harness({ random: 0 });
    const leased: OrderRecord = {
      key: ledgerKey(PROGRAM, '1001'),
      program: PROGRAM,
      externalId: '1001',
      source: SOURCE.id,
      state: 'adding',
      version: 0,
      kind: 'tracking',
      originalAmount: 2000,
      currentAmount: 2000,
      currency: 'EUR',
      refunds: {},
      leaseOwner: owner,
      leaseUntil: START + leftMs,
      createdAt: new Date(START).toISOString(),
      updatedAt: new Date(START).toISOString(),
    };
    await h.ledger.create(leased);

    // Act
    await h.clock.run(
      processBatch(
        // No verification window here: this is about leases (the window is tested below).
        { ...h.deps, inlineRetries: 0, verifyMs: 0 },
        [sqsRecord('m1', orderPlaced('1001'))],
        START + 30_000,
      ),
    );

    // Assess
    const [report] = h.reports;
    expect(report?.outcome?.result ?? report?.status).toBe(expected);
    expect(h.backend.adds).toHaveLength(expected === 'added' ? 1 : 0);
  });
});

describe('processBatch: refunds of a conversion imported without an amount', () => {
  function imported(): Harness {
    const h = harness();
    // Placed before the connector; Conversion info answers without `amount` (optional in 4.93).
    h.backend.seed({ id: 'conv-old', externalId: 'old-1', status: 'pending', currency: 'EUR' });
    return h;
  }

  it('parks a partial refund with a reason an operator can act on, and leaves the conversion alone', async () => {
    // Prepare
    const h = imported();

    // Act
    const response = await h.clock.run(
      processBatch(h.deps, [sqsRecord('m1', orderRefunded('old-1', 'RF-1', 100))], START + 30_000),
    );

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(h.failures.parked.map((p) => p.failure)).toEqual([
      expect.objectContaining({ failureClass: 'permanent', reason: NO_PLATFORM_AMOUNT }),
    ]);
    expect(NO_PLATFORM_AMOUNT).toMatch(/^the platform's conversion has no amount: .*apply it by hand/);
    expect(h.backend.refusals).toEqual([]);
    expect(h.backend.amountUpdates).toEqual([]);
    const record = await h.ledger.get(ledgerKey(PROGRAM, 'old-1'));
    expect(record).toMatchObject({ state: 'added', imported: true, amountUnknown: true });
    expect(record?.refunds['RF-1']).toMatchObject({ status: 'rejected', outcome: NO_PLATFORM_AMOUNT });
  });

  it('still refuses the conversion for a cancellation', async () => {
    // Prepare
    const h = imported();

    // Act
    await h.clock.run(
      processBatch(
        h.deps,
        [sqsRecord('m1', orderRefunded('old-1', 'RF-1', 100)), sqsRecord('m2', orderCancelled('old-1'))],
        START + 30_000,
      ),
    );

    // Assess
    expect(h.failures.parked).toHaveLength(1);
    expect(h.backend.refusals).toEqual(['conv-old']);
    expect((await h.ledger.get(ledgerKey(PROGRAM, 'old-1')))?.state).toBe('refused');
  });
});

describe('processBatch: free-form refund ids that could be taken for something else', () => {
  // Object property names, and the words the connector once used for its own refunds (a cancellation
  // now counts as `connector:cancellation`, a prefix finance and generic shops may not use).
  it.each(['constructor', 'toString', 'hasOwnProperty', '__proto__', 'cancellation', 'status-refunded'])(
    'applies a partial refund with id "%s" once, then refuses the conversion when the order is cancelled',
    async (refundId) => {
      // Prepare: a finance or generic refund id is free-form text.
      const h = harness();
      const records = [
        sqsRecord('m1', orderPlaced('1001')),
        sqsRecord('m2', orderRefunded('1001', refundId, 500)),
        sqsRecord('m3', { ...orderRefunded('1001', refundId, 500), eventId: 'evt-repeat' }),
        sqsRecord('m4', orderCancelled('1001')),
      ];

      // Act
      const response = await h.clock.run(processBatch(h.deps, records, START + 30_000));

      // Assess
      expect(response.batchItemFailures).toEqual([]);
      expect(h.reports.map((r) => r.outcome?.result)).toEqual([
        'added',
        'refund_applied',
        'refund_duplicate',
        'refused',
      ]);
      expect(h.backend.amountUpdates.map((u) => u.amount)).toEqual([1500]);
      expect(h.backend.refusals).toHaveLength(1);
      const record = await h.ledger.get(ledgerKey(PROGRAM, '1001'));
      expect(Object.getPrototypeOf(record?.refunds)).toBe(Object.prototype);
      expect(Object.hasOwn(record?.refunds ?? {}, refundId)).toBe(true);
      expect(record?.refunds[refundId]).toMatchObject({ refundId, status: 'applied', resultingAmount: 1500 });
    },
  );
});

describe('the worker’s hourly check of refunds waiting for their order', () => {
  it('counts a refund held for an order that never came, and how long the oldest has waited', async () => {
    // Prepare: a refund of an order the platform does not have, then 25 hours without its order
    const h = harness();
    const response = await h.clock.run(
      processBatch(h.deps, [sqsRecord('m1', orderRefunded('2001', 'r1', 500))], START + 30_000),
    );
    h.clock.time += 25 * 3_600_000;
    const measures: WaitingMeasure[] = [];
    const handler = makeHandler({ ...h.deps, reportWaiting: (m) => measures.push(m) });

    // Act
    await handler(WAITING_REFUNDS_CHECK, { getRemainingTimeInMillis: () => 60_000 });

    // Assess: acknowledged (not parked), held in the ledger, and measured past a 24 h bound
    expect(response.batchItemFailures).toEqual([]);
    expect(h.failures.parked).toEqual([]);
    expect(h.reports).toEqual([
      expect.objectContaining({
        status: 'done',
        outcome: expect.objectContaining({ result: 'refund_waiting' }),
      }),
    ]);
    expect(measures).toHaveLength(1);
    expect(measures[0]?.waiting).toBe(1);
    expect(measures[0]?.oldestSeconds).toBeGreaterThan(24 * 3_600);
  });
});

describe('processBatch: a platform that records an add late', () => {
  /** Delivers the message again whenever it was given back, after the time it was hidden for. */
  async function deliverUntilDone(h: Harness, deps: BatchDeps): Promise<number> {
    for (let receiveCount = 1; receiveCount <= 6; receiveCount++) {
      const before = h.failures.delays.length;
      await h.clock.run(
        processBatch(deps, [sqsRecord('m1', orderPlaced('1001'), { receiveCount })], h.clock.now() + 60_000),
      );
      const given = h.failures.delays[before];
      if (!given) return receiveCount;
      h.clock.time += given.seconds * 1_000;
    }
    throw new Error('still not done after maxReceiveCount (6) receives: it would be redriven to the DLQ');
  }

  it.each([7_000, 20_000, 60_000, 240_000])(
    'sends no second add while the platform may still record the first (recorded %i ms late): one conversion',
    async (lateMs) => {
      // Prepare: every add times out; the platform records it lateMs after the request
      const h = harness({ random: 0 });
      const platform = new SlowPlatform(h.clock, lateMs);
      const deps: BatchDeps = { ...h.deps, backendFor: () => platform, settleMs: 10_000 };

      // Act
      const receives = await deliverUntilDone(h, deps);

      // Assess: one add, adopted once the platform shows it; the waits spent hidden in the queue
      expect(platform.adds).toHaveLength(1);
      expect(await h.ledger.get(ledgerKey(PROGRAM, '1001'))).toMatchObject({
        state: 'added',
        conversionId: 'conv-1',
      });
      expect(h.clock.sleeps).toEqual([]);
      expect(receives).toBeLessThanOrEqual(3);
    },
  );

  it('adds again once the platform has shown nothing for the whole verification window', async () => {
    // Prepare: the first add never reaches the platform's store; the second is answered
    const h = harness({ random: 0 });
    const platform = new SlowPlatform(h.clock, Number.POSITIVE_INFINITY);
    let calls = 0;
    const deps: BatchDeps = {
      ...h.deps,
      settleMs: 10_000,
      backendFor: () => ({
        ...h.backend,
        add: (input) => (++calls === 1 ? platform.add(input) : h.backend.add(input)),
        find: h.backend.find.bind(h.backend),
        updateAmount: h.backend.updateAmount.bind(h.backend),
        refuse: h.backend.refuse.bind(h.backend),
        accept: h.backend.accept.bind(h.backend),
      }),
    };

    // Act
    await deliverUntilDone(h, deps);

    // Assess: hidden for the settle period, then for the rest of the 10 minutes, then added
    expect(h.failures.delays.map((d) => d.seconds)).toEqual([10, 590]);
    expect(calls).toBe(2);
    expect(await h.ledger.get(ledgerKey(PROGRAM, '1001'))).toMatchObject({ state: 'added' });
  });
});

describe('processBatch: a refund after the platform locked the conversion', () => {
  it('is a late refund: handled at once, neither retried, hidden nor parked, and the order’s next message goes on', async () => {
    // Prepare: the platform answers 422 to any change and shows the conversion locked.
    const h = harness();
    await h.clock.run(processBatch(h.deps, [sqsRecord('m0', orderPlaced('1001'))], START + 30_000));
    let changes = 0;
    const locked = h.backend;
    locked.updateAmount = async () => {
      changes++;
      throw new PermanentError('conversions.update answered 422: conversion is locked', { status: 422 });
    };
    locked.refuse = async () => {
      changes++;
      throw new PermanentError('conversions.refuse answered 422: conversion is locked', { status: 422 });
    };
    const find = locked.find.bind(locked);
    locked.find = async (program, externalId) => {
      const found = await find(program, externalId);
      return found && { ...found, status: 'accepted', isLocked: true, commission: 200 };
    };
    // Act
    const response = await h.clock.run(
      processBatch(
        h.deps,
        [sqsRecord('m1', orderRefunded('1001', 'RF-1', 500)), sqsRecord('m2', orderCancelled('1001'))],
        START + 60_000,
      ),
    );
    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(changes).toBe(2);
    expect(h.failures.parked).toEqual([]);
    expect(h.failures.delays).toEqual([]);
    expect(h.reports.slice(1).map((r) => [r.messageId, r.status, r.failureClass])).toEqual([
      ['m1', 'late_refund', 'late_refund'],
      ['m2', 'late_refund', 'late_refund'],
    ]);
    const record = await h.ledger.get(ledgerKey(PROGRAM, '1001'));
    expect(record?.refunds['RF-1']).toMatchObject({
      status: 'late',
      late: { because: 'locked', conversionAmount: 2000, commission: 200 },
    });
    expect(record).toMatchObject({ state: 'added', currentAmount: 2000 });
  });
});

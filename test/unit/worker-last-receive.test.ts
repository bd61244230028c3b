import { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import type { ConnectorEventInput } from '../../shared/domain/events.ts';
import { TransientError } from '../../shared/errors.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { METRIC, observeWorker } from '../../shared/observability.ts';
import type {
  AddConversionInput,
  ConversionBackend,
  Ledger,
  PlatformConversion,
} from '../../shared/ports.ts';
import { type BatchDeps, processBatch } from '../../shared/worker/batch.ts';
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

/**
 * A message that fails transiently on the queue's last receive (its redrive `maxReceiveCount`) is
 * parked by the worker itself, with failure attributes and a reason an operator can act on, instead
 * of being left to SQS's redrive, which moves it to the DLQ with no attributes at all. Before that
 * receive it is given back hidden for its backoff, as always; when the park fails, it is too.
 */

const MAX_RECEIVES = 6;

/** The client's answer to an add that timed out: the platform may have recorded it. */
const timedOut = () =>
  new TransientError(
    'conversions.add got no answer within 5000 ms: not retried, the platform may have recorded it (look it up before sending it again)',
    { ambiguous: true },
  );

/** The platform: `add` fails as `failAdd` says (an add that times out is still recorded), else stores. */
class FakePlatform implements ConversionBackend {
  readonly adds: AddConversionInput[] = [];
  readonly #stored = new Map<string, PlatformConversion>();
  failAdd: (input: AddConversionInput) => Error | undefined;

  constructor(failAdd: (input: AddConversionInput) => Error | undefined) {
    this.failAdd = failAdd;
  }

  async add(input: AddConversionInput): Promise<{ id: string | undefined }> {
    this.adds.push(input);
    const failure = this.failAdd(input);
    const recorded = failure === undefined || (failure instanceof TransientError && failure.ambiguous);
    const id = `conv-${this.#stored.size + 1}`;
    if (recorded) {
      this.#stored.set(input.externalId, {
        id,
        externalId: input.externalId,
        amount: input.amount,
        status: 'pending',
      });
    }
    if (failure) throw failure;
    return { id };
  }

  async find(_program: string, externalId: string): Promise<PlatformConversion | undefined> {
    return this.#stored.get(externalId);
  }

  async updateAmount(): Promise<void> {}
  async refuse(): Promise<void> {}
  async accept(): Promise<void> {}
}

interface Harness extends BatchHarness {
  readonly platform: FakePlatform;
}

/** The worker knowing the queue's maxReceiveCount, with a 10 s settle period for an unclear add. */
function harness(failAdd: (input: AddConversionInput) => Error | undefined): Harness {
  const platform = new FakePlatform(failAdd);
  return { ...batchHarness(platform, { settleMs: 10_000, maxReceiveCount: MAX_RECEIVES }), platform };
}

/** A ledger whose every call fails as `error` says (DynamoDB throttling, say). */
function failingLedger(error: () => Error): Ledger {
  const fail = async (): Promise<never> => {
    throw error();
  };
  return {
    get: fail,
    create: fail,
    update: fail,
    list: () => ({ [Symbol.asyncIterator]: () => ({ next: fail }) }),
  };
}

describe('processBatch on the queue’s last receive', () => {
  it('parks a message still failing transiently, with the last error and its history, and counts it handled', async () => {
    // Prepare
    const h = harness(unavailable);
    const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES });

    // Act
    const response = await h.clock.run(processBatch(h.deps, [record], START + 30_000));

    // Assess: the inline retries first, as on any receive; then parked, not given back.
    expect(response).toEqual({ batchItemFailures: [] });
    expect(h.platform.adds).toHaveLength(3);
    expect(h.failures.delays).toEqual([]);
    expect(h.failures.parked).toHaveLength(1);
    const [parked] = h.failures.parked;
    expect(parked?.message).toMatchObject({ body: record.body, groupId: record.attributes.MessageGroupId });
    expect(parked?.message.deduplicationId).toMatch(/^m1-/);
    expect(parked?.failure).toEqual({
      failureClass: 'transient',
      reason:
        "gave up after 6 receives (the queue's maxReceiveCount), still failing transiently; last: TransientError: conversions.add answered 503: Service Unavailable",
      platformStatus: '503',
      platformMessage: 'Service Unavailable',
      attempts: '6',
      firstFailureAt: '2026-03-02T09:00:00.000Z',
      lastFailureAt: '2026-03-02T09:00:00.000Z',
      eventType: 'OrderPlaced',
      externalId: '1001',
      source: 'shop',
    });
    expect(h.reports).toEqual([
      expect.objectContaining({
        messageId: 'm1',
        receiveCount: MAX_RECEIVES,
        status: 'parked',
        failureClass: 'transient',
        reason: parked?.failure.reason,
        platformStatus: 503,
      }),
    ]);
  });

  it('adds the receives to the attempts of a replayed message and keeps its first failure time', async () => {
    // Prepare: `dlq replay` sends the failure history along as attributes.
    const h = harness(unavailable);
    const record = sqsRecord('m1', orderPlaced('1001'), {
      receiveCount: MAX_RECEIVES,
      attributes: { attempts: '6', firstFailureAt: '2026-03-01T18:30:00.000Z' },
    });

    // Act
    await h.clock.run(processBatch(h.deps, [record], START + 30_000));

    // Assess
    expect(h.failures.parked[0]?.failure).toMatchObject({
      attempts: '12',
      firstFailureAt: '2026-03-01T18:30:00.000Z',
      lastFailureAt: '2026-03-02T09:00:00.000Z',
    });
  });

  it('names an error that is not the connector’s own as unexpected (a bug?), not as a transient failure', async () => {
    // Prepare: an adapter that trips over its own data.
    const h = harness(() => new TypeError("Cannot read properties of undefined (reading 'id')"));
    const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES });

    // Act
    const response = await h.clock.run(processBatch(h.deps, [record], START + 30_000));

    // Assess: parked (nothing is gained by SQS moving it with no reason), the logs pointed at.
    expect(response.batchItemFailures).toEqual([]);
    const failure = h.failures.parked[0]?.failure;
    expect(failure?.failureClass).toBe('transient');
    expect(failure?.reason).toBe(
      "gave up after 6 receives (the queue's maxReceiveCount) on an unexpected error (a bug? the worker's logs have each one; replay once it is fixed); last: TypeError: Cannot read properties of undefined (reading 'id')",
    );
    // `dlq list --reason transient`, "replay once the platform is healthy", must not sweep it up.
    expect(failure?.reason).not.toMatch(/transient/i);
  });

  it('names a failed AWS call (DynamoDB throttling) as such, not as a bug', async () => {
    // Prepare: what the AWS SDK throws has `$metadata`.
    const h = harness(() => undefined);
    const throttled = () =>
      Object.assign(new Error('Rate of requests exceeds the allowed throughput.'), {
        name: 'ProvisionedThroughputExceededException',
        $fault: 'client',
        $metadata: { httpStatusCode: 400, attempts: 3 },
      });
    const deps: BatchDeps = { ...h.deps, ledger: failingLedger(throttled) };
    const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES });

    // Act
    await h.clock.run(processBatch(deps, [record], START + 30_000));

    // Assess
    expect(h.failures.parked[0]?.failure.reason).toBe(
      "gave up after 6 receives (the queue's maxReceiveCount) on a failed AWS call (the worker's logs have each one; check the service, then replay); last: ProvisionedThroughputExceededException: Rate of requests exceeds the allowed throughput.",
    );
  });

  it('cuts a long last error, not the advice after it', async () => {
    // Prepare: a 5xx with a long page for a body (an ambiguous answer: the platform may have done it).
    const page = 'x'.repeat(3_000);
    const h = harness(
      () => new TransientError(`conversions.add answered 502: ${page}`, { status: 502, ambiguous: true }),
    );
    const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES });

    // Act
    await h.clock.run(processBatch(h.deps, [record], START + 30_000));

    // Assess
    const reason = h.failures.parked[0]?.failure.reason ?? '';
    expect(reason.length).toBeLessThanOrEqual(1_000);
    expect(reason).toMatch(/x…; that call got no clear answer, .* do not redo it by hand$/);
  });

  it('does not park a message that an inline retry of this invocation applies', async () => {
    // Prepare
    let failuresLeft = 2;
    const h = harness(() => (failuresLeft-- > 0 ? unavailable() : undefined));
    const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES });

    // Act
    const response = await h.clock.run(processBatch(h.deps, [record], START + 30_000));

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(h.failures.parked).toEqual([]);
    expect(h.reports).toEqual([expect.objectContaining({ status: 'done' })]);
    expect((await h.ledger.get(ledgerKey(PROGRAM, '1001')))?.state).toBe('added');
  });

  it('gives the message back hidden for its backoff, as before, when it cannot be parked: the redrive moves it', async () => {
    // Prepare
    const h = harness(unavailable);
    h.failures.parkError = Object.assign(new Error('throttled'), { name: 'RequestThrottled' });
    const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES });

    // Act
    const response = await h.clock.run(processBatch(h.deps, [record], START + 30_000));

    // Assess: base 5 s, 6th receive: hidden 80 to 160 s (random 0: the lower end).
    expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
    expect(h.failures.parked).toEqual([]);
    expect(h.failures.delays).toEqual([{ receiptHandle: 'rh-m1-6', seconds: 80 }]);
    expect(h.reports).toEqual([
      expect.objectContaining({
        status: 'retry',
        failureClass: 'transient',
        platformStatus: 503,
        reason:
          "conversions.add answered 503: Service Unavailable; could not park in the DLQ (RequestThrottled): left to the queue's redrive",
      }),
    ]);
  });

  it('parks an add that got no clear answer saying so; its replay looks the order up and adds nothing twice', async () => {
    // Prepare: every add times out, and the platform records it all the same.
    const h = harness(timedOut);
    const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES });

    // Act: parked on the last receive; then `dlq replay` sends it back (receive 1 in the main queue),
    // at once and again once the settle period is over.
    const last = await h.clock.run(processBatch(h.deps, [record], START + 30_000));
    const held = await h.ledger.get(ledgerKey(PROGRAM, '1001'));
    const parked = h.failures.parked[0];
    const replayed = (receiveCount: number): SQSRecord => ({
      ...sqsRecord('m2', orderPlaced('1001'), { receiveCount }),
      body: parked?.message.body ?? '',
    });
    h.platform.failAdd = () => undefined;
    // Too little time left to wait out the lease inline: given back.
    const early = await h.clock.run(processBatch(h.deps, [replayed(1)], START + 5_000));
    h.clock.time = START + 10_000;
    const later = await h.clock.run(processBatch(h.deps, [replayed(2)], START + 60_000));

    // Assess: no inline retry of the unclear add; parked with a reason that warns against a
    // second add by hand; the lease kept, so the early replay waits; then one conversion.
    expect(last.batchItemFailures).toEqual([]);
    expect(h.clock.sleeps).toEqual([]);
    expect(parked?.failure.failureClass).toBe('transient');
    expect(parked?.failure.reason).toMatch(
      /^gave up after 6 receives \(the queue's maxReceiveCount\), still failing transiently; last: TransientError: conversions\.add got no answer within 5000 ms: .*; that call got no clear answer, so the platform may have carried it out: replay it \(the ledger applies it once\), do not redo it by hand$/,
    );
    expect(held).toMatchObject({ state: 'adding', leaseOwner: 'worker-1', leaseUntil: START + 10_000 });
    expect(early.batchItemFailures).toEqual([{ itemIdentifier: 'm2' }]);
    expect(later.batchItemFailures).toEqual([]);
    expect(h.platform.adds).toHaveLength(1);
    expect(h.reports.at(-1)).toMatchObject({
      status: 'done',
      outcome: expect.objectContaining({ result: 'reconciled', conversionId: 'conv-1' }),
    });
  });
});

describe('processBatch before the queue’s last receive', () => {
  it.each([1, 5])(
    'gives a transient failure at receive %i back hidden for its backoff, as before',
    async (receiveCount) => {
      // Prepare
      const h = harness(unavailable);
      const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount });

      // Act
      const response = await h.clock.run(processBatch(h.deps, [record], START + 30_000));

      // Assess
      expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: 'm1' }] });
      expect(h.failures.parked).toEqual([]);
      expect(h.failures.delays).toEqual([
        { receiptHandle: `rh-m1-${receiveCount}`, seconds: receiveCount === 1 ? 3 : 40 },
      ]);
      expect(h.reports).toEqual([
        expect.objectContaining({
          status: 'retry',
          failureClass: 'transient',
          reason: 'conversions.add answered 503: Service Unavailable',
        }),
      ]);
    },
  );

  it('leaves a worker that does not know the queue’s maxReceiveCount to the redrive, as before', async () => {
    // Prepare
    const h = harness(unavailable);
    const { maxReceiveCount: _unknown, ...deps } = h.deps;
    const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES });

    // Act
    const response = await h.clock.run(processBatch(deps, [record], START + 30_000));

    // Assess
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(h.failures.parked).toEqual([]);
    expect(h.failures.delays).toEqual([{ receiptHandle: 'rh-m1-6', seconds: 80 }]);
  });
});

describe('the worker’s metrics for a message parked on its last receive', () => {
  it('count it a transient failure, not a permanent one', async () => {
    // Prepare
    const counts: Record<string, number> = {};
    const metrics = {
      addMetric: (name: string, _unit: string, value: number) => {
        counts[name] = (counts[name] ?? 0) + value;
      },
    };
    const h = harness(unavailable);
    const observe = observeWorker(new Logger({ serviceName: 'unit', logLevel: 'SILENT' }), metrics);
    const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES });

    // Act
    await h.clock.run(processBatch({ ...h.deps, observe }, [record], START + 30_000));

    // Assess
    expect(h.failures.parked).toHaveLength(1);
    expect(counts).toEqual({ [METRIC.transientFailures]: 1 });
  });
});

/** A refund of order `externalId` by the shop, `amount` minor units. */
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

/** The SQS message id a parked copy was made from (its dedup id is that id and a time stamp). */
const parkedFrom = (h: Harness) => h.failures.parked.map((p) => p.message.deduplicationId.split('-')[0]);

/**
 * SQS counts a receive for every message of a batch, the ones the worker gives back unprocessed
 * behind a failed message of their order too. A FIFO queue hands out a group's later message only
 * together with the earlier ones or once they are deleted, never while one of them is in flight,
 * and a replay from the DLQ joins the end of its group: a message held back is never on a later
 * receive than the failed one ahead of it. So when one held back is on the queue's last receive,
 * the failed one is on its own last receive too, and is parked as such.
 */
describe('processBatch: messages of an order behind a failed one on the queue’s last receive', () => {
  it('parks the failed one, then processes the rest of its order in this batch, in order', async () => {
    // Prepare: order 1001's add fails (503) on the last receive; its refund behind it is on that
    // receive too; order 2002 in the same batch goes through.
    const h = harness((input) => (input.externalId === '1001' ? unavailable() : undefined));
    const records = [
      sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES }),
      sqsRecord('o2', orderPlaced('2002')),
      sqsRecord('m2', orderRefunded('1001', 'RF-1', 500), { receiveCount: MAX_RECEIVES }),
    ];

    // Act
    const response = await h.clock.run(processBatch(h.deps, records, START + 30_000));

    // Assess: nothing given back, nothing hidden; the failed one parked with its own reason.
    expect(response).toEqual({ batchItemFailures: [] });
    expect(h.failures.delays).toEqual([]);
    expect(h.failures.parked[0]?.failure).toMatchObject({
      failureClass: 'transient',
      reason:
        "gave up after 6 receives (the queue's maxReceiveCount), still failing transiently; last: TransientError: conversions.add answered 503: Service Unavailable",
      attempts: '6',
      eventType: 'OrderPlaced',
      externalId: '1001',
    });
    // The refund is then taken, not held back: its order's add never finished, so it fails on its
    // own last receive and is parked after its order, with its own reason, for the order's replay.
    expect(h.reports.filter((r) => r.messageId !== 'o2').map((r) => [r.messageId, r.status])).toEqual([
      ['m1', 'parked'],
      ['m2', 'parked'],
    ]);
    expect(parkedFrom(h)).toEqual(['m1', 'm2']);
    expect(h.failures.parked[1]?.message.groupId).toBe(h.failures.parked[0]?.message.groupId);
    expect(h.failures.parked[1]?.failure.reason).toMatch(
      /^gave up after 6 receives \(the queue's maxReceiveCount\), still failing transiently; last: TransientError: the order’s conversion is still being added/,
    );
    expect(h.reports.find((r) => r.messageId === 'o2')?.status).toBe('done');
  });

  it('parks nothing ahead of a failed one that could not be parked: the rest is left to the redrive, in order, the log saying why', async () => {
    // Prepare: the DLQ refuses the park; m3 came later, and is on an earlier receive.
    const h = harness(unavailable);
    h.failures.parkError = Object.assign(new Error('throttled'), { name: 'RequestThrottled' });
    const records = [
      sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES }),
      sqsRecord('m2', orderRefunded('1001', 'RF-1', 500), { receiveCount: MAX_RECEIVES }),
      sqsRecord('m3', orderRefunded('1001', 'RF-2', 300), { receiveCount: 2 }),
    ];

    // Act
    const response = await h.clock.run(processBatch(h.deps, records, START + 30_000));

    // Assess: all given back, hidden together; none parked, so none reaches the DLQ ahead of m1.
    expect(response.batchItemFailures).toEqual([
      { itemIdentifier: 'm1' },
      { itemIdentifier: 'm2' },
      { itemIdentifier: 'm3' },
    ]);
    expect(h.failures.parked).toEqual([]);
    expect(h.failures.delays).toEqual([
      { receiptHandle: 'rh-m1-6', seconds: 80 },
      { receiptHandle: 'rh-m2-6', seconds: 80 },
      { receiptHandle: 'rh-m3-2', seconds: 80 },
    ]);
    expect(h.reports.find((r) => r.messageId === 'm1')).toMatchObject({
      status: 'retry',
      reason: expect.stringMatching(
        /could not park in the DLQ \(RequestThrottled\): left to the queue's redrive$/,
      ),
    });
    // The one the redrive moves next, with no reason in the DLQ, is logged with why.
    expect(h.reports.find((r) => r.messageId === 'm2')).toMatchObject({
      status: 'skipped_after_group_failure',
      reason:
        "held back on its last receive (6 of the queue's 6) behind message m1 of its order, which stays in the queue: left to the queue's redrive, which moves it to the DLQ without a reason (the log lines of m1 say why it failed)",
    });
    const m3 = h.reports.find((r) => r.messageId === 'm3');
    expect(m3?.status).toBe('skipped_after_group_failure');
    expect(m3?.reason).toBeUndefined();
  });

  it('parks nothing when the failed one goes through on an inline retry: the rest of its order is processed', async () => {
    // Prepare: the add fails once, then is answered.
    let failuresLeft = 1;
    const h = harness(() => (failuresLeft-- > 0 ? unavailable() : undefined));
    const records = [
      sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES }),
      sqsRecord('m2', orderRefunded('1001', 'RF-1', 500), { receiveCount: MAX_RECEIVES }),
    ];

    // Act
    const response = await h.clock.run(processBatch(h.deps, records, START + 30_000));

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(h.failures.parked).toEqual([]);
    expect(h.reports.map((r) => [r.messageId, r.status])).toEqual([
      ['m1', 'done'],
      ['m2', 'done'],
    ]);
  });
});

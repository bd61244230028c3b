import { describe, expect, it } from 'vitest';
import { makeHandler } from '../../functions/refunds.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { FinanceOutcome } from '../../shared/finance.ts';
import type { Ledger, SecretStore } from '../../shared/ports.ts';
import { FINANCE_KEY, refundsEvent } from '../support/finance-door.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { RecordingQueue } from '../support/recording-queue.ts';

/**
 * `POST /refunds` when a dependency fails: finance's tool gets 503 with retry-after, never a 500,
 * and nothing is queued.
 */

const sources = new Map(
  [
    SourceConfig.parse({
      id: 'shopify',
      platform: 'shopify',
      program: '0123456789abcdef01234567',
      rule: '76543210fedcba9876543210',
      secretRef: 'SHOPIFY_SECRET',
    }),
  ].map((s) => [s.id, s]),
);
const secrets: SecretStore = { get: async () => FINANCE_KEY, accepted: async () => [FINANCE_KEY] };

/** DynamoDB throttling the read, as the SDK throws it once its retries are spent. */
const throttledLedger: Pick<Ledger, 'get'> = {
  get: async () => {
    const error = new Error('Throughput exceeds the current capacity of your table');
    error.name = 'ProvisionedThroughputExceededException';
    throw error;
  },
};

/** Finance's refund `body` to `POST /refunds`, with the finance key. */
const refundEvent = (body: Record<string, unknown>) => refundsEvent({ 'x-api-key': FINANCE_KEY }, body);

describe('POST /refunds: a failing dependency is a 503 to retry, not a 500', () => {
  it.each([
    ['without a source (the ledger is searched)', {}],
    ['with a source', { source: 'shopify' }],
  ])('answers 503 with retry-after when the ledger read fails, %s', async (_case, extra) => {
    // Prepare
    const queue = new RecordingQueue();
    const handler = makeHandler({
      sources,
      ledger: throttledLedger,
      reservations: new MemoryLedger(),
      queue,
      secrets,
      keyRef: 'FINANCE_API_KEY',
      now: () => new Date(),
    });

    // Act
    const result = await handler(
      refundEvent({ externalId: '1001', refundId: 'r-1', amountCents: 500, currency: 'EUR', ...extra }),
    );

    // Assess
    expect(result.statusCode).toBe(503);
    expect(result.headers?.['retry-after']).toBe('5');
    expect(JSON.parse(result.body ?? '{}')).toEqual({
      error: 'unavailable',
      message: 'ledger unavailable, retry later',
    });
    expect(queue.events).toHaveLength(0);
  });

  it('answers 503 with retry-after when the finance key cannot be read or the queue refuses', async () => {
    // Prepare
    const working = { get: async () => undefined };
    const noKey = makeHandler({
      sources,
      ledger: working,
      reservations: new MemoryLedger(),
      queue: new RecordingQueue(),
      secrets: {
        get: async () => Promise.reject(new Error('AccessDeniedException')),
        accepted: async () => Promise.reject(new Error('AccessDeniedException')),
      },
      keyRef: 'FINANCE_API_KEY',
      now: () => new Date(),
    });
    const noQueue = makeHandler({
      sources,
      ledger: working,
      reservations: new MemoryLedger(),
      queue: { send: async () => Promise.reject(new Error('TimeoutError')) },
      secrets,
      keyRef: 'FINANCE_API_KEY',
      now: () => new Date(),
    });
    const request = refundEvent({ externalId: '1001', refundId: 'r-1', amountCents: 500, currency: 'EUR' });

    // Act
    const answers = [await noKey(request), await noQueue(request)];

    // Assess
    expect(answers.map((a) => [a.statusCode, a.headers?.['retry-after']])).toEqual([
      [503, '5'],
      [503, '5'],
    ]);
  });
});

describe('POST /refunds: refund ids', () => {
  it("refuses an id in the connector's own namespace with a 400 naming refundId, and queues nothing", async () => {
    // Prepare: a cancellation counts as the refund `connector:cancellation`; finance may not take it.
    const queue = new RecordingQueue();
    const handler = makeHandler({
      sources,
      ledger: { get: async () => undefined },
      reservations: new MemoryLedger(),
      queue,
      secrets,
      keyRef: 'FINANCE_API_KEY',
      now: () => new Date(),
    });

    // Act
    const result = await handler(
      refundEvent({ externalId: '1001', refundId: 'connector:cancellation', full: true, source: 'shopify' }),
    );

    // Assess
    expect(result.statusCode).toBe(400);
    expect(JSON.parse(result.body ?? '{}')).toMatchObject({ error: 'bad_request', field: 'refundId' });
    expect(queue.events).toHaveLength(0);
  });
});

describe('POST /refunds: what the observer is told', () => {
  it('reports queued with the ids, a refusal naming the field, an outage naming what failed, and never the key', async () => {
    // Prepare
    const outcomes: FinanceOutcome[] = [];
    const deps = {
      sources,
      ledger: { get: async () => undefined },
      reservations: new MemoryLedger(),
      queue: new RecordingQueue(),
      secrets,
      keyRef: 'FINANCE_API_KEY',
      now: () => new Date(),
      observe: (outcome: FinanceOutcome) => outcomes.push(outcome),
    };
    const handler = makeHandler(deps);
    const down = makeHandler({ ...deps, ledger: throttledLedger });

    // Act
    await handler(refundEvent({ externalId: '1001', refundId: 'r-1', amountCents: 500, currency: 'EUR' }));
    await handler(refundEvent({ externalId: '1001', refundId: 'r-2', amount: '-1', currency: 'EUR' }));
    await down(refundEvent({ externalId: '1001', refundId: 'r-3', amountCents: 500, currency: 'EUR' }));

    // Assess
    expect(outcomes).toEqual([
      expect.objectContaining({
        status: 202,
        result: 'queued',
        source: 'shopify',
        externalId: '1001',
        refundId: 'r-1',
        messageId: 'm1',
      }),
      expect.objectContaining({ status: 400, result: 'rejected', field: 'amount' }),
      expect.objectContaining({
        status: 503,
        result: 'unavailable',
        detail: 'ledger: ProvisionedThroughputExceededException',
      }),
    ]);
    expect(JSON.stringify(outcomes)).not.toContain(FINANCE_KEY);
  });
});

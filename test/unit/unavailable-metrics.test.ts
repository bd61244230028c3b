import { Logger } from '@aws-lambda-powertools/logger';
import { describe, expect, it } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import { ConfigurationError } from '../../shared/errors.ts';
import { type FinanceDeps, submitFinanceRefund } from '../../shared/finance.ts';
import { MAX_BODY_BYTES } from '../../shared/http/answers.ts';
import { type IngestDeps, ingestWebhook } from '../../shared/ingest.ts';
import { METRIC, observeFinance, observeIngest } from '../../shared/observability.ts';
import { adapterFor } from '../../shared/platforms/registry.ts';
import type { EventQueue, Ledger, ReservationLedger, SecretStore } from '../../shared/ports.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { RecordingQueue } from '../support/recording-queue.ts';
import { sampleFixture, shopifyWebhook } from '../support/webhooks.ts';

/**
 * Which answers count as "a dependency out of reach" (WebhooksUnavailable, FinanceRefundsUnavailable,
 * each watched by an alarm that pages): every 503 a function answers because it could not read a
 * secret or reach the ledger or the queue, and nothing the sender caused. A flood of forged
 * signatures (401) must page no one; neither must finance's own refunds of one order sent so much at
 * once that their reservations kept colliding (a 503 whose retry succeeds: no dependency is down).
 */

const SHOP_SECRET = 'unit-shopify-secret';
const FINANCE_KEY = 'finance-key-for-tests-0123456789abcdef';
const source = (id: string) =>
  SourceConfig.parse({
    id,
    platform: 'shopify',
    program: '0123456789abcdef01234567',
    rule: '76543210fedcba9876543210',
    secretRef: `connector/webhooks/${id}`,
  });
const sources = new Map([source('shopify')].map((s) => [s.id, s]));
const silent = new Logger({ serviceName: 'unit', logLevel: 'SILENT' });

/** Metrics as an observer sees them: counts by name. */
function countingMetrics() {
  const counts: Record<string, number> = {};
  return {
    counts,
    addMetric: (name: string, _unit: string, value: number) => {
      counts[name] = (counts[name] ?? 0) + value;
    },
  };
}

function failing(name: string): () => Promise<never> {
  return async () => {
    const error = new Error(`${name} said no`);
    error.name = name;
    throw error;
  };
}

const store = (accepted: SecretStore['accepted']): SecretStore => ({
  get: async (ref) => (await accepted(ref))[0] ?? '',
  accepted,
});
const throttledQueue: EventQueue = { send: failing('RequestThrottled') };

function order(secret = SHOP_SECRET) {
  const body = sampleFixture('shopify/order_2026-07_docs_example.json');
  const signed = shopifyWebhook(body, secret, 'orders/create');
  return { headers: signed.headers, rawBody: Buffer.from(signed.body) };
}

describe('WebhooksUnavailable: the webhook answered 503, a dependency out of reach', () => {
  const cases: [string, Partial<IngestDeps>, string, ReturnType<typeof order>, number, number][] = [
    ['the queue refuses the send', { queue: throttledQueue }, 'shopify', order(), 503, 1],
    [
      'Secrets Manager cannot be reached',
      { secrets: store(failing('TimeoutError')) },
      'shopify',
      order(),
      503,
      1,
    ],
    [
      'the signing secret is missing',
      {
        secrets: store(async (ref) => {
          throw new ConfigurationError(`secret ${ref} could not be read (ResourceNotFoundException)`);
        }),
      },
      'shopify',
      order(),
      503,
      1,
    ],
    ['the signature is wrong', {}, 'shopify', order('an attacker’s guess'), 401, 0],
    ['the source is unknown', {}, 'no-such-shop', order(), 404, 0],
    [
      'the body is over the limit',
      {},
      'shopify',
      { headers: {}, rawBody: Buffer.alloc(MAX_BODY_BYTES + 1) },
      413,
      0,
    ],
    ['the order is queued', {}, 'shopify', order(), 202, 0],
  ];

  it.each(cases)('%s', async (_case, overrides, sourceId, request, status, counted) => {
    // Prepare
    const metrics = countingMetrics();
    const deps: IngestDeps = {
      sources,
      adapterFor,
      secrets: store(async () => [SHOP_SECRET]),
      queue: new RecordingQueue(),
      now: () => new Date(),
      observe: observeIngest(silent, metrics),
      ...overrides,
    };

    // Act
    const answer = await ingestWebhook(deps, sourceId, request);

    // Assess
    expect(answer.status).toBe(status);
    expect(metrics.counts[METRIC.webhooksUnavailable] ?? 0).toBe(counted);
  });
});

/** The refunds ledger of no reservation that ever gets written: another request wins every round. */
class AlwaysOutbid implements ReservationLedger {
  async reservationsOf() {
    return undefined;
  }
  async saveReservations() {
    return false;
  }
}

describe('FinanceRefundsUnavailable: POST /refunds answered 503, a dependency out of reach', () => {
  const partial = { externalId: '1001', refundId: 'RF-1', amountCents: 500, currency: 'EUR' };
  const cases: [string, Partial<FinanceDeps>, Record<string, unknown> | string, string, number, number][] = [
    [
      'the finance key cannot be read',
      { secrets: store(failing('TimeoutError')) },
      partial,
      FINANCE_KEY,
      503,
      1,
    ],
    [
      'the finance key is too short to be accepted (the operator must replace it)',
      { secrets: store(async () => ['short']) },
      partial,
      'short',
      503,
      1,
    ],
    [
      'the ledger cannot be read',
      { ledger: { get: failing('ProvisionedThroughputExceededException') } as Pick<Ledger, 'get'> },
      partial,
      FINANCE_KEY,
      503,
      1,
    ],
    [
      'the reservation cannot be written',
      { reservations: { reservationsOf: failing('InternalServerError'), saveReservations: failing('x') } },
      partial,
      FINANCE_KEY,
      503,
      1,
    ],
    ['the queue refuses the send', { queue: throttledQueue }, partial, FINANCE_KEY, 503, 1],
    [
      'refunds of the same order keep colliding in their reservations (finance retries; nothing is down)',
      { reservations: new AlwaysOutbid() },
      partial,
      FINANCE_KEY,
      503,
      0,
    ],
    ['the key is wrong', {}, partial, 'fin_not-the-finance-key-0123456789abcdef', 401, 0],
    ['the body is not JSON', {}, '{"externalId": "1001"', FINANCE_KEY, 400, 0],
    ['the refund is queued', {}, partial, FINANCE_KEY, 202, 0],
  ];

  it.each(cases)('%s', async (_case, overrides, body, key, status, counted) => {
    // Prepare
    const metrics = countingMetrics();
    const ledger = new MemoryLedger();
    const deps: FinanceDeps = {
      sources,
      ledger,
      reservations: ledger,
      queue: new RecordingQueue(),
      secrets: store(async () => [FINANCE_KEY]),
      keyRef: 'connector/finance-api-key',
      now: () => new Date(),
      observe: observeFinance(silent, metrics),
      ...overrides,
    };
    const raw = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));

    // Act
    const answer = await submitFinanceRefund(
      deps,
      { 'content-type': 'application/json', 'x-api-key': key },
      raw,
    );

    // Assess
    expect(answer.status).toBe(status);
    expect(metrics.counts[METRIC.financeRefundsUnavailable] ?? 0).toBe(counted);
  });
});

import { describe, expect, it } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import { submitFinanceRefund } from '../../shared/finance.ts';
import { ingestWebhook } from '../../shared/ingest.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { adapterFor } from '../../shared/platforms/registry.ts';
import { signGeneric } from '../../shared/platforms/signature.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { RecordingQueue } from '../support/recording-queue.ts';

/**
 * SQS FIFO hands one message group's messages over one at a time, in order, and runs groups side by
 * side. A finance refund names an order by the id the ledger and the platform know (`shopB-1001` for
 * a source with `externalIdPrefix: "shopB-"`), its shop's webhooks by the shop's own (`1001`): the
 * refund must still queue in the group of that order's webhooks, or the worker applies it beside
 * them.
 */

const PROGRAM = '5ad000000000000000000101';
const FINANCE_KEY = 'finance-key-for-tests-0123456789abcdef';
const source = (id: string, extra: Record<string, unknown> = {}) =>
  SourceConfig.parse({
    id,
    platform: 'generic',
    program: PROGRAM,
    rule: '5ad000000000000000000201',
    secretRef: `${id.toUpperCase()}_SECRET`,
    ...extra,
  });
// Two shops of one program, both with an order 1001: the second keeps its ids apart by a prefix.
const sources = new Map(
  [source('shopa'), source('shopb', { externalIdPrefix: 'shopB-' })].map((s) => [s.id, s]),
);
const secrets = new EnvSecretStore({
  SHOPA_SECRET: 'shop-a-webhook-secret',
  SHOPB_SECRET: 'shop-b-webhook-secret',
  FINANCE_API_KEY: FINANCE_KEY,
});

/** The message group a shop's webhook about order `orderId` is queued in. */
async function webhookGroup(sourceId: string, secret: string, payload: Record<string, unknown>) {
  const queue = new RecordingQueue();
  const rawBody = Buffer.from(JSON.stringify(payload));
  const now = Math.floor(Date.now() / 1000);
  const answer = await ingestWebhook(
    { sources, adapterFor, secrets, queue, now: () => new Date() },
    sourceId,
    {
      headers: {
        'content-type': 'application/json',
        'x-connector-timestamp': String(now),
        'x-connector-signature': signGeneric(rawBody, secret, now),
      },
      rawBody,
    },
  );
  expect(answer.status).toBe(202);
  return queue.sent[0]?.groupId;
}

async function financeGroup(ledger: MemoryLedger, body: Record<string, unknown>) {
  const queue = new RecordingQueue();
  const answer = await submitFinanceRefund(
    {
      sources,
      ledger,
      reservations: ledger,
      queue,
      secrets,
      keyRef: 'FINANCE_API_KEY',
      now: () => new Date(),
    },
    { 'x-api-key': FINANCE_KEY },
    Buffer.from(JSON.stringify(body)),
  );
  expect(answer.status).toBe(202);
  return queue.sent[0]?.groupId;
}

const ORDER = {
  type: 'order',
  eventId: 'b-order-1001',
  orderId: '1001',
  amount: '50.00',
  currency: 'EUR',
  clickIds: ['a1b2c3d4e5f60718293a4b5c'],
  buyerIp: '203.0.113.9',
};

describe('a finance refund of a prefixed source’s order', () => {
  it('is queued in the message group of that order’s webhooks', async () => {
    // Prepare: shop B's order 1001 is in the ledger as shopB-1001
    const ledger = new MemoryLedger();
    await ledger.create({
      key: ledgerKey(PROGRAM, 'shopB-1001'),
      program: PROGRAM,
      externalId: 'shopB-1001',
      source: 'shopb',
      state: 'added',
      version: 0,
      originalAmount: 5_000,
      currentAmount: 5_000,
      currency: 'EUR',
      refunds: {},
      createdAt: '2026-05-01T10:00:00.000Z',
      updatedAt: '2026-05-01T10:00:00.000Z',
    });
    const order = await webhookGroup('shopb', 'shop-b-webhook-secret', ORDER);
    const shopRefund = await webhookGroup('shopb', 'shop-b-webhook-secret', {
      type: 'refund',
      eventId: 'b-refund-1',
      orderId: '1001',
      refundId: 'shop-1',
      amount: '10.00',
      currency: 'EUR',
    });

    // Act
    const finance = await financeGroup(ledger, {
      externalId: 'shopB-1001',
      refundId: 'fin-1',
      amountCents: 2_000,
    });

    // Assess: one group for the order, its shop refund and finance's refund
    expect(shopRefund).toBe(order);
    expect(finance).toBe(order);
  });

  it('that the ledger does not know yet is queued in the group the order will come in', async () => {
    // Prepare: nothing in the ledger (the refund comes before its order)
    const ledger = new MemoryLedger();
    const order = await webhookGroup('shopb', 'shop-b-webhook-secret', ORDER);

    // Act: with and without the source named
    const named = await financeGroup(ledger, {
      source: 'shopb',
      externalId: 'shopB-1001',
      refundId: 'fin-1',
      amountCents: 2_000,
      currency: 'EUR',
    });
    const searched = await financeGroup(ledger, {
      externalId: 'shopB-1001',
      refundId: 'fin-2',
      amountCents: 1_000,
      currency: 'EUR',
    });

    // Assess
    expect(named).toBe(order);
    expect(searched).toBe(order);
  });
});

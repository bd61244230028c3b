import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import { alreadyInLedger, backfill } from '../../shared/backfill/backfill.ts';
import { readShop } from '../../shared/backfill/deliveries.ts';
import { parseSources, type SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import type { OrderRecord } from '../../shared/ledger.ts';
import { adapterFor } from '../../shared/platforms/registry.ts';
import { deduplicationId } from '../../shared/queueing.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { shopCredentials } from '../../shared/shops/credentials.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { RecordingQueue } from '../support/recording-queue.ts';

/**
 * The backfill use case on the shop fakes, with the queue and the ledger in memory: what each shop's
 * resources become (the events the webhooks would have given, with their ids), what the ledger
 * already holds, and the dry run.
 */
const CLICK = '0123456789abcdef01234567';
const PROGRAM = 'a'.repeat(24);
let sandbox: RunningSandbox;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
});
afterAll(async () => {
  await sandbox.close();
});
beforeEach(() => sandbox.shops.control.reset());

function sourceFor(
  platform: 'shopify' | 'woocommerce' | 'stripe',
  extra: Record<string, unknown> = {},
): SourceConfig {
  return parseSources(
    JSON.stringify([
      {
        id: platform,
        platform,
        program: PROGRAM,
        rule: 'b'.repeat(24),
        secretRef: 'UNUSED',
        shopApi: { url: sandbox.shops.urls[platform], credentialsRef: 'CREDS' },
        ...extra,
      },
    ]),
    'sources',
  )[0]!;
}

async function run(
  source: SourceConfig,
  options: { ledger?: MemoryLedger; dryRun?: boolean; fromMs?: number } = {},
) {
  const creds = sandbox.shops.credentials;
  const secret =
    source.platform === 'shopify'
      ? creds.shopify
      : source.platform === 'woocommerce'
        ? creds.woocommerce
        : creds.stripe;
  const credentials = await shopCredentials(new EnvSecretStore({ CREDS: JSON.stringify(secret) }), source);
  const now = new Date();
  const read = readShop(
    source,
    credentials,
    { from: new Date(now.getTime() - (options.fromMs ?? 3600_000)), to: now },
    { now },
  );
  const queue = new RecordingQueue();
  const summary = await backfill(
    { adapterFor, queue, ledger: options.ledger, now: () => now },
    source,
    read.deliveries,
    { dryRun: options.dryRun, notices: read.notices },
  );
  return { summary, queue, types: queue.sent.map((s) => `${s.event.type} ${s.event.externalId}`) };
}

const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000).toISOString();

describe('backfill from the shop fakes', () => {
  it('Shopify: a cancelled, refunded order gives its placement, its cancellation and its refund, in that order', async () => {
    const { orderId } = sandbox.shops.control.createOrder('shopify', { clickId: CLICK, at: minutesAgo(30) });
    const { refundId } = sandbox.shops.control.createRefund('shopify', orderId, { at: minutesAgo(20) });
    sandbox.shops.control.cancelOrder('shopify', orderId, { at: minutesAgo(10) });

    const { summary, queue, types } = await run(sourceFor('shopify'));

    expect(types).toEqual([
      `OrderPlaced ${orderId}`,
      `OrderCancelled ${orderId}`,
      `OrderRefunded ${orderId}`,
    ]);
    expect(queue.sent[2]?.event).toMatchObject({ refundId, amount: 19_567, origin: 'shop' });
    expect(queue.sent[0]?.event).toMatchObject({ amount: 58_700, clickIds: [CLICK] });
    expect(summary).toMatchObject({ found: 3, queued: 3, alreadyApplied: 0, skipped: [] });
  });

  it('Shopify with orderTopic orders/paid: an unpaid order is skipped, saying why; a paid one is placed', async () => {
    const unpaid = sandbox.shops.control.createOrder('shopify', {
      clickId: CLICK,
      at: minutesAgo(5),
      financialStatus: 'pending',
    });
    const paid = sandbox.shops.control.createOrder('shopify', {
      clickId: CLICK,
      at: minutesAgo(5),
      financialStatus: 'paid',
    });

    const { summary, types } = await run(sourceFor('shopify', { orderTopic: 'orders/paid' }));

    expect(types).toEqual([`OrderPlaced ${paid.orderId}`]);
    expect(summary.skipped).toEqual([
      {
        label: `order ${unpaid.orderId}`,
        reason: "not paid (pending), and the source's order topic is orders/paid",
      },
    ]);
  });

  it('WooCommerce: the refund carries the id and event id the order.updated webhook would have', async () => {
    const { orderId } = sandbox.shops.control.createOrder('woocommerce', {
      clickId: CLICK,
      at: minutesAgo(30),
    });
    const { refundId } = sandbox.shops.control.createRefund('woocommerce', orderId, { at: minutesAgo(10) });

    const { queue } = await run(sourceFor('woocommerce'));

    const refund = queue.sent.find((s) => s.event.type === 'OrderRefunded')!.event;
    expect(refund).toMatchObject({ refundId, externalId: orderId, amount: 613 });
    expect(refund.eventId).toMatch(new RegExp(`^order\\.updated:${orderId}:[0-9T:-]+:refund:${refundId}$`));
  });

  it('WooCommerce: a cancelled order queues its cancellation, then the order, which the cancellation keeps from being added', async () => {
    const { orderId } = sandbox.shops.control.createOrder('woocommerce', {
      clickId: CLICK,
      at: minutesAgo(30),
    });
    sandbox.shops.control.cancelOrder('woocommerce', orderId, { at: minutesAgo(5) });

    const { summary, types } = await run(sourceFor('woocommerce'));

    expect(types).toEqual([`OrderCancelled ${orderId}`, `OrderPlaced ${orderId}`]);
    expect(summary).toMatchObject({ found: 2, queued: 2, skipped: [] });
  });

  it("Stripe: events keep their own ids, so a backfilled event has the webhook's deduplication id", async () => {
    const { orderId, eventId } = sandbox.shops.control.createOrder('stripe', {
      clickId: CLICK,
      at: minutesAgo(30),
    });

    const { queue } = await run(sourceFor('stripe'));

    expect(queue.sent).toHaveLength(1);
    expect(queue.sent[0]?.event).toMatchObject({ type: 'OrderPlaced', externalId: orderId, eventId });
    expect(queue.sent[0]?.deduplicationId).toBe(deduplicationId(queue.sent[0]!.event));
  });

  it('Stripe: the window is read in eight slices, oldest first, so no more than a slice is held; an event on an edge comes once', async () => {
    // Prepare: an 8-hour window; orders at both ends, on each slice's first second, and between
    const to = new Date(Math.floor(Date.now() / 1000) * 1000);
    const from = new Date(to.getTime() - 8 * 3600_000);
    const fromS = from.getTime() / 1000;
    const step = Math.ceil((8 * 3600 + 1) / 8);
    const seconds = [
      fromS,
      fromS + 600,
      ...[1, 2, 3, 4, 5, 6, 7].map((k) => fromS + k * step),
      to.getTime() / 1000,
    ];
    const eventIds = seconds.map(
      (s) =>
        sandbox.shops.control.createOrder('stripe', { clickId: CLICK, at: new Date(s * 1000).toISOString() })
          .eventId,
    );
    const asked: URLSearchParams[] = [];
    const recording: typeof fetch = (input, init) => {
      asked.push(new URL(String(input)).searchParams);
      return fetch(input, init);
    };
    const source = sourceFor('stripe');
    const credentials = await shopCredentials(
      new EnvSecretStore({ CREDS: JSON.stringify(sandbox.shops.credentials.stripe) }),
      source,
    );

    // Act
    const read = readShop(source, credentials, { from, to }, { now: to, fetch: recording });
    const labels: string[] = [];
    for await (const delivery of read.deliveries) labels.push(delivery.label);

    // Assess: every order once, oldest first
    expect(labels).toEqual(eventIds.map((id) => `event ${String(id)} (checkout.session.completed)`));
    // Each slice asked for every type, half-open, the slices tiling the window
    const slices = [...new Set(asked.map((q) => `${q.get('created[gte]')}-${q.get('created[lt]')}`))];
    expect(slices).toEqual(
      [0, 1, 2, 3, 4, 5, 6, 7].map(
        (k) => `${fromS + k * step}-${Math.min(fromS + (k + 1) * step, fromS + 8 * 3600 + 1)}`,
      ),
    );
    expect(asked).toHaveLength(8 * 4);
    expect(asked.every((q) => !q.has('created[lte]'))).toBe(true);
  });

  it('Stripe: a range older than 30 days is said, and only the last 30 days are read', async () => {
    const { notices } = readShop(
      sourceFor('stripe'),
      {
        platform: 'stripe',
        url: sandbox.shops.urls.stripe,
        secretKey: sandbox.shops.credentials.stripe.secretKey,
      },
      { from: new Date('2026-01-01T00:00:00Z'), to: new Date('2026-03-01T00:00:00Z') },
      { now: new Date('2026-03-01T00:00:00Z') },
    );

    expect(notices).toEqual([
      'Stripe keeps events 30 days: 2026-01-01T00:00:00.000Z to 2026-01-30T00:00:00.000Z cannot be read from the Events API (look those orders up in the Stripe dashboard)',
    ]);
  });

  it('what the ledger holds is not queued again; a dry run queues nothing', async () => {
    const ledger = new MemoryLedger();
    const placed = sandbox.shops.control.createOrder('shopify', {
      clickId: CLICK,
      at: minutesAgo(30),
    }).orderId;
    const fresh = sandbox.shops.control.createOrder('shopify', {
      clickId: CLICK,
      at: minutesAgo(30),
    }).orderId;
    const now = new Date().toISOString();
    await ledger.create({
      key: `${PROGRAM}#${placed}`,
      program: PROGRAM,
      externalId: placed,
      source: 'shopify',
      state: 'added',
      version: 0,
      originalAmount: 58_700,
      currentAmount: 58_700,
      refunds: {},
      createdAt: now,
      updatedAt: now,
    } as OrderRecord);

    const dry = await run(sourceFor('shopify'), { ledger, dryRun: true });
    const real = await run(sourceFor('shopify'), { ledger });

    expect(dry.summary).toMatchObject({ found: 2, alreadyApplied: 1, queued: 1, dryRun: true });
    expect(dry.queue.sent).toEqual([]);
    expect(real.types).toEqual([`OrderPlaced ${fresh}`]);
  });
});

describe('alreadyInLedger', () => {
  const record = (state: OrderRecord['state'], refunds: OrderRecord['refunds'] = {}) =>
    ({ state, refunds }) as OrderRecord;
  const placed = { type: 'OrderPlaced' } as ConnectorEvent;
  const refunded = { type: 'OrderRefunded', refundId: 'r1' } as ConnectorEvent;
  const cancelled = { type: 'OrderCancelled' } as ConnectorEvent;
  const refund = { refundId: 'r1', status: 'applied' } as OrderRecord['refunds'][string];

  it('an order added, skipped or refused is held; one adding, failed or awaiting is not', () => {
    for (const state of ['added', 'skipped', 'refused'] as const)
      expect(alreadyInLedger(record(state), placed)).toBe(true);
    for (const state of ['adding', 'failed', 'awaiting'] as const)
      expect(alreadyInLedger(record(state), placed)).toBe(false);
    expect(alreadyInLedger(undefined, placed)).toBe(false);
  });

  it('a refund or cancellation is held once recorded under its id', () => {
    expect(alreadyInLedger(record('added', { r1: refund }), refunded)).toBe(true);
    expect(alreadyInLedger(record('added'), refunded)).toBe(false);
    expect(alreadyInLedger(record('added'), cancelled)).toBe(false);
  });
});

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { nodeHttpFetch } from '../../shared/adapters/node-http-transport.ts';
import type { OrderRecord } from '../../shared/ledger.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { Ledger } from '../../shared/ports.ts';
import { sandboxConversions } from '../support/sandbox.ts';
import { until } from '../support/until.ts';
import {
  genericWebhook,
  post,
  sampleFixture,
  shopifyWebhook,
  stripeWebhook,
  wooWebhook,
} from '../support/webhooks.ts';

const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const IP = '203.0.113.7';

/** The Shopify docs sample as a shop that keeps click ids would send it. */
function shopifyOrder(options: { click?: boolean; id?: string } = {}): string {
  const order = JSON.parse(sampleFixture('shopify/order_2026-07_docs_example.json')) as Record<
    string,
    unknown
  >;
  if (options.click ?? true) {
    order['note_attributes'] = [...(order['note_attributes'] as unknown[]), { name: 'aecid', value: CLICK }];
    order['browser_ip'] = IP;
    order['client_details'] = { ...(order['client_details'] as object), browser_ip: IP };
  }
  let text = JSON.stringify(order);
  // Ids over 2^53 must survive as exact strings: put one in as raw JSON digits.
  if (options.id) text = text.replace('"id":450789469', `"id":${options.id}`);
  return text;
}

let stack: LocalStack;
let crashNextAddedWrite = false;

beforeAll(async () => {
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    leaseMs: 1_500,
    visibilityBaseSeconds: 1,
    emulators: { visibilityTimeoutSeconds: 5 },
    wrapLedger: (ledger: Ledger): Ledger => ({
      get: (key) => ledger.get(key),
      create: (record) => ledger.create(record),
      list: (program) => ledger.list(program),
      update: async (record: OrderRecord) => {
        if (crashNextAddedWrite && record.state === 'added') {
          crashNextAddedWrite = false;
          // The worker dies after the platform answered, before the ledger write.
          throw new Error('worker killed');
        }
        return ledger.update(record);
      },
    }),
  });
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  stack.sandbox?.control.reset();
});

const webhookUrl = (source: string) => `${stack.url}/webhooks/${source}`;
const conversions = (externalId: string) => sandboxConversions(stack, externalId);

describe('orders become exactly one conversion', () => {
  it('maps the signed Shopify sample with a click id to one tracking conversion', async () => {
    const signed = shopifyWebhook(
      shopifyOrder(),
      stack.secrets['SHOPIFY_WEBHOOK_SECRET'] ?? '',
      'orders/create',
    );

    const answer = await post(webhookUrl('shopify'), signed);
    await stack.waitForIdle();

    expect(answer.status).toBe(202);
    const [conversion, ...others] = conversions('450789469');
    expect(others).toHaveLength(0);
    expect(conversion).toMatchObject({
      kind: 'tracking',
      externalId: '450789469',
      // 3 × 199.00 minus 10.00 of discounts; tax (11.94) and shipping (0.00) excluded.
      amount: 58_700,
      currency: 'USD',
      cids: [CLICK],
      ip: IP,
      voucher: 'TENOFF',
      status: 'pending',
    });
    const record = await stack.ledger.get(ledgerKey(conversion?.program ?? '', '450789469'));
    expect(record).toMatchObject({ state: 'added', originalAmount: 58_700 });
    // One platform call for the order: the add. Its answer carries no id (the platform does not
    // document one), and nothing needs the id yet: a refund or the accept job looks it up then.
    const calls = stack.sandbox?.control.calls() ?? {};
    expect(calls['/advertiser/conversions.add']?.total).toBe(1);
    expect(calls['/advertiser/conversions.info']).toBeUndefined();
  });

  it('records the unmodified sample (no click id) as skipped, with no conversion', async () => {
    const signed = shopifyWebhook(
      shopifyOrder({ click: false, id: '450789470' }),
      stack.secrets['SHOPIFY_WEBHOOK_SECRET'] ?? '',
      'orders/create',
    );

    expect((await post(webhookUrl('shopify'), signed)).status).toBe(202);
    await stack.waitForIdle();

    expect(conversions('450789470')).toHaveLength(0);
    const program = stack.sources.get('shopify')?.program ?? '';
    expect(await stack.ledger.get(ledgerKey(program, '450789470'))).toMatchObject({ state: 'skipped' });
  });

  it('keeps an order id over 2^53 exact', async () => {
    const id = '9007199254740993123';
    const signed = shopifyWebhook(
      shopifyOrder({ id }),
      stack.secrets['SHOPIFY_WEBHOOK_SECRET'] ?? '',
      'orders/create',
    );

    await post(webhookUrl('shopify'), signed);
    await stack.waitForIdle();

    expect(conversions(id)).toHaveLength(1);
  });

  it('gives one conversion for the same order delivered 3 times, then 3 times concurrently', async () => {
    const secret = stack.secrets['SHOPIFY_WEBHOOK_SECRET'] ?? '';
    const body = shopifyOrder({ id: '5001' });
    // Distinct event ids: SQS's 5-minute deduplication does not help, only the ledger does.
    for (let i = 0; i < 3; i++)
      await post(webhookUrl('shopify'), shopifyWebhook(body, secret, 'orders/create'));
    await stack.waitForIdle();
    const concurrent = shopifyOrder({ id: '5002' });
    await Promise.all(
      [1, 2, 3].map(() => post(webhookUrl('shopify'), shopifyWebhook(concurrent, secret, 'orders/create'))),
    );
    await stack.waitForIdle();

    expect(conversions('5001')).toHaveLength(1);
    expect(conversions('5002')).toHaveLength(1);
  });

  it('gives one conversion when the worker dies between the add and the ledger write', async () => {
    crashNextAddedWrite = true;
    const signed = shopifyWebhook(
      shopifyOrder({ id: '6001' }),
      stack.secrets['SHOPIFY_WEBHOOK_SECRET'] ?? '',
      'orders/create',
    );

    await post(webhookUrl('shopify'), signed);
    await stack.waitForIdle();

    expect(crashNextAddedWrite).toBe(false);
    const found = conversions('6001');
    expect(found).toHaveLength(1);
    const record = await stack.ledger.get(ledgerKey(found[0]?.program ?? '', '6001'));
    expect(record).toMatchObject({ state: 'added', conversionId: found[0]?.id });
  });

  it('answers 401 to a bad signature and queues nothing', async () => {
    const signed = shopifyWebhook(shopifyOrder({ id: '7001' }), 'not-the-secret', 'orders/create');

    const answer = await post(webhookUrl('shopify'), signed);
    await stack.waitForIdle();

    expect(answer.status).toBe(401);
    expect(conversions('7001')).toHaveLength(0);
    expect(stack.emulators.counts(stack.emulators.queueName)).toEqual({ ready: 0, inflight: 0, delayed: 0 });
  });

  it('answers 400 naming the field for a malformed order', async () => {
    const order = JSON.parse(shopifyOrder({ id: '7002' })) as { line_items: Array<Record<string, unknown>> };
    const line = order.line_items[0] as Record<string, unknown>;
    line['price'] = 'twelve';
    line['price_set'] = { shop_money: { amount: 'twelve', currency_code: 'USD' } };
    const signed = shopifyWebhook(
      JSON.stringify(order),
      stack.secrets['SHOPIFY_WEBHOOK_SECRET'] ?? '',
      'orders/create',
    );

    const answer = await post(webhookUrl('shopify'), signed);

    expect(answer.status).toBe(400);
    expect(String(answer.json['field'])).toContain('line_items.0.price');
  });

  it('answers 404 for an unknown source and 413 for a body over 1 MiB', async () => {
    const big = shopifyWebhook(
      'x'.repeat(1024 * 1024 + 10),
      stack.secrets['SHOPIFY_WEBHOOK_SECRET'] ?? '',
      'orders/create',
    );

    expect((await post(webhookUrl('nope'), big)).status).toBe(404);
    expect((await post(webhookUrl('shopify'), big)).status).toBe(413);
  });

  it('maps the WooCommerce, Stripe and generic samples to conversions', async () => {
    const woo = JSON.parse(sampleFixture('woocommerce/order_v3_docs_example.json')) as Record<
      string,
      unknown
    >;
    woo['meta_data'] = [{ id: 1, key: 'aecid', value: CLICK }];
    woo['customer_ip_address'] = IP;
    const session = JSON.parse(
      sampleFixture('stripe/checkout_session_object_stripe_mock_fixture.json'),
    ) as Record<string, unknown>;
    session['payment_status'] = 'paid';
    // The stripe-mock fixture leaves the amounts null; a completed session has them.
    session['currency'] = 'eur';
    session['amount_total'] = 6_050;
    session['total_details'] = { amount_discount: 0, amount_shipping: 500, amount_tax: 1_050 };
    session['metadata'] = { aecid: CLICK, ip: IP, order_id: 'stripe-order-1' };
    const stripeEvent = JSON.stringify({
      id: 'evt_test_1',
      object: 'event',
      type: 'checkout.session.completed',
      data: { object: session },
    });
    const generic = JSON.stringify({
      type: 'order',
      orderId: 'generic-1',
      amount: '49.90',
      currency: 'EUR',
      clickIds: [CLICK],
      buyerIp: IP,
    });

    const answers = await Promise.all([
      post(
        webhookUrl('woocommerce'),
        wooWebhook(JSON.stringify(woo), stack.secrets['WOOCOMMERCE_WEBHOOK_SECRET'] ?? '', 'order.created'),
      ),
      post(webhookUrl('stripe'), stripeWebhook(stripeEvent, stack.secrets['STRIPE_WEBHOOK_SECRET'] ?? '')),
      post(webhookUrl('generic'), genericWebhook(generic, stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '')),
    ]);
    await stack.waitForIdle();

    expect(answers.map((a) => a.status)).toEqual([202, 202, 202]);
    expect(conversions(String(woo['id']))).toHaveLength(1);
    expect(conversions('stripe-order-1')).toMatchObject([{ amount: 4_500, currency: 'EUR' }]);
    expect(conversions('generic-1')).toMatchObject([{ amount: 4_990, currency: 'EUR', kind: 'tracking' }]);
  });

  it('answers the unsigned WooCommerce ping with 200 and queues nothing', async () => {
    const res = await fetch(webhookUrl('woocommerce'), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'webhook_id=42',
    });

    expect(res.status).toBe(200);
  });
});

describe('an add the platform is still recording when the client gives up', () => {
  const ADD = '/advertiser/conversions.add';
  let slow: LocalStack;
  /** Conversion Adds the worker's client sent, answered or not. */
  let addsSent = 0;

  beforeAll(async () => {
    slow = await startLocalStack({
      port: 0,
      // The platform takes 1.5 s to record an add; the client gives up after 1 s. The platform
      // still records the add it was sent (as any server does with a request already in progress).
      sandbox: { port: 0, faults: { latencyMs: 1_500, routes: [ADD] } },
      client: {
        timeoutMs: 1_000,
        fetch: (url, init) => {
          if (url.pathname === ADD) addsSent += 1;
          return nodeHttpFetch(url, init);
        },
      },
      leaseMs: 60_000,
    });
  });
  afterAll(async () => {
    await slow?.close();
  });

  it('gives one conversion for one order, not one per timed-out add', async () => {
    // Prepare
    const signed = shopifyWebhook(
      shopifyOrder({ id: '7001' }),
      slow.secrets['SHOPIFY_WEBHOOK_SECRET'] ?? '',
      'orders/create',
    );

    // Act: the worker keeps its lease for the settle period (5 s here), then looks the order up.
    expect((await post(`${slow.url}/webhooks/shopify`, signed)).status).toBe(202);
    await slow.waitForIdle(60_000);
    // The platform records an add the client gave up on when it answers it, which may be after the
    // queue went idle: once it has answered every add sent, no conversion can appear any more.
    expect(addsSent).toBeGreaterThan(0);
    await until(
      () => slow.sandbox?.control.calls()[ADD]?.total ?? 0,
      (answered) => answered === addsSent,
      'the platform to answer every add the worker sent',
    );

    // Assess
    const found = sandboxConversions(slow, '7001');
    expect(found).toHaveLength(1);
    const record = await slow.ledger.get(ledgerKey(found[0]?.program ?? '', '7001'));
    expect(record).toMatchObject({ state: 'added', conversionId: found[0]?.id });
  }, 90_000);
});

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  shopifySubscriptions,
  stripeSubscriptions,
  wooCommerceSubscriptions,
} from '../../cli/shops/subscriptions.ts';
import { type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import { ConfigurationError, PermanentError } from '../../shared/errors.ts';
import { ShopifyClient } from '../../shared/shops/shopify.ts';
import { StripeClient } from '../../shared/shops/stripe.ts';
import { WooCommerceClient } from '../../shared/shops/woocommerce.ts';

/**
 * The webhook subscription APIs of the sandbox's shop fakes (Shopify `webhooks.json`, WooCommerce
 * `webhooks`, Stripe `webhook_endpoints`), read and written by the connector's own clients: the
 * documented shapes, auth, pages, and the errors the real APIs give.
 */

let sandbox: RunningSandbox;
const noWait = { sleep: async () => {}, random: () => 0 };

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, now: () => Date.parse('2026-11-20T12:00:00Z') });
});
afterAll(async () => {
  await sandbox.close();
});
beforeEach(() => {
  sandbox.shops.control.reset();
});

const shopify = (accessToken = sandbox.shops.credentials.shopify.accessToken) =>
  new ShopifyClient({ url: sandbox.shops.urls.shopify, accessToken }, noWait);
const woo = () =>
  new WooCommerceClient(
    { url: sandbox.shops.urls.woocommerce, ...sandbox.shops.credentials.woocommerce },
    noWait,
  );
const stripe = () =>
  new StripeClient({ url: sandbox.shops.urls.stripe, ...sandbox.shops.credentials.stripe }, noWait);

describe('Shopify webhooks.json fake', () => {
  it('creates a subscription with the documented fields and lists it, page by page through Link', async () => {
    // Prepare
    const topics = ['orders/create', 'orders/paid', 'refunds/create', 'orders/cancelled'];
    // Act
    const created = [];
    for (const topic of topics) {
      created.push(
        await shopify().post('webhooks.json', {
          webhook: { topic, address: 'https://hooks.example/webhooks/shop-a', format: 'json' },
        }),
      );
    }
    const pages: unknown[][] = [];
    for await (const page of shopify().list('webhooks.json', 'webhooks', { limit: '3' })) pages.push(page);
    // Assess
    const [first] = created;
    expect(first?.status).toBe(201);
    expect(first?.json).toHaveProperty('webhook');
    expect((first?.json as { webhook: unknown } | undefined)?.webhook).toMatchObject({
      topic: 'orders/create',
      address: 'https://hooks.example/webhooks/shop-a',
      format: 'json',
      api_version: '2025-07',
      fields: [],
      metafield_namespaces: [],
    });
    expect(pages.map((p) => p.length)).toEqual([3, 1]);
    expect(pages.flat().map((w) => (w as { topic: string }).topic)).toEqual(topics);
  });

  it('refuses a second subscription of a topic to one address, and an unknown topic, with 422', async () => {
    // Prepare
    const body = { webhook: { topic: 'orders/create', address: 'https://hooks.example/a', format: 'json' } };
    await shopify().post('webhooks.json', body);
    // Act
    const again = shopify().post('webhooks.json', body);
    const unknown = shopify().post('webhooks.json', { webhook: { ...body.webhook, topic: 'orders/nope' } });
    // Assess
    await expect(again).rejects.toThrow(/422.*address.*for this topic has already been taken/);
    await expect(unknown).rejects.toBeInstanceOf(PermanentError);
  });

  it('refuses a wrong access token with 401', async () => {
    await expect(shopify('shpat_wrong').get('webhooks.json')).rejects.toBeInstanceOf(ConfigurationError);
  });
});

describe('WooCommerce webhooks fake', () => {
  it('creates, lists (every status by default) and re-enables a webhook', async () => {
    // Prepare
    const api = wooCommerceSubscriptions(woo());
    const answer = await woo().send('POST', 'webhooks', {
      name: 'orders',
      topic: 'order.created',
      delivery_url: 'https://hooks.example/webhooks/woo',
      secret: 'the-secret',
    });
    const id = String((answer.json as { id: number }).id);
    sandbox.shops.control.breakSubscription('woocommerce', 'order.created');
    // Act
    const disabled = await api.list();
    const put = await woo().send('PUT', `webhooks/${id}`, { status: 'active' });
    const active = await woo().get('webhooks', { status: 'active' });
    // Assess
    expect(answer.status).toBe(201);
    expect(answer.json).toMatchObject({
      name: 'orders',
      status: 'active',
      topic: 'order.created',
      resource: 'order',
      event: 'created',
      delivery_url: 'https://hooks.example/webhooks/woo',
    });
    expect(answer.json).not.toHaveProperty('secret');
    expect(disabled).toEqual([
      { id, address: 'https://hooks.example/webhooks/woo', topics: ['order.created'], status: 'disabled' },
    ]);
    expect(put.json).toMatchObject({ id: Number(id), status: 'active' });
    expect(active.json).toHaveLength(1);
    expect(active.headers.get('x-wp-total')).toBe('1');
  });

  it('names the missing parameter of a create, and answers 404 for an unknown webhook', async () => {
    await expect(woo().send('POST', 'webhooks', { topic: 'order.created' })).rejects.toThrow(/delivery_url/);
    await expect(woo().send('PUT', 'webhooks/999', { status: 'active' })).rejects.toThrow(/404/);
  });
});

describe('Stripe webhook_endpoints fake', () => {
  it('returns the signing secret at creation only, and updates events and status', async () => {
    // Prepare
    const form = new URLSearchParams();
    form.append('url', 'https://hooks.example/webhooks/stripe');
    form.append('enabled_events[]', 'checkout.session.completed');
    form.append('enabled_events[]', 'refund.created');
    // Act
    const created = await stripe().post('webhook_endpoints', form);
    const id = (created.json as { id: string }).id;
    const update = new URLSearchParams([
      ['enabled_events[]', 'refund.created'],
      ['enabled_events[]', 'charge.refunded'],
      ['disabled', 'true'],
    ]);
    const updated = await stripe().post(`webhook_endpoints/${id}`, update);
    const listed = await stripeSubscriptions(stripe()).list();
    // Assess
    expect(created.json).toMatchObject({
      object: 'webhook_endpoint',
      url: 'https://hooks.example/webhooks/stripe',
      status: 'enabled',
      enabled_events: ['checkout.session.completed', 'refund.created'],
      livemode: false,
    });
    expect((created.json as { secret: string }).secret).toMatch(/^whsec_/);
    expect(updated.json).not.toHaveProperty('secret');
    expect(listed).toEqual([
      {
        id,
        address: 'https://hooks.example/webhooks/stripe',
        topics: ['refund.created', 'charge.refunded'],
        status: 'disabled',
      },
    ]);
  });

  it('pages with starting_after while has_more', async () => {
    // Prepare
    for (const n of [1, 2, 3]) {
      sandbox.shops.control.seedSubscriptions('stripe', {
        address: `https://hooks.example/${n}`,
        topics: ['charge.refunded'],
      });
    }
    // Act
    const pages: unknown[][] = [];
    for await (const page of stripe().list('webhook_endpoints', { limit: '2' })) pages.push(page);
    // Assess
    expect(pages.map((p) => p.length)).toEqual([2, 1]);
  });

  it('refuses a create without url or events, naming the parameter', async () => {
    const noEvents = new URLSearchParams([['url', 'https://hooks.example/x']]);
    await expect(stripe().post('webhook_endpoints', noEvents)).rejects.toThrow(/enabled_events/);
  });
});

describe('subscription helpers over the fakes', () => {
  it('lists what seedSubscriptions made for each platform, as active', async () => {
    // Prepare
    const address = 'https://hooks.example/webhooks/x';
    sandbox.shops.control.seedSubscriptions('shopify', { address, topics: ['orders/create'] });
    sandbox.shops.control.seedSubscriptions('woocommerce', { address, topics: ['order.created'] });
    sandbox.shops.control.seedSubscriptions('stripe', { address, topics: ['charge.refunded'] });
    // Act
    const lists = await Promise.all([
      shopifySubscriptions(shopify()).list(),
      wooCommerceSubscriptions(woo()).list(),
      stripeSubscriptions(stripe()).list(),
    ]);
    // Assess
    expect(lists.map((l) => l.map((s) => [s.address, s.topics, s.status]))).toEqual([
      [[address, ['orders/create'], 'active']],
      [[address, ['order.created'], 'active']],
      [[address, ['charge.refunded'], 'enabled']],
    ]);
  });
});

describe('subscription control routes', () => {
  it('seed healthy subscriptions and break them over HTTP, as the docs show with curl', async () => {
    // Prepare
    const control = `${sandbox.url}/_sandbox/shops/woocommerce/subscriptions`;
    const post = (url: string, body: unknown) =>
      fetch(url, { method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(5000) });
    // Act
    const seeded = await post(control, { address: 'https://hooks.example/w', topics: ['order.updated'] });
    const broken = await post(`${control}/break`, { topic: 'order.updated' });
    const bad = await post(`${control}/break`, { topik: 'order.updated' });
    // Assess
    expect(seeded.status).toBe(201);
    expect(await seeded.json()).toEqual({ ids: [expect.any(String)] });
    expect(await broken.json()).toEqual({ broken: 1 });
    expect(bad.status).toBe(400);
    expect(await wooCommerceSubscriptions(woo()).list()).toEqual([
      expect.objectContaining({ topics: ['order.updated'], status: 'disabled' }),
    ]);
  });
});

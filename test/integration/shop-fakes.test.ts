import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import { ConfigurationError } from '../../shared/errors.ts';
import { ShopifyClient } from '../../shared/shops/shopify.ts';
import { StripeClient } from '../../shared/shops/stripe.ts';
import { WooCommerceClient } from '../../shared/shops/woocommerce.ts';

/**
 * The sandbox's fakes of the shop APIs, read by the connector's own shop clients: auth, the
 * documented pagination of each platform, filters by time, Retry-After on a 429, and the control
 * routes that place orders and refunds.
 */

let sandbox: RunningSandbox;
let now = Date.parse('2026-11-20T12:00:00Z');
const noWait = { sleep: async () => {}, random: () => 0 };

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, now: () => now });
});
afterAll(async () => {
  await sandbox.close();
});
beforeEach(() => {
  sandbox.shops.control.reset();
  now = Date.parse('2026-11-20T12:00:00Z');
});

async function all(pages: AsyncIterable<unknown[]>): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  for await (const page of pages) items.push(...(page as Record<string, unknown>[]));
  return items;
}

function shopify(accessToken = sandbox.shops.credentials.shopify.accessToken): ShopifyClient {
  return new ShopifyClient({ url: sandbox.shops.urls.shopify, accessToken }, noWait);
}

function woo(): WooCommerceClient {
  return new WooCommerceClient(
    { url: sandbox.shops.urls.woocommerce, ...sandbox.shops.credentials.woocommerce },
    noWait,
  );
}

function stripe(): StripeClient {
  return new StripeClient({ url: sandbox.shops.urls.stripe, ...sandbox.shops.credentials.stripe }, noWait);
}

describe('Shopify fake', () => {
  it('lists the orders updated in a period, page by page through Link', async () => {
    // Arrange: five orders an hour apart, from 10:00
    const ids = [0, 1, 2, 3, 4].map(
      (h) =>
        sandbox.shops.control.createOrder('shopify', {
          clickId: 'a'.repeat(24),
          at: new Date(Date.parse('2026-11-20T10:00:00Z') + h * 3600_000).toISOString(),
        }).orderId,
    );

    // Act: 11:00 to 13:00, two per page
    const orders = await all(
      shopify().list('orders.json', 'orders', {
        status: 'any',
        updated_at_min: '2026-11-20T11:00:00Z',
        updated_at_max: '2026-11-20T13:00:00Z',
        limit: '2',
      }),
    );

    // Assert
    expect(orders.map((o) => String(o['id']))).toEqual(ids.slice(1, 4));
    expect(orders[0]?.['note_attributes']).toContainEqual({ name: 'aecid', value: 'a'.repeat(24) });
    expect(sandbox.shops.control.calls().shopify).toBe(2);
  });

  it("lists a refund within its order, and moves the order's updated_at", async () => {
    const { orderId } = sandbox.shops.control.createOrder('shopify', { at: '2026-11-01T00:00:00Z' });
    const { refundId } = sandbox.shops.control.createRefund('shopify', orderId, {
      at: '2026-11-20T11:30:00Z',
    });

    const orders = await all(
      shopify().list('orders.json', 'orders', { status: 'any', updated_at_min: '2026-11-20T11:00:00Z' }),
    );

    expect(orders).toHaveLength(1);
    const refunds = (orders[0]?.['refunds'] ?? []) as Array<Record<string, unknown>>;
    expect(refunds.map((r) => String(r['id']))).toEqual([refundId]);
  });

  it('refuses a wrong access token as the key to check', async () => {
    const error = await all(shopify('shpat_wrong').list('orders.json', 'orders', {})).catch(
      (e: unknown) => e,
    );

    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain('check the key and its scopes');
  });

  it('answers a forced burst with 429 and Retry-After, which the client waits out', async () => {
    sandbox.shops.control.createOrder('shopify');
    sandbox.shops.control.burst429('shopify', 2, 1);
    const waits: number[] = [];
    const client = new ShopifyClient(
      { url: sandbox.shops.urls.shopify, ...sandbox.shops.credentials.shopify },
      { sleep: async (ms) => void waits.push(ms), random: () => 0 },
    );

    const orders = await all(client.list('orders.json', 'orders', { status: 'any' }));

    expect(orders).toHaveLength(1);
    expect(waits).toEqual([1000, 1000]);
  });
});

describe('WooCommerce fake', () => {
  it("lists orders modified in a period over numbered pages, and each order's refunds", async () => {
    const ids = [0, 1, 2].map(
      (h) =>
        sandbox.shops.control.createOrder('woocommerce', {
          at: new Date(Date.parse('2026-11-20T10:00:00Z') + h * 3600_000).toISOString(),
        }).orderId,
    );
    const refund = sandbox.shops.control.createRefund('woocommerce', ids[0]!, { at: '2026-11-20T11:30:00Z' });

    const orders = await all(
      woo().list('orders', {
        modified_after: '2026-11-20T10:30:00',
        modified_before: '2026-11-20T13:00:00',
        dates_are_gmt: 'true',
        per_page: '1',
      }),
    );
    const refunds = await all(woo().list(`orders/${ids[0]}/refunds`, {}));

    expect(orders.map((o) => String(o['id'])).sort()).toEqual([...ids].sort());
    expect(refunds.map((r) => String(r['id']))).toEqual([refund.refundId]);
    expect(sandbox.shops.control.calls().woocommerce).toBe(4);
  });
});

describe('Stripe fake', () => {
  it('lists the events of the given types in a period, newest first, paged by starting_after', async () => {
    const placed = [0, 1, 2].map((h) =>
      sandbox.shops.control.createOrder('stripe', {
        at: new Date(Date.parse('2026-11-20T09:00:00Z') + h * 3600_000).toISOString(),
      }),
    );
    sandbox.shops.control.createRefund('stripe', placed[0]!.orderId, { at: '2026-11-20T11:30:00Z' });

    const events = await all(
      stripe().list('events', {
        'types[]': 'checkout.session.completed',
        'created[gte]': String(Date.parse('2026-11-20T10:00:00Z') / 1000),
        limit: '1',
      }),
    );

    expect(events.map((e) => e['id'])).toEqual([placed[2]!.eventId, placed[1]!.eventId]);
  });

  it('keeps events 30 days, as Stripe does', async () => {
    sandbox.shops.control.createOrder('stripe', { at: '2026-10-01T00:00:00Z' });
    const recent = sandbox.shops.control.createOrder('stripe', { at: '2026-11-19T00:00:00Z' });

    const events = await all(stripe().list('events', {}));

    expect(events.map((e) => e['id'])).toEqual([recent.eventId]);
  });
});

describe('shop fakes control routes', () => {
  it('places an order and its refund over HTTP, naming a wrong field', async () => {
    const post = (path: string, body: unknown) =>
      fetch(`${sandbox.url}/_sandbox/shops/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });

    const order = await post('woocommerce/orders', { clickId: 'b'.repeat(24) });
    const { orderId } = (await order.json()) as { orderId: string };
    const refund = await post(`woocommerce/orders/${orderId}/refunds`, {});
    const wrong = await post('stripe/orders', { click: 'x' });
    const unknown = await post('magento/orders', {});

    expect(order.status).toBe(201);
    expect(refund.status).toBe(201);
    expect(wrong.status).toBe(400);
    expect(((await wrong.json()) as { message: string }).message).toBe('click: click is not allowed here');
    expect(unknown.status).toBe(400);
  });
});

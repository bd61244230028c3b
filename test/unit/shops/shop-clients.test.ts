import { describe, expect, it } from 'vitest';
import { parseSources } from '../../../shared/config/sources.ts';
import { ConfigurationError, PermanentError, TransientError } from '../../../shared/errors.ts';
import { EnvSecretStore } from '../../../shared/secrets.ts';
import { shopCredentials } from '../../../shared/shops/credentials.ts';
import { ShopifyClient } from '../../../shared/shops/shopify.ts';
import { StripeClient } from '../../../shared/shops/stripe.ts';
import { WooCommerceClient } from '../../../shared/shops/woocommerce.ts';

/**
 * The shop API clients with a scripted `fetch`: auth headers, the three pagination styles, bounded
 * retries honouring Retry-After, and every failure classified. (Against the fakes of the sandbox:
 * test/integration/shop-fakes.test.ts.)
 */

interface Seen {
  readonly url: string;
  readonly headers: Headers;
}

function scripted(answers: Array<Response | Error>): { fetch: typeof fetch; seen: Seen[] } {
  const seen: Seen[] = [];
  const fetchFn = (async (input: string | URL | Request, init?: RequestInit) => {
    seen.push({ url: String(input), headers: new Headers(init?.headers) });
    const next = answers.shift();
    if (next === undefined) throw new Error('no more scripted answers');
    if (next instanceof Error) throw next;
    return next;
  }) as typeof fetch;
  return { fetch: fetchFn, seen };
}

function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

const noWait = { sleep: async () => {}, random: () => 0.5 };

async function all<T>(pages: AsyncIterable<readonly T[]>): Promise<T[]> {
  const items: T[] = [];
  for await (const page of pages) items.push(...page);
  return items;
}

describe('shop API credentials', () => {
  const source = (platform: string, ref = 'SHOP_CREDS') =>
    parseSources(
      JSON.stringify([
        {
          id: 'shop',
          platform,
          program: 'a'.repeat(24),
          rule: 'b'.repeat(24),
          secretRef: 'S',
          shopApi: { url: 'https://shop.example', credentialsRef: ref },
        },
      ]),
      'sources',
    )[0]!;

  it('reads each platform shape from the secret store', async () => {
    // Arrange
    const secrets = new EnvSecretStore({
      SHOPIFY: '{"accessToken":"shpat_1"}',
      WOO: '{"consumerKey":"ck_1","consumerSecret":"cs_1"}',
      STRIPE: '{"secretKey":"rk_test_1"}',
    });

    // Act / Assert
    expect(await shopCredentials(secrets, source('shopify', 'SHOPIFY'))).toEqual({
      platform: 'shopify',
      url: 'https://shop.example',
      accessToken: 'shpat_1',
    });
    expect(await shopCredentials(secrets, source('woocommerce', 'WOO'))).toMatchObject({
      platform: 'woocommerce',
      consumerKey: 'ck_1',
      consumerSecret: 'cs_1',
    });
    expect(await shopCredentials(secrets, source('stripe', 'STRIPE'))).toMatchObject({
      platform: 'stripe',
      secretKey: 'rk_test_1',
    });
  });

  it('names the field that is wrong, never the value', async () => {
    const secrets = new EnvSecretStore({ SHOP_CREDS: '{"consumerKey":"ck_secret_value"}' });

    const error = await shopCredentials(secrets, source('woocommerce')).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toBe(
      'shop API credentials SHOP_CREDS of source shop: consumerSecret: Invalid input',
    );
    expect((error as Error).message).not.toContain('ck_secret_value');
  });

  it('refuses a value that is not JSON without echoing it', async () => {
    const secrets = new EnvSecretStore({ SHOP_CREDS: 'shpat_plain_token' });

    const error = await shopCredentials(secrets, source('shopify')).catch((e: unknown) => e);

    expect((error as Error).message).toBe(
      'shop API credentials SHOP_CREDS of source shop: not a JSON object ({"accessToken": "…"})',
    );
  });

  it('says a source without shopApi has no credentials', async () => {
    const [plain] = parseSources(
      JSON.stringify([
        { id: 'x', platform: 'shopify', program: 'a'.repeat(24), rule: 'b'.repeat(24), secretRef: 'S' },
      ]),
      'sources',
    );

    await expect(shopCredentials(new EnvSecretStore({}), plain!)).rejects.toThrow(
      'source x has no shopApi (url and credentialsRef): see docs/backfill.md',
    );
  });

  it('refuses shopApi on a generic source', () => {
    const json = JSON.stringify([
      {
        id: 'g',
        platform: 'generic',
        program: 'a'.repeat(24),
        rule: 'b'.repeat(24),
        secretRef: 'S',
        shopApi: { url: 'https://x.example', credentialsRef: 'C' },
      },
    ]);

    expect(() => parseSources(json, 'sources')).toThrow(
      'sources: 0.shopApi: a generic source has no shop API to read: backfill it with --file',
    );
  });
});

describe('Shopify Admin client', () => {
  it('sends the access token and follows Link rel="next" pages', async () => {
    // Arrange
    const next = 'https://s.example/admin/api/2025-07/orders.json?limit=1&page_info=abc';
    const { fetch, seen } = scripted([
      json({ orders: [{ id: 1 }] }, 200, { link: `<${next}>; rel="next"` }),
      json({ orders: [{ id: 2 }] }, 200, {
        link: '<https://s.example/admin/api/2025-07/orders.json?limit=1&page_info=zz>; rel="previous"',
      }),
    ]);
    const client = new ShopifyClient(
      { url: 'https://s.example/', accessToken: 'shpat_x' },
      { fetch, ...noWait },
    );

    // Act
    const orders = await all(client.list('orders.json', 'orders', { status: 'any', limit: '1' }));

    // Assert
    expect(orders).toEqual([{ id: 1 }, { id: 2 }]);
    expect(seen.map((s) => s.url)).toEqual([
      'https://s.example/admin/api/2025-07/orders.json?status=any&limit=1',
      next,
    ]);
    expect(seen[0]?.headers.get('x-shopify-access-token')).toBe('shpat_x');
  });

  it('waits what Retry-After says on a 429, then goes on', async () => {
    const waits: number[] = [];
    const { fetch } = scripted([
      json({ errors: 'Exceeded 2 calls per second' }, 429, { 'retry-after': '2.0' }),
      json({ orders: [] }),
    ]);
    const client = new ShopifyClient(
      { url: 'https://s.example', accessToken: 't' },
      { fetch, random: () => 0.5, sleep: async (ms) => void waits.push(ms) },
    );

    expect(await all(client.list('orders.json', 'orders', {}))).toEqual([]);
    expect(waits).toEqual([2000]);
  });

  it.each(['-1', '-2.0', '+2', 'later 5'])(
    'ignores Retry-After %s on a 429 and backs off instead (Date.parse reads -1 as a date in 2001)',
    async (value) => {
      const waits: number[] = [];
      const { fetch } = scripted([
        json({ errors: 'Exceeded 2 calls per second' }, 429, { 'retry-after': value }),
        json({ orders: [] }),
      ]);
      const client = new ShopifyClient(
        { url: 'https://s.example', accessToken: 't' },
        { fetch, random: () => 0.5, sleep: async (ms) => void waits.push(ms) },
      );

      expect(await all(client.list('orders.json', 'orders', {}))).toEqual([]);
      // Full jitter at 0.5 of the first 500 ms ceiling, not a 0 ms wait.
      expect(waits).toEqual([250]);
    },
  );

  it('waits until the HTTP date a Retry-After names', async () => {
    const waits: number[] = [];
    const at = new Date(Date.now() + 30_000).toUTCString();
    const { fetch } = scripted([json({}, 429, { 'retry-after': at }), json({ orders: [] })]);
    const client = new ShopifyClient(
      { url: 'https://s.example', accessToken: 't' },
      { fetch, random: () => 0.5, sleep: async (ms) => void waits.push(ms) },
    );

    await all(client.list('orders.json', 'orders', {}));

    // Whole seconds in the header: between 29 and 30 s from now.
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThan(28_000);
    expect(waits[0]).toBeLessThanOrEqual(30_000);
  });

  it('calls a 401 a configuration error that says to check the key and its scopes', async () => {
    const { fetch } = scripted([json({ errors: '[API] Invalid API key or access token' }, 401)]);
    const client = new ShopifyClient(
      { url: 'https://s.example', accessToken: 'shpat_secret' },
      { fetch, ...noWait },
    );

    const error = await all(client.list('orders.json', 'orders', {})).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toBe(
      'Shopify API refused the credentials (401 on GET /admin/api/2025-07/orders.json): check the key and its scopes',
    );
  });
});

describe('WooCommerce REST client', () => {
  it('authenticates with the read key and walks page until X-WP-TotalPages', async () => {
    const { fetch, seen } = scripted([
      json([{ id: 1 }], 200, { 'x-wp-totalpages': '2' }),
      json([{ id: 2 }], 200, { 'x-wp-totalpages': '2' }),
    ]);
    const client = new WooCommerceClient(
      { url: 'https://w.example', consumerKey: 'ck_1', consumerSecret: 'cs_1' },
      { fetch, ...noWait },
    );

    const orders = await all(client.list('orders', { per_page: '1' }));

    expect(orders).toEqual([{ id: 1 }, { id: 2 }]);
    expect(seen.map((s) => s.url)).toEqual([
      'https://w.example/wp-json/wc/v3/orders?per_page=1&page=1',
      'https://w.example/wp-json/wc/v3/orders?per_page=1&page=2',
    ]);
    expect(seen[0]?.headers.get('authorization')).toBe(`Basic ${btoa('ck_1:cs_1')}`);
  });

  it('refuses a list of more than 1000 pages after its first, saying to narrow the period', async () => {
    const { fetch, seen } = scripted([json([{ id: 1 }], 200, { 'x-wp-totalpages': '1001' })]);
    const client = new WooCommerceClient(
      { url: 'https://w.example', consumerKey: 'ck_1', consumerSecret: 'cs_1' },
      { fetch, ...noWait },
    );

    const error = await all(client.list('orders', {})).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PermanentError);
    expect((error as Error).message).toBe(
      'WooCommerce API: GET /wp-json/wc/v3/orders has more than 1000 pages: narrow the period',
    );
    expect(seen).toHaveLength(1);
  });

  it('retries a 503 a bounded number of times, then gives up transient', async () => {
    const { fetch, seen } = scripted([json({}, 503), json({}, 503), json({}, 503)]);
    const client = new WooCommerceClient(
      { url: 'https://w.example', consumerKey: 'k', consumerSecret: 's' },
      { fetch, maxAttempts: 3, ...noWait },
    );

    const error = await all(client.list('orders', {})).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(TransientError);
    expect(seen).toHaveLength(3);
  });

  it('calls a 404 permanent, naming the path', async () => {
    const { fetch } = scripted([json({ code: 'rest_no_route', message: 'No route was found' }, 404)]);
    const client = new WooCommerceClient(
      { url: 'https://w.example', consumerKey: 'ck_1', consumerSecret: 'cs_1' },
      { fetch, ...noWait },
    );

    const error = await all(client.list('orders/9/refunds', {})).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PermanentError);
    expect((error as Error).message).toBe(
      'WooCommerce API: GET /wp-json/wc/v3/orders/9/refunds not found (404): No route was found',
    );
  });
});

describe('an answer that is not the API', () => {
  it("is permanent and asks whether the URL is the shop's base URL (a storefront answers 200 with HTML)", async () => {
    const page = new Response('<!doctype html><title>My shop</title>', { status: 200 });
    const { fetch, seen } = scripted([page]);
    const client = new WooCommerceClient(
      { url: 'https://w.example/shop', consumerKey: 'ck_1', consumerSecret: 'cs_1' },
      { fetch, ...noWait },
    );

    const error = await all(client.list('orders', {})).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PermanentError);
    expect((error as Error).message).toBe(
      "WooCommerce API: GET /shop/wp-json/wc/v3/orders answered 200 without JSON: is shopApi.url the shop's base URL?",
    );
    expect(seen).toHaveLength(1);
  });
});

describe('Stripe client', () => {
  it('sends the secret key as a bearer and pages with starting_after while has_more', async () => {
    const { fetch, seen } = scripted([
      json({ object: 'list', data: [{ id: 'evt_1' }], has_more: true }),
      json({ object: 'list', data: [{ id: 'evt_2' }], has_more: false }),
    ]);
    const client = new StripeClient(
      { url: 'https://api.stripe.com', secretKey: 'rk_test_1' },
      { fetch, ...noWait },
    );

    const events = await all(client.list('events', { limit: '1' }));

    expect(events).toEqual([{ id: 'evt_1' }, { id: 'evt_2' }]);
    expect(seen.map((s) => s.url)).toEqual([
      'https://api.stripe.com/v1/events?limit=1',
      'https://api.stripe.com/v1/events?limit=1&starting_after=evt_1',
    ]);
    expect(seen[0]?.headers.get('authorization')).toBe('Bearer rk_test_1');
  });

  it('retries a network failure', async () => {
    const { fetch, seen } = scripted([new TypeError('fetch failed'), json({ data: [], has_more: false })]);
    const client = new StripeClient({ url: 'https://api.stripe.com', secretKey: 'k' }, { fetch, ...noWait });

    expect(await all(client.list('events', {}))).toEqual([]);
    expect(seen).toHaveLength(2);
  });

  it('cuts an attempt that gets no answer at timeoutMs, as a transient failure', async () => {
    // A server that never answers: the request ends only when its signal aborts.
    const hung = ((_: unknown, init?: RequestInit) =>
      new Promise<Response>((_resolve, reject) =>
        init?.signal?.addEventListener('abort', () => reject(init.signal?.reason)),
      )) as typeof fetch;
    const client = new StripeClient(
      { url: 'https://api.stripe.com', secretKey: 'k' },
      { fetch: hung, timeoutMs: 20, maxAttempts: 2, ...noWait },
    );

    const error = await all(client.list('events', {})).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(TransientError);
    expect((error as Error).message).toBe('Stripe API: GET /v1/events: no answer within 20 ms');
  });

  it('gives up at once when Retry-After asks for longer than maxRetryAfterMs', async () => {
    const { fetch, seen } = scripted([json({}, 429, { 'retry-after': '120' })]);
    const client = new StripeClient({ url: 'https://api.stripe.com', secretKey: 'k' }, { fetch, ...noWait });

    const error = await all(client.list('events', {})).catch((e: unknown) => e);

    expect(error).toMatchObject({ name: 'TransientError', status: 429, retryAfterMs: 120_000 });
    expect(seen).toHaveLength(1);
  });

  it('never puts the key in an error message', async () => {
    const { fetch } = scripted([
      json({ error: { message: 'Invalid API Key provided: rk_test_secret' } }, 400),
    ]);
    const client = new StripeClient(
      { url: 'https://api.stripe.com', secretKey: 'rk_test_secret' },
      { fetch, ...noWait },
    );

    const error = await all(client.list('events', {})).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PermanentError);
    expect((error as Error).message).toBe(
      'Stripe API: GET /v1/events answered 400: Invalid API Key provided: [redacted]',
    );
  });
});

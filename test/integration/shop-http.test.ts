import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigurationError, PermanentError } from '../../shared/errors.ts';
import { SHOP_MAX_ANSWER_BYTES } from '../../shared/shops/http.ts';
import { ShopifyClient } from '../../shared/shops/shopify.ts';
import { StripeClient } from '../../shared/shops/stripe.ts';
import { WooCommerceClient } from '../../shared/shops/woocommerce.ts';
import { startEndlessAnswer } from '../support/endless-answer.ts';

/**
 * The shop API clients against real HTTP servers, through Node's own fetch: what a redirect and an
 * answer too large to hold do to them (test/unit/shops/shop-clients.test.ts scripts the rest).
 */

interface Seen {
  readonly url: string;
  readonly headers: IncomingMessage['headers'];
}

interface Running {
  readonly url: string;
  readonly seen: Seen[];
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function serve(answer: (request: IncomingMessage, response: ServerResponse) => void): Promise<Running> {
  const seen: Seen[] = [];
  const server = createServer((request, response) => {
    seen.push({ url: request.url ?? '', headers: request.headers });
    answer(request, response);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const noWait = { sleep: async () => {}, random: () => 0.5 };
/** Far more than the socket buffers between a server and a client hold (about 4 MiB on loopback). */
const ENDLESS = 256 * 1024 * 1024;

async function firstPage(pages: AsyncIterable<readonly unknown[]>): Promise<readonly unknown[]> {
  for await (const page of pages) return page;
  return [];
}

async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a failure');
}

describe('a shop API that redirects', () => {
  it('is not followed: the access token never reaches the other host, and the error names where it points', async () => {
    // Arrange: the shop's URL answers 301 to another origin, which would take anything it is sent
    const elsewhere = await serve((_request, response) => response.end('{"orders":[]}'));
    const shop = await serve((_request, response) => {
      response.writeHead(301, { location: `${elsewhere.url}/admin/api/orders.json?secret=1` }).end();
    });
    const client = new ShopifyClient({ url: shop.url, accessToken: 'shpat_do_not_leak' }, noWait);

    // Act
    const error = await failure(firstPage(client.list('orders.json', 'orders', {})));

    // Assess
    expect(elsewhere.seen).toEqual([]);
    expect(shop.seen).toHaveLength(1);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error.message).toContain(`answered 301, a redirect to ${elsewhere.url}/admin/api/orders.json`);
    expect(error.message).toContain('set shopApi.url to where the API is');
    expect(error.message).not.toContain('secret=1');
    expect(error.message).not.toContain('shpat_do_not_leak');
  });

  it("Shopify: a next page on another host is not read: the access token stays with the shop's URL", async () => {
    // Arrange: the first page links its next page to another origin (a proxy rewriting links, say)
    const elsewhere = await serve((_request, response) => response.end('{"orders":[]}'));
    const shop = await serve((_request, response) => {
      response
        .writeHead(200, {
          'content-type': 'application/json',
          link: `<${elsewhere.url}/admin/api/2025-07/orders.json?page_info=2&secret=1>; rel="next"`,
        })
        .end(JSON.stringify({ orders: [{ id: 1 }] }));
    });
    const client = new ShopifyClient({ url: shop.url, accessToken: 'shpat_do_not_leak' }, noWait);

    // Act
    const pages: unknown[][] = [];
    let error: Error | undefined;
    try {
      for await (const page of client.list('orders.json', 'orders', {})) pages.push([...page]);
    } catch (caught) {
      error = caught as Error;
    }

    // Assess: the first page is read, the other host never asked, and the error names where it pointed
    expect(pages).toEqual([[{ id: 1 }]]);
    expect(elsewhere.seen).toEqual([]);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error?.message).toContain(
      `a next page on another host, ${elsewhere.url}/admin/api/2025-07/orders.json`,
    );
    expect(error?.message).toContain('set shopApi.url to where the API is');
    expect(error?.message).not.toContain('secret=1');
    expect(error?.message).not.toContain('shpat_do_not_leak');
  });

  it("is not followed to the same host either (WordPress's move to https): the error says so at once, not a 401", async () => {
    // Arrange
    const shop = await serve((request, response) => {
      if (request.url?.startsWith('/moved')) return void response.end('[]');
      response.writeHead(302, { location: '/moved/wp-json/wc/v3/orders' }).end();
    });
    const client = new WooCommerceClient(
      { url: shop.url, consumerKey: 'ck_1', consumerSecret: 'cs_do_not_leak' },
      noWait,
    );

    // Act
    const error = await failure(firstPage(client.list('orders', {})));

    // Assess
    expect(shop.seen).toHaveLength(1);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error.message).toContain(`answered 302, a redirect to ${shop.url}/moved/wp-json/wc/v3/orders`);
  });
});

describe('a shop API answer larger than the client reads', () => {
  const shopify = (url: string, maxAnswerBytes: number) =>
    new ShopifyClient({ url, accessToken: 'shpat_1' }, { ...noWait, maxAnswerBytes });

  it('reads at most 32 MiB by default', () => {
    // Assess
    expect(SHOP_MAX_ANSWER_BYTES).toBe(32 * 1024 * 1024);
  });

  it('stops reading a streamed answer past the cap, closes the connection, and fails permanently naming it', async () => {
    // Arrange: a page streamed without a length, far over a 1 KiB cap
    const shop = await startEndlessAnswer(ENDLESS);
    try {
      // Act
      const error = await failure(firstPage(shopify(shop.url, 1024).list('orders.json', 'orders', {})));

      // Assess
      expect(error).toBeInstanceOf(PermanentError);
      expect(error.message).toMatch(
        /^Shopify API: GET \/admin\/api\/[^ ]+\/orders\.json: the answer passed 1 KiB/,
      );
      expect(await shop.closed).toBe(true);
      expect(shop.written()).toBeLessThan(ENDLESS);
    } finally {
      await shop.close();
    }
  });

  it('refuses an answer whose declared length is over the cap, without reading it', async () => {
    // Arrange
    const shop = await serve((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': String(2048) });
      response.write('{"orders":[');
    });

    // Act
    const error = await failure(firstPage(shopify(shop.url, 1024).list('orders.json', 'orders', {})));

    // Assess
    expect(error).toBeInstanceOf(PermanentError);
    expect(error.message).toContain('the answer passed 1 KiB, the most this client reads');
  });

  it('reads an answer of exactly the cap whole', async () => {
    // Arrange
    const padded = JSON.stringify({ orders: [{ id: 1, note: 'x'.repeat(1024 - 31) }] });
    const shop = await serve((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' }).end(padded);
    });

    // Act
    const page = await firstPage(shopify(shop.url, 1024).list('orders.json', 'orders', {}));

    // Assess
    expect(Buffer.byteLength(padded)).toBe(1024);
    expect(page).toEqual([{ id: 1, note: 'x'.repeat(1024 - 31) }]);
  });
});

// Today's walk would loop until the test's timeout: a short one says so sooner.
describe('a shop API whose pages never end', { timeout: 15_000 }, () => {
  /** Shopify's orders route answering one order a page, each with a `Link` to `next(page)`. */
  const shopifyPages = (next: (page: number) => string | undefined) =>
    serve((request, response) => {
      const page = Number(new URL(request.url ?? '', 'http://x').searchParams.get('page_info') ?? '0');
      const link = next(page);
      response
        .writeHead(200, {
          'content-type': 'application/json',
          ...(link === undefined ? {} : { link: `<${link}>; rel="next"` }),
        })
        .end(JSON.stringify({ orders: [{ id: page }] }));
    });

  /** Stripe's events route answering one event a page, `has_more` while `more(after)`. */
  const stripePages = (last: (after: string | null) => string, more: (after: string | null) => boolean) =>
    serve((request, response) => {
      const after = new URL(request.url ?? '', 'http://x').searchParams.get('starting_after');
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ object: 'list', data: [{ id: last(after) }], has_more: more(after) }));
    });

  const shopify = (url: string) => new ShopifyClient({ url, accessToken: 'shpat_1' }, noWait);
  const stripe = (url: string) => new StripeClient({ url, secretKey: 'rk_test_1' }, noWait);

  async function read(pages: AsyncIterable<readonly unknown[]>): Promise<{ items: number; error?: Error }> {
    let items = 0;
    try {
      for await (const page of pages) items += page.length;
    } catch (error) {
      return { items, error: error as Error };
    }
    return { items };
  }

  it('Shopify: a next link already read is a permanent error naming it, not a loop until the timeout', async () => {
    // Arrange: a shop (or a cache in front of it) that links every page to the same next page
    const shop = await shopifyPages(() => `${shop.url}/admin/api/2025-07/orders.json?limit=1&page_info=7`);

    // Act
    const { items, error } = await read(shopify(shop.url).list('orders.json', 'orders', { limit: '1' }));

    // Assess: the repeated link is read once, its next (itself) refused
    expect(shop.seen).toHaveLength(2);
    expect(items).toBe(2);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error?.message).toBe(
      'Shopify API: GET /admin/api/2025-07/orders.json sent a next page already read (?limit=1&page_info=7): its cursor does not move; is a proxy or cache answering at shopApi.url?',
    );
  });

  it('Shopify: a next link that comes back after another is refused too', async () => {
    // Arrange: page_info 1 → 2 → 1
    const shop = await shopifyPages(
      (page) => `${shop.url}/admin/api/2025-07/orders.json?limit=1&page_info=${page === 1 ? 2 : 1}`,
    );

    // Act
    const { error } = await read(shopify(shop.url).list('orders.json', 'orders', { limit: '1' }));

    // Assess
    expect(shop.seen).toHaveLength(3);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error?.message).toContain('sent a next page already read (?limit=1&page_info=1)');
  });

  it('Shopify: past 1000 pages it stops with a permanent error that says to narrow the period', async () => {
    // Arrange: every page links to a new one
    const shop = await shopifyPages(
      (page) => `${shop.url}/admin/api/2025-07/orders.json?limit=1&page_info=${page + 1}`,
    );

    // Act
    const { items, error } = await read(shopify(shop.url).list('orders.json', 'orders', { limit: '1' }));

    // Assess
    expect(shop.seen).toHaveLength(1000);
    expect(items).toBe(1000);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error?.message).toBe(
      'Shopify API: GET /admin/api/2025-07/orders.json has more than 1000 pages: narrow the period',
    );
  });

  it('Shopify: exactly 1000 pages are read whole', async () => {
    // Arrange
    const shop = await shopifyPages((page) =>
      page < 999 ? `${shop.url}/admin/api/2025-07/orders.json?limit=1&page_info=${page + 1}` : undefined,
    );

    // Act
    const { items, error } = await read(shopify(shop.url).list('orders.json', 'orders', { limit: '1' }));

    // Assess
    expect(error).toBeUndefined();
    expect(items).toBe(1000);
  });

  it('Stripe: has_more with the same last id twice is a permanent error naming it', async () => {
    // Arrange: every page ends with evt_1 and says there is more
    const shop = await stripePages(
      () => 'evt_1',
      () => true,
    );

    // Act
    const { items, error } = await read(stripe(shop.url).list('events', { limit: '1' }));

    // Assess
    expect(shop.seen.map((s) => s.url)).toEqual([
      '/v1/events?limit=1',
      '/v1/events?limit=1&starting_after=evt_1',
    ]);
    expect(items).toBe(2);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error?.message).toBe(
      'Stripe API: GET /v1/events sent the same last id twice (starting_after=evt_1): its cursor does not move; is a proxy or cache answering at shopApi.url?',
    );
  });

  it('Stripe: past 1000 pages it stops with a permanent error that says to narrow the period', async () => {
    // Arrange: every page ends with a new id and says there is more
    const shop = await stripePages(
      (after) => `evt_${Number(after?.slice(4) ?? '0') + 1}`,
      () => true,
    );

    // Act
    const { items, error } = await read(stripe(shop.url).list('events', { limit: '1' }));

    // Assess
    expect(shop.seen).toHaveLength(1000);
    expect(items).toBe(1000);
    expect(error).toBeInstanceOf(PermanentError);
    expect(error?.message).toBe('Stripe API: GET /v1/events has more than 1000 pages: narrow the period');
  });
});

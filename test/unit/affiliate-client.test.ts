import { describe, expect, it } from 'vitest';
import {
  AffiliateClient,
  type AffiliateClientEvent,
  type AffiliateClientOptions,
  searchParamsOf,
} from '../../shared/affiliate/client.ts';
import { type Permit, RateLimiter, type RouteWindowState } from '../../shared/affiliate/rate-limiter.ts';
import { backoffDelay, sleep, withRetry } from '../../shared/affiliate/retry.ts';
import { DEFAULT_ROUTES, parseRouteOverrides, resolveRoutes } from '../../shared/affiliate/routes.ts';
import type { ConversionAddBody } from '../../shared/affiliate/schemas.ts';
import { BadInputError, ConfigurationError, PermanentError, TransientError } from '../../shared/errors.ts';
import { FakeClock, type FakeClockOptions } from '../support/clock.ts';

/** The client also arms real timers (request timeouts): real time passes when no fake one is due. */
const CLOCK: FakeClockOptions = { start: 1_700_000_000_000, whenIdle: 'wait' };

type Reply = Response | Error | ((init: RequestInit) => Promise<Response>);

interface Sent {
  url: URL;
  method: string;
  headers: Record<string, string>;
  body: unknown;
}

/** A fetch that answers from a script, one reply per call, and records what was sent. */
function scriptedFetch(replies: Reply[]): { fetch: typeof fetch; sent: Sent[] } {
  const sent: Sent[] = [];
  const fetchFn = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    sent.push({
      url: new URL(String(input)),
      method: init.method ?? 'GET',
      headers: init.headers as Record<string, string>,
      body: typeof init.body === 'string' ? JSON.parse(init.body) : undefined,
    });
    const reply = replies.shift();
    if (reply === undefined) throw new Error('no more scripted replies');
    if (reply instanceof Error) throw reply;
    if (typeof reply === 'function') return reply(init);
    return reply;
  };
  return { fetch: fetchFn as typeof fetch, sent };
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });
}

/** Never answers; rejects like fetch when the request's signal aborts. */
function hang(init: RequestInit): Promise<Response> {
  return new Promise((_, reject) => {
    init.signal?.addEventListener('abort', () => reject(init.signal?.reason), { once: true });
  });
}

function networkError(code: string): Error {
  return new TypeError('fetch failed', { cause: Object.assign(new Error(`connect ${code}`), { code }) });
}

const TOKEN = 'secret-token-42';
const PROGRAM = '0123456789abcdef01234567';
const RULE = '0123456789abcdef01234568';
const CONVERSION_ID = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const conversion = {
  id: CONVERSION_ID,
  program: PROGRAM,
  rule: RULE,
  externalId: 'order-1',
  amount: 1000,
  status: 'pending',
  refuseReason: null,
  isLocked: false,
  lockedAt: null,
};
const trackingAdd: ConversionAddBody = {
  kind: 'tracking',
  program: PROGRAM,
  rule: RULE,
  externalId: 'order-1',
  amount: 1000,
  currency: 'EUR',
  cids: ['bbbbbbbbbbbbbbbbbbbbbbbb'],
  ip: '203.0.113.7',
};

function setup(replies: Reply[], options: Partial<AffiliateClientOptions> = {}) {
  const clock = new FakeClock(CLOCK);
  const { fetch, sent } = scriptedFetch(replies);
  const events: AffiliateClientEvent[] = [];
  const client = new AffiliateClient({
    baseUrl: 'https://api.example.test/v4/',
    token: TOKEN,
    fetch,
    now: clock.now,
    sleep: clock.sleep,
    random: () => 0.5,
    onEvent: (e) => events.push(e),
    ...options,
  });
  return { client, clock, sent, events };
}

describe('AffiliateClient requests', () => {
  it('sends actions as JSON with the bearer token to the base URL joined with the route', async () => {
    // Prepare
    const { client, clock, sent } = setup([json(200, { statusCode: 200, conversion })]);

    // Act
    const result = await clock.run(
      client.refuseConversion({ program: PROGRAM, id: CONVERSION_ID, reason: ' out of stock ' }),
    );

    // Assess
    expect(result?.id).toBe(CONVERSION_ID);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.method).toBe('POST');
    expect(sent[0]?.url.href).toBe('https://api.example.test/v4/advertiser/conversions.refuse');
    expect(sent[0]?.headers).toMatchObject({
      authorization: `Bearer ${TOKEN}`,
      'content-type': 'application/json',
    });
    expect(sent[0]?.body).toEqual({ program: PROGRAM, id: CONVERSION_ID, reason: 'out of stock' });
  });

  it('sends reads as query parameters, with route overrides applied', async () => {
    // Prepare
    const { client, clock, sent } = setup([json(200, { conversions: { total: 0, data: [] } })], {
      routes: { 'conversions.list': '/advertiser/conversions.search' },
    });

    // Act
    await clock.run(
      client.listConversions({ program: PROGRAM, status: 'pending', locked: false, limit: 50 }),
    );

    // Assess
    expect(sent[0]?.method).toBe('GET');
    expect(sent[0]?.url.pathname).toBe('/v4/advertiser/conversions.search');
    expect(Object.fromEntries(sent[0]?.url.searchParams ?? [])).toEqual({
      program: PROGRAM,
      status: 'pending',
      locked: 'false',
      limit: '50',
    });
    expect(sent[0]?.body).toBeUndefined();
  });

  it('writes arrays as repeated query parameters', () => {
    expect(searchParamsOf({ currencies: ['EUR', 'USD'], capped: true, none: undefined }).toString()).toBe(
      'currencies=EUR&currencies=USD&capped=true',
    );
  });

  it.each<[string, (client: AffiliateClient) => Promise<unknown>, string]>([
    [
      'conversions.add without click ids',
      (c: AffiliateClient) => c.addConversion({ ...trackingAdd, cids: [] }),
      'cids',
    ],
    [
      'conversions.add with a field of another mode',
      (c: AffiliateClient) => c.addConversion({ ...trackingAdd, bonus: 5 } as unknown as ConversionAddBody),
      'bonus',
    ],
    [
      'conversions.refuse with an empty reason',
      (c: AffiliateClient) => c.refuseConversion({ program: PROGRAM, id: CONVERSION_ID, reason: '  ' }),
      'reason',
    ],
    [
      'conversions.update with a decimal amount',
      (c: AffiliateClient) =>
        c.updateConversionAmount({ id: CONVERSION_ID, amount: 10.5, reason: 'partial refund' }),
      'amount',
    ],
    [
      'conversions.accept with a short id',
      (c: AffiliateClient) => c.acceptConversion({ program: PROGRAM, id: 'abc' }),
      'id',
    ],
    [
      'conversions.info without externalId or customerId',
      (c: AffiliateClient) => c.conversionInfo({ program: PROGRAM }),
      'externalId',
    ],
    [
      'conversions.list over the limit',
      (c: AffiliateClient) => c.listConversions({ limit: 10_001 }),
      'limit',
    ],
    [
      'commissionAdjustments.add with an unknown type',
      (c: AffiliateClient) =>
        c.addCommissionAdjustment({
          type: 'gift' as 'bonus',
          program: PROGRAM,
          partnership: RULE,
          identifier: 'adj-1',
          commission: 100,
        }),
      'type',
    ],
  ])('rejects %s before sending anything', async (_, call, field) => {
    // Prepare
    const { client, clock, sent } = setup([]);

    // Act
    const result = clock.run(call(client));

    // Assess
    await expect(result).rejects.toBeInstanceOf(BadInputError);
    await expect(result).rejects.toMatchObject({ field });
    expect(sent).toHaveLength(0);
  });
});

describe('AffiliateClient answers', () => {
  it.each([
    ['conversion.id', { conversion: { ...conversion, id: 'cccccccccccccccccccccccc' } }],
    ['id', { id: 'cccccccccccccccccccccccc' }],
    ['data.id', { data: { id: 'cccccccccccccccccccccccc' } }],
    ['conversions.data[0].id', { conversions: { total: 1, data: [{ id: 'cccccccccccccccccccccccc' }] } }],
  ])('takes the id of an added conversion from %s', async (_, body) => {
    // Prepare
    const { client, clock } = setup([json(200, body)]);

    // Act
    const result = await clock.run(client.addConversion(trackingAdd));

    // Assess
    expect(result).toEqual({ id: 'cccccccccccccccccccccccc' });
  });

  it.each([
    ['the bare answer', json(200, { statusCode: 200, message: 'conversion created' })],
    ['an id that is not 24 hex', json(200, { id: '42' })],
    ['a body that is not JSON', new Response('OK', { status: 200 })],
  ])('returns an undefined id for %s, without retrying', async (_, reply) => {
    // Prepare
    const { client, clock, sent } = setup([reply]);

    // Act
    const result = await clock.run(client.addConversion(trackingAdd));

    // Assess
    expect(result).toEqual({ id: undefined });
    expect(sent).toHaveLength(1);
  });

  it('reads conversion info from conversion or conversions.data[0]', async () => {
    // Prepare
    const { client, clock } = setup([
      json(200, { statusCode: 200, conversion }),
      json(200, { conversions: { total: 1, data: [{ ...conversion, externalId: 'order-2' }] } }),
    ]);

    // Act
    const first = await clock.run(client.conversionInfo({ program: PROGRAM, externalId: 'order-1' }));
    const second = await clock.run(client.conversionInfo({ program: PROGRAM, externalId: 'order-2' }));

    // Assess
    expect(first).toMatchObject({ id: CONVERSION_ID, externalId: 'order-1', status: 'pending' });
    expect(second).toMatchObject({ externalId: 'order-2' });
  });

  it.each([
    [
      'a 404',
      json(404, { statusCode: 404, error: 'Not Found', message: 'no conversion for externalId order-1' }),
    ],
    ['an answer without a conversion', json(200, { statusCode: 200 })],
    ['an empty list', json(200, { conversions: { total: 0, data: [] } })],
  ])('answers conversion info with undefined on %s', async (_, reply) => {
    // Prepare
    const { client, clock } = setup([reply]);

    // Act
    const result = await clock.run(client.conversionInfo({ program: PROGRAM, externalId: 'order-1' }));

    // Assess
    expect(result).toBeUndefined();
  });

  it('treats a 404 naming an unknown route as a configuration error, not as "no conversion"', async () => {
    // Prepare
    const { client, clock } = setup([
      json(404, {
        statusCode: 404,
        error: 'Not Found',
        message: 'Route GET:/advertiser/conversions.info not found',
      }),
    ]);

    // Act
    const result = clock.run(client.conversionInfo({ program: PROGRAM, externalId: 'order-1' }));

    // Assess
    await expect(result).rejects.toBeInstanceOf(ConfigurationError);
  });

  it.each([['en-route-1042'], ['ROUTE-7'], ['cannot get-it']])(
    'answers undefined for a missing conversion whose externalId %s the 404 echoes',
    async (externalId) => {
      // Prepare: the platform names the externalId it looked for, as the sandbox does
      const { client, clock } = setup([
        json(404, {
          statusCode: 404,
          error: 'Not Found',
          message: `no conversion for externalId ${externalId}`,
        }),
      ]);

      // Act
      const result = await clock.run(client.conversionInfo({ program: PROGRAM, externalId }));

      // Assess: "no such conversion", not "check the routes" (which would park the order's refunds)
      expect(result).toBeUndefined();
    },
  );

  it('still reads a 404 naming the route as unknown when it also echoes the query', async () => {
    // Prepare: Fastify's wording quotes the whole URL, query included
    const { client, clock } = setup([
      json(404, {
        statusCode: 404,
        message: 'Route GET:/advertiser/conversions.info?program=x&externalId=en-route-1 not found',
      }),
    ]);

    // Act
    const result = clock.run(client.conversionInfo({ program: PROGRAM, externalId: 'en-route-1' }));

    // Assess
    await expect(result).rejects.toBeInstanceOf(ConfigurationError);
  });

  it('lists conversions with the total before paging', async () => {
    // Prepare
    const { client, clock } = setup([
      json(200, { statusCode: 200, conversions: { total: 7, data: [conversion] } }),
    ]);

    // Act
    const result = await clock.run(client.listConversions({ program: PROGRAM, limit: 1 }));

    // Assess
    expect(result.total).toBe(7);
    expect(result.data).toHaveLength(1);
    expect(result.data[0]?.id).toBe(CONVERSION_ID);
  });

  it('retries a read whose 2xx body is not JSON, then names it a TransientError', async () => {
    // Prepare
    const { client, clock, sent } = setup(
      [new Response('<html>', { status: 200 }), new Response('{"trunc', { status: 200 })],
      { maxAttempts: 2 },
    );

    // Act
    const result = clock.run(client.listConversions({}));

    // Assess
    await expect(result).rejects.toBeInstanceOf(TransientError);
    expect(sent).toHaveLength(2);
  });

  it('fails with a PermanentError naming the field when a conversion in the answer is unreadable', async () => {
    // Prepare
    const { client, clock } = setup([
      json(200, { conversions: { total: 1, data: [{ id: 'x', status: 'pending' }] } }),
    ]);

    // Act
    const result = clock.run(client.listConversions({}));

    // Assess
    await expect(result).rejects.toBeInstanceOf(PermanentError);
    await expect(result).rejects.toMatchObject({ field: 'id' });
  });

  it('reads the advertiser from advertisers.me', async () => {
    // Prepare
    const advertiser = {
      id: 'dddddddddddddddddddddddd',
      name: 'Shop',
      programs: [{ id: PROGRAM, rules: [{ id: RULE }] }],
    };
    const { client, clock } = setup([json(200, { statusCode: 200, advertiser })]);

    // Act
    const result = await clock.run(client.advertiserInfo());

    // Assess
    expect(result.id).toBe(advertiser.id);
    expect(result.programs[0]?.rules[0]?.id).toBe(RULE);
  });
});

describe('AffiliateClient failures', () => {
  it('names the operation, route and platform message of a refusal, as a PermanentError', async () => {
    // Prepare
    const message = `conversion ${CONVERSION_ID} is locked since 2024-01-01T00:00:00.000Z and can no longer be refused`;
    const { client, clock, sent } = setup([
      json(422, { statusCode: 422, error: 'Unprocessable Entity', message }),
    ]);

    // Act
    const result = clock.run(
      client.refuseConversion({ program: PROGRAM, id: CONVERSION_ID, reason: 'fraud' }),
    );

    // Assess
    await expect(result).rejects.toBeInstanceOf(PermanentError);
    await expect(result).rejects.toMatchObject({
      status: 422,
      platformMessage: message,
      message: `conversions.refuse (POST /advertiser/conversions.refuse) answered 422: ${message}`,
    });
    expect(sent).toHaveLength(1);
  });

  it('keeps the field a 400 names', async () => {
    // Prepare
    const { client, clock } = setup([
      json(400, { statusCode: 400, message: 'cids: required', field: 'cids' }),
    ]);

    // Act
    const result = clock.run(client.addConversion(trackingAdd));

    // Assess
    await expect(result).rejects.toMatchObject({ name: 'PermanentError', status: 400, field: 'cids' });
  });

  it('takes the platform message from a text body, truncated to 500 characters', async () => {
    // Prepare
    const { client, clock } = setup([new Response('x'.repeat(2000), { status: 409 })]);

    // Act
    const result = clock.run(client.addConversion(trackingAdd));

    // Assess
    await expect(result).rejects.toMatchObject({ platformMessage: 'x'.repeat(500) });
  });

  it('redacts an echoed token before truncating, so no part of it survives the cut', async () => {
    // Prepare: the token straddles the 500th character.
    const echoed = `${'x'.repeat(495)}${TOKEN} is not valid for this program`;
    const { client, clock } = setup([new Response(echoed, { status: 409 })]);

    // Act
    const error = await clock.run(client.addConversion(trackingAdd)).catch((e: unknown) => e);

    // Assess
    const { platformMessage, message } = error as PermanentError;
    expect(platformMessage).toBe(`${'x'.repeat(495)}[reda`);
    expect(`${message} ${platformMessage}`).not.toContain(TOKEN.slice(0, 5));
  });

  it.each([401, 403])(
    'treats %i as a configuration error, unretried, and never shows the token',
    async (status) => {
      // Prepare
      const { client, clock, sent } = setup([json(status, { message: `token ${TOKEN} is revoked` })]);

      // Act
      const error = await clock.run(client.advertiserInfo()).catch((e: unknown) => e);

      // Assess
      expect(error).toBeInstanceOf(ConfigurationError);
      expect(String((error as Error).message)).not.toContain(TOKEN);
      expect((error as ConfigurationError).platformMessage).not.toContain(TOKEN);
      expect(sent).toHaveLength(1);
    },
  );

  it('treats a redirect as a wrong base URL, naming where it points without its query', async () => {
    // Prepare
    const { client, clock } = setup([
      new Response('Moved Permanently. Redirecting to https://api.example/v2/advertiser?token=t', {
        status: 301,
        headers: { location: 'https://api.example/v2/advertiser?token=t' },
      }),
    ]);

    // Act
    const error = await clock.run(client.advertiserInfo()).catch((e: unknown) => e);

    // Assess
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain(
      'answered 301, a redirect to https://api.example/v2/advertiser: set the base URL to where the API is',
    );
    expect((error as Error).message).not.toContain('token=t');
    expect((error as ConfigurationError).platformMessage).toBeUndefined();
  });
});

describe('AffiliateClient pacing', () => {
  const window = (remaining: number) => ({
    'x-acme-ratelimit-route-second-limit': '100',
    'x-acme-ratelimit-route-second-remaining': String(remaining),
  });

  it('starts an adaptive pace at the initial rate, not the ceiling', async () => {
    // Prepare
    const { client, clock } = setup([json(200, {}), json(200, {}), json(200, {})], {
      ratePerSecond: 100,
      initialRatePerSecond: 2,
    });
    const start = clock.now();

    // Act
    for (let i = 0; i < 3; i++) await clock.run(client.addConversion(trackingAdd));

    // Assess: two per second, spaced evenly
    expect(clock.now() - start).toBe(1000);
  });

  it('reads the route window from the vendor headers of every answer, whatever the vendor word', async () => {
    // Prepare
    const clock = new FakeClock(CLOCK);
    const limiter = new RateLimiter({
      ratePerSecond: 100,
      adaptive: { initialRatePerSecond: 50 },
      now: clock.now,
      sleep: clock.sleep,
    });
    const { client } = setup([json(200, {}, window(2)), json(200, {}, window(80))], {
      rateLimiter: limiter,
      now: clock.now,
      sleep: clock.sleep,
    });
    const path = '/advertiser/conversions.add';

    // Act: the first answer says another client has nearly spent the route's window
    await clock.run(client.addConversion(trackingAdd));
    clock.time += 1000;
    await clock.run(client.addConversion(trackingAdd));
    clock.time += 1000;
    (await limiter.acquire(path)).release();

    // Assess: cut by a tenth at the edge, then no growth while nothing waited for the limiter
    expect(limiter.allowance(path)).toBe(45);
  });

  it("feeds an answer's window count to the limiter before the request leaves its flight", async () => {
    // Prepare: the limiter's bound counts a request as in flight until its permit goes back, so the
    // count its answer gave must be read by then
    const clock = new FakeClock(CLOCK);
    const calls: string[] = [];
    class Recording extends RateLimiter {
      override async acquire(key: string): Promise<Permit> {
        const permit = await super.acquire(key);
        const release = (): void => {
          calls.push('release');
          permit.release();
        };
        return { waitedMs: permit.waitedMs, release };
      }
      override observe(key: string, window: RouteWindowState): void {
        calls.push('observe');
        super.observe(key, window);
      }
    }
    const limiter = new Recording({
      adaptive: { initialRatePerSecond: 50 },
      now: clock.now,
      sleep: clock.sleep,
    });
    const { client } = setup([json(200, {}, window(2))], {
      rateLimiter: limiter,
      now: clock.now,
      sleep: clock.sleep,
    });

    // Act
    await clock.run(client.addConversion(trackingAdd));

    // Assess
    expect(calls).toEqual(['observe', 'release']);
  });
});

describe('AffiliateClient retries', () => {
  it('waits what the vendor retry-after header says after a 429, whatever the vendor word', async () => {
    // Prepare
    const { client, clock, sent, events } = setup([
      json(
        429,
        { message: 'Too Many Requests' },
        { 'x-acme-ratelimit-route-second-retry-after': '0.412', 'retry-after': '1' },
      ),
      json(200, { conversion }),
    ]);
    const start = clock.now();

    // Act
    const result = await clock.run(client.acceptConversion({ program: PROGRAM, id: CONVERSION_ID }));

    // Assess
    expect(result?.id).toBe(CONVERSION_ID);
    expect(sent).toHaveLength(2);
    expect(clock.now() - start).toBe(422); // 412 asked, plus a 10 ms margin
    expect(events.filter((e) => e.type !== 'request')).toEqual([
      {
        type: 'rate_limited',
        route: 'conversions.accept',
        path: '/advertiser/conversions.accept',
        attempt: 1,
        status: 429,
        waitMs: 412,
      },
      {
        type: 'retry',
        route: 'conversions.accept',
        path: '/advertiser/conversions.accept',
        attempt: 1,
        status: 429,
        waitMs: 422,
      },
    ]);
  });

  it('falls back to Retry-After seconds, then to backoff, on a 429', async () => {
    // Prepare
    const { client, clock, sent, events } = setup([
      json(429, {}, { 'retry-after': '2' }),
      json(429, {}),
      json(200, { advertiser: { id: 'dddddddddddddddddddddddd' } }),
    ]);

    // Act
    await clock.run(client.advertiserInfo());

    // Assess: 2 s asked, then full jitter at 0.5 of a 200 ms ceiling (second attempt).
    expect(sent).toHaveLength(3);
    expect(clock.sleeps).toEqual([2010, 100]);
    // Both 429s are reported (the RateLimited metric counts them), with or without a wait asked for.
    const refusals = events.filter((e) => e.type === 'rate_limited' && e.status === 429);
    expect(refusals.map((e) => e.waitMs)).toEqual([2000, undefined]);
  });

  it.each([
    ['a negative Retry-After (Date.parse reads -1 as 2001)', { 'retry-after': '-1' }],
    ['a Retry-After that is neither seconds nor a date', { 'retry-after': 'later 5' }],
    ['a signed Retry-After', { 'retry-after': '+2' }],
    [
      'a negative vendor retry-after, and a negative Retry-After',
      { 'x-svc-ratelimit-route-second-retry-after': '-1', 'retry-after': '-0.5' },
    ],
  ])('ignores %s on a 429 and backs off instead', async (_name, headers) => {
    // Prepare
    const { client, clock, sent, events } = setup([
      json(429, {}, headers),
      json(200, { advertiser: { id: 'dddddddddddddddddddddddd' } }),
    ]);

    // Act
    await clock.run(client.advertiserInfo());

    // Assess: full jitter at 0.5 of the first 100 ms ceiling, not the 10 ms margin of a 0 s wait.
    expect(sent).toHaveLength(2);
    expect(clock.sleeps).toEqual([50]);
    const refusals = events.filter((e) => e.type === 'rate_limited' && e.status === 429);
    expect(refusals.map((e) => e.waitMs)).toEqual([undefined]);
  });

  it('waits until the HTTP date a Retry-After names', async () => {
    // Prepare: 3 s after the clock's start (Tue, 14 Nov 2023 22:13:23 GMT).
    const { client, clock } = setup([
      json(429, {}, { 'retry-after': new Date(1_700_000_003_000).toUTCString() }),
      json(200, { advertiser: { id: 'dddddddddddddddddddddddd' } }),
    ]);

    // Act
    await clock.run(client.advertiserInfo());

    // Assess
    expect(clock.sleeps).toEqual([3010]);
  });

  it('retries 5xx with full-jitter backoff and surfaces a TransientError after maxAttempts', async () => {
    // Prepare
    const { client, clock, sent } = setup(
      [json(503, { message: 'down' }), json(502, { message: 'down' }), json(500, { message: 'down' })],
      { maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 150 },
    );

    // Act
    const result = clock.run(client.listConversions({}));

    // Assess
    await expect(result).rejects.toBeInstanceOf(TransientError);
    await expect(result).rejects.toMatchObject({ status: 500 });
    expect(sent).toHaveLength(3);
    expect(clock.sleeps).toEqual([50, 75]);
  });

  it('does not begin a wait past the deadline, and hands over the retry-after', async () => {
    // Prepare
    const { client, clock, sent } = setup([
      json(429, {}, { 'x-svc-ratelimit-route-second-retry-after': '5.000' }),
    ]);

    // Act
    const result = clock.run(client.advertiserInfo({ deadline: clock.now() + 1000 }));

    // Assess
    await expect(result).rejects.toBeInstanceOf(TransientError);
    await expect(result).rejects.toMatchObject({ status: 429, retryAfterMs: 5000 });
    expect(sent).toHaveLength(1);
    expect(clock.sleeps).toEqual([]);
  });

  it('fails at once when the client-side limiter cannot admit the call before the deadline', async () => {
    // Prepare
    const advertiser = { advertiser: { id: 'dddddddddddddddddddddddd' } };
    const { client, clock, sent } = setup([json(200, advertiser), json(200, advertiser)], {
      ratePerSecond: 1,
    });
    await clock.run(client.advertiserInfo());

    // Act
    const result = clock.run(client.advertiserInfo({ deadline: clock.now() + 500 }));

    // Assess
    await expect(result).rejects.toBeInstanceOf(TransientError);
    await expect(result).rejects.toMatchObject({ retryAfterMs: 1000 });
    expect(sent).toHaveLength(1);
    expect(clock.sleeps).toEqual([]);
  });

  it('does not start when the deadline has passed', async () => {
    // Prepare
    const { client, clock, sent } = setup([]);

    // Act
    const result = clock.run(client.advertiserInfo({ deadline: clock.now() - 1 }));

    // Assess
    await expect(result).rejects.toBeInstanceOf(TransientError);
    expect(sent).toHaveLength(0);
  });

  it('cuts a hanging request at timeoutMs and retries a read', async () => {
    // Prepare
    const { client, clock, sent } = setup([hang, hang], { timeoutMs: 20, maxAttempts: 2 });

    // Act
    const result = clock.run(client.conversionInfo({ program: PROGRAM, externalId: 'order-1' }));

    // Assess
    await expect(result).rejects.toBeInstanceOf(TransientError);
    await expect(result).rejects.toThrow('no answer within 20 ms');
    expect(sent).toHaveLength(2);
  });

  it('rejects with the caller abort reason, without retrying', async () => {
    // Prepare
    const controller = new AbortController();
    const reason = new Error('shutting down');
    const { client, clock, sent } = setup([
      (init) => {
        setImmediate(() => controller.abort(reason));
        return hang(init);
      },
    ]);

    // Act
    const result = clock.run(client.advertiserInfo({ signal: controller.signal }));

    // Assess
    await expect(result).rejects.toBe(reason);
    expect(sent).toHaveLength(1);
  });

  it('retries an add only when the platform cannot have recorded it', async () => {
    // Prepare
    const { client, clock, sent } = setup(
      [networkError('ECONNREFUSED'), json(503, {}), json(429, {}, { 'retry-after': '0' }), json(200, {})],
      { maxAttempts: 4 },
    );

    // Act
    const result = await clock.run(client.addConversion(trackingAdd));

    // Assess
    expect(result).toEqual({ id: undefined });
    expect(sent).toHaveLength(4);
  });

  it.each([
    ['a 500', () => json(500, { message: 'boom' })],
    ['a lost connection', () => networkError('ECONNRESET')],
    ['a timeout', () => hang],
  ])('does not retry an add after %s: it may have been recorded', async (_, reply) => {
    // Prepare
    const { client, clock, sent } = setup([reply(), json(200, {})], { timeoutMs: 20 });

    // Act
    const result = clock.run(client.addConversion(trackingAdd));

    // Assess
    await expect(result).rejects.toBeInstanceOf(TransientError);
    await expect(result).rejects.toThrow('not retried');
    // Marked so that the worker keeps its lease until the platform settles, instead of re-adding.
    await expect(result).rejects.toMatchObject({ ambiguous: true });
    expect(sent).toHaveLength(1);
  });

  it.each([
    ['a 503', () => json(503, {})],
    ['a 429', () => json(429, {}, { 'retry-after': '0' })],
    ['a refused connection', () => networkError('ECONNREFUSED')],
  ])('does not mark an add failed by %s as possibly recorded', async (_, reply) => {
    // Prepare
    const { client, clock } = setup([reply()], { maxAttempts: 1 });

    // Act
    const result = clock.run(client.addConversion(trackingAdd));

    // Assess
    await expect(result).rejects.toMatchObject({ name: 'TransientError', ambiguous: false });
  });

  it('retries a 408, even for an add: the platform never had the whole request', async () => {
    // Prepare
    const { client, clock, sent } = setup([json(408, { message: 'Request Timeout' }), json(200, {})]);

    // Act
    const result = await clock.run(client.addConversion(trackingAdd));

    // Assess: sent again rather than parked as a refusal
    expect(result).toEqual({ id: undefined });
    expect(sent).toHaveLength(2);
  });

  it('surfaces a 408 that outlasts the attempts as a TransientError, not possibly recorded', async () => {
    // Prepare
    const { client, clock } = setup([json(408, {}), json(408, {})], { maxAttempts: 2 });

    // Act
    const result = clock.run(client.addConversion(trackingAdd));

    // Assess
    await expect(result).rejects.toMatchObject({ name: 'TransientError', status: 408, ambiguous: false });
  });

  it('retries an add after a 500 when retryAmbiguousAdds is on', async () => {
    // Prepare
    const { client, clock, sent } = setup([json(500, {}), json(200, {})], { retryAmbiguousAdds: true });

    // Act
    await clock.run(client.addConversion(trackingAdd));

    // Assess
    expect(sent).toHaveLength(2);
  });

  it('survives an onEvent hook that throws', async () => {
    // Prepare
    const { client, clock } = setup([json(200, { conversion })], {
      onEvent: () => {
        throw new Error('metrics down');
      },
    });

    // Act
    const result = await clock.run(client.acceptConversion({ program: PROGRAM, id: CONVERSION_ID }));

    // Assess
    expect(result?.id).toBe(CONVERSION_ID);
  });
});

describe('AffiliateClient configuration', () => {
  it.each([
    ['a token with a trailing newline', { token: `${TOKEN}\n` }],
    ['an empty token', { token: '' }],
    ['a base URL that is not http', { baseUrl: 'ftp://api.example.test' }],
    ['a zero timeout', { timeoutMs: 0 }],
  ])('refuses %s at construction, without echoing the token', (_, options) => {
    const build = () =>
      new AffiliateClient({ baseUrl: 'https://api.example.test', token: TOKEN, ...options });
    expect(build).toThrow(ConfigurationError);
    try {
      build();
    } catch (error) {
      expect((error as Error).message).not.toContain(TOKEN);
    }
  });
});

describe('routes', () => {
  it('parses overrides from a JSON env value', () => {
    expect(parseRouteOverrides('{"conversions.add":"/advertiser/conversions.create"}')).toEqual({
      'conversions.add': '/advertiser/conversions.create',
    });
    expect(parseRouteOverrides(undefined)).toEqual({});
    expect(parseRouteOverrides('  ')).toEqual({});
  });

  it.each([
    ['not JSON', '{', 'AFFILIATE_ROUTES: not valid JSON'],
    ['an array', '[]', 'AFFILIATE_ROUTES: must be a JSON object'],
    ['an unknown route', '{"conversions.delete":"/x"}', 'unknown route "conversions.delete"'],
    [
      'a path without a leading slash',
      '{"conversions.add":"advertiser/x"}',
      'AFFILIATE_ROUTES.conversions.add',
    ],
    ['an absolute URL', '{"conversions.add":"https://evil.test/x"}', 'AFFILIATE_ROUTES.conversions.add'],
  ])('fails fast on %s, naming the setting', (_, value, message) => {
    expect(() => parseRouteOverrides(value)).toThrow(ConfigurationError);
    expect(() => parseRouteOverrides(value)).toThrow(message);
  });

  it('applies overrides over the defaults', () => {
    const table = resolveRoutes({ 'advertisers.me': '/v2/advertiser/advertisers.me' });
    expect(table['advertisers.me']).toBe('/v2/advertiser/advertisers.me');
    expect(table['conversions.add']).toBe(DEFAULT_ROUTES['conversions.add']);
  });
});

describe('backoff', () => {
  it('draws a full-jitter wait below an exponential ceiling, capped', () => {
    const at = (attempt: number, random: number) =>
      backoffDelay(attempt, { baseMs: 100, capMs: 1000, random: () => random });
    expect(at(1, 0)).toBe(0);
    expect(at(1, 0.999)).toBe(99);
    expect(at(3, 0.5)).toBe(200);
    expect(at(10, 0.5)).toBe(500);
    expect(at(10_000, 0.999)).toBe(999);
  });

  it('sleeps through a wait longer than one timer can hold (a 429 asking for weeks), not 1 ms', async () => {
    // Prepare: Node fires a timer set past 2^31 - 1 ms after 1 ms
    const stop = new AbortController();
    const slept = sleep(2 ** 31 + 1000, stop.signal).then(
      () => 'woke',
      () => 'aborted',
    );

    // Act: real timers, since the overflow is Node's own. The 50 ms is no margin to tune: a timer Node
    // cut to 1 ms expires before this one, and Node runs expired timers in expiry order with promises
    // settled between them, so however late the loop gets there a wrongly armed sleep wins the race.
    const first = await Promise.race([
      slept,
      new Promise<string>((resolve) => setTimeout(() => resolve('still asleep'), 50)),
    ]);
    stop.abort(new Error('test over'));

    // Assess
    expect(first).toBe('still asleep');
    expect(await slept).toBe('aborted');
  });

  it('withRetry stops at a failure classified as final', async () => {
    // Prepare
    let calls = 0;
    const clock = new FakeClock(CLOCK);

    // Act
    const result = clock.run(
      withRetry(
        async () => {
          calls += 1;
          throw new Error(calls === 1 ? 'again' : 'final');
        },
        {
          maxAttempts: 5,
          baseDelayMs: 10,
          maxDelayMs: 10,
          now: clock.now,
          sleep: clock.sleep,
          classify: (error) => ({ retry: (error as Error).message === 'again' }),
        },
      ),
    );

    // Assess
    await expect(result).rejects.toThrow('final');
    expect(calls).toBe(2);
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BadInputError, ConfigurationError, PermanentError, TransientError } from '../../shared/errors.ts';
import {
  fromLegacyAmount,
  LEGACY_MAX_EXACT_MINOR,
  LEGACY_NO_AMOUNT_UPDATE,
  LEGACY_NO_TRACKING_MODE,
  LegacyBackend,
  toLegacyAmount,
} from '../../shared/legacy/backend.ts';
import {
  LegacyActionError,
  LegacyClient,
  type LegacyClientOptions,
  parseLegacyCredentials,
} from '../../shared/legacy/client.ts';
import { formatMoney } from '../../shared/money.ts';

const PROGRAM = '5ad000000000000000000101';
const RULE = '5ad000000000000000000201';

interface Sent {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: unknown;
}

/** A fetch that answers from a script, one answer per request, and records what was sent. */
function scripted(answers: (Response | Error)[]) {
  const sent: Sent[] = [];
  const fetchFn = (async (input: URL | string, init?: RequestInit) => {
    sent.push({
      method: init?.method ?? 'GET',
      url: new URL(String(input)),
      headers: (init?.headers ?? {}) as Record<string, string>,
      body: init?.body === undefined ? undefined : JSON.parse(String(init.body)),
    });
    const next = answers.shift();
    if (next === undefined) throw new Error('no scripted answer left');
    if (next instanceof Error) throw next;
    return next;
  }) as typeof fetch;
  return { sent, fetchFn };
}

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });

function client(answers: (Response | Error)[], options: Partial<LegacyClientOptions> = {}) {
  const { sent, fetchFn } = scripted(answers);
  const sleeps: number[] = [];
  const legacy = new LegacyClient({
    baseUrl: 'https://legacy.example.com/',
    userCode: 'user-7',
    apiKey: 'key:with:colons',
    ratePerSecond: Number.POSITIVE_INFINITY,
    fetch: fetchFn,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    random: () => 0.5,
    ...options,
  });
  return { legacy, sent, sleeps };
}

const addBody = {
  identifier: 'order-1',
  partnership_id: '5ad000000000000000000301',
  amount: 19.99,
  commission: 0,
  rule_id: RULE,
  custom_var: null,
};

describe('LegacyClient requests', () => {
  it('sends HTTP Basic base64(user_code:api_key) to /2.0/ routes with the JSON body', async () => {
    // Prepare
    const { legacy, sent } = client([json(200, { status: 'done', message: 'ok', code: 200 })]);

    // Act
    const result = await legacy.addConversion(PROGRAM, addBody);

    // Assess
    expect(result.status).toBe('done');
    const [request] = sent;
    expect(request?.method).toBe('POST');
    expect(request?.url.href).toBe(`https://legacy.example.com/2.0/advertiser/${PROGRAM}/conversions/add`);
    const basic = request?.headers['authorization'] ?? '';
    expect(Buffer.from(basic.replace(/^Basic /, ''), 'base64').toString()).toBe('user-7:key:with:colons');
    expect(request?.body).toEqual(addBody);
  });

  it('accepts with GET …/accept and lists with the paging and filters as query parameters', async () => {
    const { legacy, sent } = client([json(200, { status: 'done', message: '' }), json(200, [])]);

    await legacy.acceptConversion(PROGRAM, 'c1');
    await legacy.listConversions(PROGRAM, { identifier: 'order 1', limit: 5, orderBy: 'asc', isPending: 1 });

    expect(sent[0]?.method).toBe('GET');
    expect(sent[0]?.url.pathname).toBe(`/2.0/advertiser/${PROGRAM}/conversions/c1/accept`);
    expect(Object.fromEntries(sent[1]?.url.searchParams ?? [])).toEqual({
      identifier: 'order 1',
      limit: '5',
      orderBy: 'asc',
      isPending: '1',
    });
  });

  it.each([
    ['a limit over 100', () => client([]).legacy.listConversions(PROGRAM, { limit: 101 }), 'limit'],
    ['a negative skip', () => client([]).legacy.listConversions(PROGRAM, { skip: -1 }), 'skip'],
    ['an isRefused of 2', () => client([]).legacy.listConversions(PROGRAM, { isRefused: 2 }), 'isRefused'],
    [
      'an add without partnership_id',
      () => client([]).legacy.addConversion(PROGRAM, { ...addBody, partnership_id: '' }),
      'partnership_id',
    ],
    [
      'a refuse without reason',
      () => client([]).legacy.refuseConversion(PROGRAM, 'c1', { refuse_reason: '' }),
      'refuse_reason',
    ],
  ])('refuses %s before sending (BadInputError naming the field)', async (_name, call, field) => {
    await expect(call()).rejects.toMatchObject({ name: 'BadInputError', field });
  });
});

describe('LegacyClient failures', () => {
  it.each(['failed', 'aborted'] as const)(
    'classifies a 200 with status %s as a PermanentError with its message and code, not retried',
    async (status) => {
      const { legacy, sent } = client([json(200, { status, message: 'partnership unknown', code: 17 })]);

      const error = await legacy.addConversion(PROGRAM, addBody).catch((e: unknown) => e);

      expect(error).toBeInstanceOf(PermanentError);
      expect(error).toBeInstanceOf(LegacyActionError);
      expect(error).toMatchObject({ actionStatus: status, code: 17, platformMessage: 'partnership unknown' });
      expect((error as Error).message).toContain('partnership unknown');
      expect(sent).toHaveLength(1);
    },
  );

  it.each([401, 403])('classifies %i as a ConfigurationError without echoing the key', async (status) => {
    const { legacy } = client([json(status, { message: 'bad key key:with:colons' })]);

    const error = await legacy.listConversions(PROGRAM).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).not.toContain('key:with:colons');
  });

  it('retries 503 and network errors with jittered backoff, then succeeds', async () => {
    const { legacy, sent, sleeps } = client(
      [json(503, { message: 'busy' }), new TypeError('fetch failed'), json(200, [])],
      { baseDelayMs: 100, maxDelayMs: 1000 },
    );

    await expect(legacy.listConversions(PROGRAM)).resolves.toEqual([]);

    expect(sent).toHaveLength(3);
    // random() = 0.5 of the ceilings 100 and 200.
    expect(sleeps).toEqual([50, 100]);
  });

  it('waits what a 429 Retry-After asks before the next attempt', async () => {
    const { legacy, sleeps } = client([
      json(429, { message: 'slow down' }, { 'retry-after': '2' }),
      json(200, []),
    ]);

    await legacy.listConversions(PROGRAM);

    expect(sleeps[0]).toBeGreaterThanOrEqual(2000);
  });

  it('gives up after maxAttempts with the last TransientError', async () => {
    const { legacy, sent } = client([json(502, {}), json(502, {}), json(502, {})], { maxAttempts: 3 });

    await expect(legacy.listConversions(PROGRAM)).rejects.toBeInstanceOf(TransientError);
    expect(sent).toHaveLength(3);
  });

  it('does not retry an add after an ambiguous 500 (it may have been recorded)', async () => {
    const { legacy, sent } = client([json(500, { message: 'oops' }), json(200, { status: 'done' })]);

    const error = await legacy.addConversion(PROGRAM, addBody).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(TransientError);
    expect((error as Error).message).toContain('not retried');
    expect(sent).toHaveLength(1);
  });

  it('starts no attempt once the deadline has passed', async () => {
    const { legacy, sent } = client([json(200, [])], { now: () => 10_000 });

    await expect(legacy.listConversions(PROGRAM, {}, { deadline: 9_000 })).rejects.toBeInstanceOf(
      TransientError,
    );
    expect(sent).toHaveLength(0);
  });

  it('answers undefined for the detail of an unknown conversion (404)', async () => {
    const { legacy } = client([json(404, { message: 'no conversion c9' })]);

    await expect(legacy.conversionDetail(PROGRAM, 'c9')).resolves.toBeUndefined();
  });
});

describe('legacy credentials', () => {
  it('splits user_code:api_key at the first colon', () => {
    expect(parseLegacyCredentials('u1:k:2\n')).toEqual({ userCode: 'u1', apiKey: 'k:2' });
  });

  it.each(['nocolon', ':key', 'user:'])('refuses %j without echoing it', (value) => {
    const error = (() => {
      try {
        parseLegacyCredentials(value, 'secret legacy/creds');
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain('secret legacy/creds');
    if (value.length > 5) expect((error as Error).message).not.toContain(value);
  });
});

/** What a credentials source answers: `cached` from its cache, `fresh` when asked to skip it. */
function credentialsSource(cached: string, fresh: string | Error = cached) {
  const reads: boolean[] = [];
  const read = async (options: { readonly fresh: boolean }) => {
    reads.push(options.fresh);
    if (!options.fresh) return cached;
    if (fresh instanceof Error) throw fresh;
    return fresh;
  };
  return { reads, read };
}

/** The `user_code:api_key` a request sent in its Basic header. */
const sentCredentials = (request: Sent | undefined) =>
  Buffer.from((request?.headers['authorization'] ?? '').replace(/^Basic /, ''), 'base64').toString();

describe('LegacyClient following rotated credentials (credentialsSource)', () => {
  const OLD = 'user-7:key:with:colons';
  const NEW = 'user-7:rotated-key';

  it('takes up credentials the cached read gives before the call, without a 401 first', async () => {
    const source = credentialsSource(NEW);
    const { legacy, sent } = client([json(200, [])], { credentialsSource: source.read });

    await legacy.listConversions(PROGRAM);

    expect(source.reads).toEqual([false]);
    expect(sentCredentials(sent[0])).toBe(NEW);
  });

  it('after a 401 reads the credentials again, skipping the cache, and sends even an add once more', async () => {
    // Prepare: the cache still holds the credentials the platform no longer takes.
    const source = credentialsSource(OLD, NEW);
    const { legacy, sent } = client([json(401, { message: 'unauthorized' }), json(200, { status: 'done' })], {
      credentialsSource: source.read,
    });

    // Act
    const result = await legacy.addConversion(PROGRAM, addBody);

    // Assess
    expect(result.status).toBe('done');
    expect(source.reads).toEqual([false, true]);
    expect(sent.map(sentCredentials)).toEqual([OLD, NEW]);
  });

  it('credentials refused again after the fresh read: the ConfigurationError (401), after one more try only, echoing no key', async () => {
    const source = credentialsSource(OLD, NEW);
    const { legacy, sent } = client(
      [
        json(401, { message: 'unauthorized' }),
        json(401, { message: `bad key rotated-key (${Buffer.from(NEW).toString('base64')})` }),
        json(200, []),
      ],
      { credentialsSource: source.read },
    );

    const error = await legacy.listConversions(PROGRAM).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ConfigurationError);
    expect(error).toMatchObject({ status: 401 });
    expect(sent).toHaveLength(2);
    expect(source.reads).toEqual([false, true]);
    const message = (error as Error).message;
    for (const secret of ['key:with:colons', 'rotated-key', Buffer.from(NEW).toString('base64')]) {
      expect(message).not.toContain(secret);
    }
  });

  it('does not send the call again when the fresh read gives the refused credentials', async () => {
    const source = credentialsSource(OLD);
    const { legacy, sent } = client([json(401, { message: 'unauthorized' }), json(200, [])], {
      credentialsSource: source.read,
    });

    const error = await legacy.listConversions(PROGRAM).catch((e: unknown) => e);

    expect(error).toMatchObject({ name: 'ConfigurationError', status: 401 });
    expect(sent).toHaveLength(1);
  });

  it('a 401 when the credentials cannot be read again is a TransientError (retry later)', async () => {
    const unreadable = Object.assign(new Error('secret legacy/creds could not be read'), {
      name: 'ThrottlingException',
    });
    const source = credentialsSource(OLD, unreadable);
    const { legacy, sent } = client([json(401, { message: 'unauthorized' })], {
      credentialsSource: source.read,
    });

    const error = await legacy.listConversions(PROGRAM).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(TransientError);
    expect(error).toMatchObject({ status: 401 });
    expect((error as Error).message).toContain('could not be read again (ThrottlingException)');
    expect(sent).toHaveLength(1);
  });

  it('fails the call on a value that is not user_code:api_key, naming its origin, never the value', async () => {
    const source = credentialsSource('no-colon-here');
    const { legacy, sent } = client([json(200, [])], {
      credentialsSource: source.read,
      credentialsOrigin: 'secret legacy/creds',
    });

    const error = await legacy.listConversions(PROGRAM).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain('secret legacy/creds');
    expect((error as Error).message).not.toContain('no-colon-here');
    expect(sent).toHaveLength(0);
  });
});

describe('legacy amounts', () => {
  it('sends the float of the exact decimal (1999 EUR → 19.99, 1999 JPY → 1999, 1 KWD → 0.001)', () => {
    expect([toLegacyAmount(1999, 'EUR'), toLegacyAmount(1999, 'JPY'), toLegacyAmount(1, 'KWD')]).toEqual([
      19.99, 1999, 0.001,
    ]);
  });

  it('round-trips every amount of cents up to LEGACY_MAX_EXACT_MINOR, through JSON too', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: LEGACY_MAX_EXACT_MINOR }),
        fc.constantFrom('EUR', 'JPY', 'KWD'),
        (minor, currency) => {
          const wire = JSON.parse(JSON.stringify({ amount: toLegacyAmount(minor, currency) })) as {
            amount: number;
          };
          expect(String(wire.amount)).toBe(String(Number(formatMoney(minor, currency))));
          expect(fromLegacyAmount(wire.amount, currency)).toBe(minor);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('refuses amounts past LEGACY_MAX_EXACT_MINOR instead of rounding them', () => {
    expect(() => toLegacyAmount(LEGACY_MAX_EXACT_MINOR + 1, 'EUR')).toThrow(PermanentError);
  });
});

describe('LegacyBackend limits', () => {
  const backend = () => new LegacyBackend(client([]).legacy);

  it('refuses a click-only (tracking) order with the reason: no tracking mode', async () => {
    const error = await backend()
      .add({
        program: PROGRAM,
        rule: RULE,
        externalId: 'o1',
        kind: 'tracking',
        amount: 100,
        currency: 'EUR',
        cids: ['a1b2c3d4e5f60718293a4b5c'],
        ip: '203.0.113.7',
      })
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PermanentError);
    expect((error as Error).message).toBe(LEGACY_NO_TRACKING_MODE);
  });

  it('refuses an amount update with a reason an operator can act on', async () => {
    const error = await backend()
      .updateAmount(PROGRAM, 'c1', 500, 'partial refund RF-1: amount now EUR 5.00')
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PermanentError);
    expect(error).not.toBeInstanceOf(BadInputError);
    expect((error as Error).message).toContain(LEGACY_NO_AMOUNT_UPDATE);
    // The amount as a person reads it (the worker's reason), never minor units.
    expect((error as Error).message).toContain('amount now EUR 5.00');
    expect((error as Error).message).not.toMatch(/\b500\b/);
  });
});

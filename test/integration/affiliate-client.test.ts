import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_SEED, type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import {
  AffiliateClient,
  type AffiliateClientEvent,
  type AffiliateClientOptions,
} from '../../shared/affiliate/client.ts';
import { DEFAULT_ROUTES, type RouteName } from '../../shared/affiliate/routes.ts';
import type { ConversionAddBody } from '../../shared/affiliate/schemas.ts';
import { BadInputError, ConfigurationError, PermanentError, TransientError } from '../../shared/errors.ts';

const PROGRAM = DEFAULT_SEED.programs[0]!;
const RULE = DEFAULT_SEED.rules[0]!;
const PARTNERSHIP = DEFAULT_SEED.partnerships[0]!;
const TRACKING_ID = DEFAULT_SEED.trackingIds[0]!;
const CLICK_ID = 'c1c1c1c1c1c1c1c1c1c1c1c1';
const HEX24 = /^[0-9a-f]{24}$/;

let sandbox: RunningSandbox;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
});
afterAll(async () => {
  await sandbox.close();
});
beforeEach(() => {
  sandbox.control.reset();
});

function clientFor(target: RunningSandbox, options: Partial<AffiliateClientOptions> = {}): AffiliateClient {
  return new AffiliateClient({
    baseUrl: target.url,
    token: target.token,
    baseDelayMs: 10,
    maxDelayMs: 50,
    ...options,
  });
}

function tracking(externalId: string, extra: Partial<ConversionAddBody> = {}): ConversionAddBody {
  return {
    kind: 'tracking',
    program: PROGRAM,
    rule: RULE,
    externalId,
    amount: 4990,
    currency: 'EUR',
    cids: [CLICK_ID],
    ip: '203.0.113.7',
    ...extra,
  } as ConversionAddBody;
}

/** Adds a conversion and returns its platform id, looked up by externalId as the connector does. */
async function added(client: AffiliateClient, externalId: string): Promise<string> {
  await client.addConversion(tracking(externalId));
  const conversion = await client.conversionInfo({ program: PROGRAM, externalId });
  if (!conversion) throw new Error(`conversion ${externalId} not found after add`);
  return conversion.id;
}

function totalCalls(target: RunningSandbox = sandbox): number {
  return Object.values(target.control.calls()).reduce((sum, entry) => sum + entry.total, 0);
}

function statusesOf(path: string, target: RunningSandbox = sandbox): Record<string, number> {
  return target.control.calls()[path]?.byStatus ?? {};
}

/** A fetch that notes when each request left and when its answer's headers came back. */
function timedFetch(): {
  fetch: typeof fetch;
  log: { sentAt: number; answeredAt: number; status: number }[];
} {
  const log: { sentAt: number; answeredAt: number; status: number }[] = [];
  const wrapped = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const sentAt = performance.now();
    const response = await fetch(input, init);
    log.push({ sentAt, answeredAt: performance.now(), status: response.status });
    return response;
  };
  return { fetch: wrapped as typeof fetch, log };
}

describe('AffiliateClient against the sandbox: operations', () => {
  it('reads the advertiser, its programs and rules', async () => {
    // Prepare
    const client = clientFor(sandbox);

    // Act
    const advertiser = await client.advertiserInfo();

    // Assess
    expect(advertiser.id).toBe(DEFAULT_SEED.advertiser);
    expect(advertiser.programs.map((p) => p.id)).toEqual(DEFAULT_SEED.programs);
    expect(advertiser.programs[0]?.rules.map((r) => r.id)).toContain(RULE);
  });

  it('adds a conversion (bare answer: no id) and finds it by externalId with what was sent', async () => {
    // Prepare
    const client = clientFor(sandbox);

    // Act
    const result = await client.addConversion(tracking('order-1001', { voucher: 'SPRING', subId: 'news' }));
    const found = await client.conversionInfo({ program: PROGRAM, externalId: 'order-1001' });

    // Assess
    expect(result).toEqual({ id: undefined });
    expect(found).toMatchObject({
      externalId: 'order-1001',
      program: PROGRAM,
      rule: RULE,
      amount: 4990,
      currency: 'EUR',
      status: 'pending',
      voucher: 'SPRING',
      subId: 'news',
      cids: [CLICK_ID],
    });
    expect(found?.id).toMatch(HEX24);
  });

  it('returns the id of an added conversion when the answer carries it', async () => {
    // Prepare
    sandbox.control.setOptions({ addResponse: 'withId' });
    const client = clientFor(sandbox);

    // Act
    const { id } = await client.addConversion(tracking('order-1002'));

    // Assess
    expect(id).toMatch(HEX24);
    expect(sandbox.control.conversions().map((c) => c.id)).toEqual([id]);
  });

  it('adds bonus and manual conversions', async () => {
    // Prepare
    const client = clientFor(sandbox);

    // Act
    await client.addConversion({
      kind: 'bonus',
      program: PROGRAM,
      rule: RULE,
      externalId: 'bonus-1',
      partnership: PARTNERSHIP,
      bonus: 500,
    });
    await client.addConversion({
      kind: 'manual',
      program: PROGRAM,
      rule: RULE,
      externalId: 'manual-1',
      affiliateTrackingId: TRACKING_ID,
      amount: 1200,
    });

    // Assess
    expect(sandbox.control.conversions().map((c) => [c.externalId, c.kind, c.partnership])).toEqual([
      ['bonus-1', 'bonus', PARTNERSHIP],
      ['manual-1', 'manual', PARTNERSHIP],
    ]);
  });

  it('answers undefined for a conversion that does not exist', async () => {
    // Prepare
    const client = clientFor(sandbox);

    // Act
    const found = await client.conversionInfo({ program: PROGRAM, externalId: 'never-sent' });

    // Assess
    expect(found).toBeUndefined();
  });

  it('answers undefined for a missing conversion whose externalId holds the word "route"', async () => {
    // Prepare: the sandbox's 404 names the externalId it looked for
    const client = clientFor(sandbox);

    // Act
    const found = await client.conversionInfo({ program: PROGRAM, externalId: 'en-route-1042' });

    // Assess
    expect(found).toBeUndefined();
  });

  it('lists conversions with the total before paging', async () => {
    // Prepare
    const client = clientFor(sandbox);
    for (const n of [1, 2, 3]) await client.addConversion(tracking(`order-list-${n}`));

    // Act
    const page = await client.listConversions({ program: PROGRAM, limit: 2, sort: 'asc' });
    const one = await client.listConversions({ program: PROGRAM, externalId: 'order-list-3' });

    // Assess
    expect(page.total).toBe(3);
    expect(page.data.map((c) => c.externalId)).toEqual(['order-list-1', 'order-list-2']);
    expect(one.total).toBe(1);
    expect(one.data[0]?.externalId).toBe('order-list-3');
  });

  it('updates the amount of a pending conversion, then accepts it', async () => {
    // Prepare
    const client = clientFor(sandbox);
    const id = await added(client, 'order-2001');

    // Act
    const updated = await client.updateConversionAmount({ id, amount: 3990, reason: 'partial refund' });
    const accepted = await client.acceptConversion({ program: PROGRAM, id });

    // Assess
    expect(updated).toMatchObject({ id, amount: 3990, status: 'pending' });
    expect(accepted).toMatchObject({ id, amount: 3990, status: 'accepted' });
    expect(sandbox.control.conversions()[0]?.amountHistory).toMatchObject([
      { amount: 3990, reason: 'partial refund' },
    ]);
  });

  it('refuses a conversion with its reason', async () => {
    // Prepare
    const client = clientFor(sandbox);
    const id = await added(client, 'order-2002');

    // Act
    const refused = await client.refuseConversion({
      program: PROGRAM,
      id,
      reason: 'order cancelled',
      notify: false,
    });

    // Assess
    expect(refused).toMatchObject({ id, status: 'refused', refuseReason: 'order cancelled' });
  });

  it('adds a commission adjustment', async () => {
    // Prepare
    const client = clientFor(sandbox);

    // Act
    const result = await client.addCommissionAdjustment({
      type: 'bonus',
      program: PROGRAM,
      partnership: PARTNERSHIP,
      identifier: 'adj-1',
      commission: 250,
      comment: 'launch bonus',
    });

    // Assess
    expect(result.id).toMatch(HEX24);
  });
});

describe('AffiliateClient against the sandbox: refusals', () => {
  it('surfaces an update of an accepted conversion as a PermanentError an operator can act on', async () => {
    // Prepare
    const client = clientFor(sandbox);
    const id = await added(client, 'order-3001');
    sandbox.control.accept(id);

    // Act
    const result = client.updateConversionAmount({ id, amount: 100, reason: 'refund' });

    // Assess
    await expect(result).rejects.toBeInstanceOf(PermanentError);
    await expect(result).rejects.toMatchObject({
      status: 422,
      message: expect.stringMatching(
        /^conversions\.update \(POST \/advertiser\/conversions\.update\) answered 422: .*only be updated while pending/,
      ),
    });
    expect(statusesOf(DEFAULT_ROUTES['conversions.update'])).toEqual({ 422: 1 });
  });

  it('surfaces the refusal of a locked conversion as a PermanentError naming the lock', async () => {
    // Prepare
    const client = clientFor(sandbox);
    const id = await added(client, 'order-3002');
    sandbox.control.lock(id);

    // Act
    const result = client.refuseConversion({ program: PROGRAM, id, reason: 'fraud' });

    // Assess
    await expect(result).rejects.toBeInstanceOf(PermanentError);
    await expect(result).rejects.toMatchObject({
      status: 422,
      platformMessage: expect.stringContaining('locked'),
    });
  });

  it('surfaces a second refusal and the acceptance of a refused conversion as PermanentErrors', async () => {
    // Prepare
    const client = clientFor(sandbox);
    const id = await added(client, 'order-3003');
    await client.refuseConversion({ program: PROGRAM, id, reason: 'cancelled' });

    // Act
    const again = client.refuseConversion({ program: PROGRAM, id, reason: 'cancelled' });
    const accept = client.acceptConversion({ program: PROGRAM, id });

    // Assess
    await expect(again).rejects.toMatchObject({ name: 'PermanentError', status: 422 });
    await expect(accept).rejects.toMatchObject({ name: 'PermanentError', status: 422 });
  });

  it('surfaces an unknown conversion id as a PermanentError 404', async () => {
    // Prepare
    const client = clientFor(sandbox);

    // Act
    const result = client.acceptConversion({ program: PROGRAM, id: 'abcdefabcdefabcdefabcdef' });

    // Assess
    await expect(result).rejects.toMatchObject({ name: 'PermanentError', status: 404, field: 'id' });
  });

  it('surfaces a rejected duplicate externalId as a PermanentError 409', async () => {
    // Prepare
    sandbox.control.setOptions({ duplicates: 'reject' });
    const client = clientFor(sandbox);
    await client.addConversion(tracking('order-3004'));

    // Act
    const result = client.addConversion(tracking('order-3004'));

    // Assess
    await expect(result).rejects.toMatchObject({ name: 'PermanentError', status: 409 });
  });

  it('surfaces a wrong token as a ConfigurationError, unretried and without the token', async () => {
    // Prepare
    const client = clientFor(sandbox, { token: 'wrong-token-value' });

    // Act
    const error = await client.advertiserInfo().catch((e: unknown) => e);

    // Assess
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).not.toContain('wrong-token-value');
    expect(statusesOf(DEFAULT_ROUTES['advertisers.me'])).toEqual({ 401: 1 });
  });

  it('surfaces a route override the platform does not serve as a ConfigurationError, not as "no conversion"', async () => {
    // Prepare
    const client = clientFor(sandbox, { routes: { 'conversions.info': '/advertiser/conversions.get' } });

    // Act
    const result = client.conversionInfo({ program: PROGRAM, externalId: 'order-1' });

    // Assess
    await expect(result).rejects.toBeInstanceOf(ConfigurationError);
    await expect(result).rejects.toThrow('/advertiser/conversions.get');
  });
});

interface ValidationCase {
  readonly rule: string;
  readonly route: RouteName;
  /** The call through the client. */
  readonly call: (client: AffiliateClient) => Promise<unknown>;
  /** The same request sent raw: a JSON body for actions, a query string for reads. */
  readonly raw: Record<string, unknown> | string;
  readonly field: string;
}

const base = tracking('order-v');
const refuse = { program: PROGRAM, id: 'abcdefabcdefabcdefabcdef', reason: 'cancelled' };
const update = { id: 'abcdefabcdefabcdefabcdef', amount: 100, reason: 'refund' };
const adjustment = {
  type: 'bonus',
  program: PROGRAM,
  partnership: PARTNERSHIP,
  identifier: 'adj-v',
  commission: 100,
};
const addCase = (rule: string, body: Record<string, unknown>, field: string): ValidationCase => ({
  rule,
  route: 'conversions.add',
  call: (c) => c.addConversion(body as ConversionAddBody),
  raw: body,
  field,
});
const without = (body: object, key: string): Record<string, unknown> =>
  Object.fromEntries(Object.entries(body).filter(([k]) => k !== key));

const VALIDATION_CASES: ValidationCase[] = [
  addCase('tracking mode requires cids', without(base, 'cids'), 'cids'),
  addCase('tracking mode requires at least one click id', { ...base, cids: [] }, 'cids'),
  addCase('click ids are 24 hex', { ...base, cids: ['not-a-click-id'] }, 'cids.0'),
  addCase('tracking mode requires an IP address', { ...base, ip: '300.1.1.1' }, 'ip'),
  addCase('program ids are 24 hex', { ...base, program: 'program-1' }, 'program'),
  addCase('rule is required', without(base, 'rule'), 'rule'),
  addCase('externalId must not be empty', { ...base, externalId: '' }, 'externalId'),
  addCase('amounts are not negative', { ...base, amount: -1 }, 'amount'),
  addCase('amounts are integer cents', { ...base, amount: 49.9 }, 'amount'),
  addCase('currency is an ISO 4217 code of the list', { ...base, currency: 'EURO' }, 'currency'),
  addCase('dates are UTC with milliseconds', { ...base, date: '2024-03-01 10:00' }, 'date'),
  addCase('kind is one of the three modes', { ...base, kind: 'sale' }, 'kind'),
  addCase(
    'bonus mode requires a partnership',
    { kind: 'bonus', program: PROGRAM, rule: RULE, externalId: 'b', bonus: 5 },
    'partnership',
  ),
  addCase(
    'manual mode requires an affiliate tracking id',
    { kind: 'manual', program: PROGRAM, rule: RULE, externalId: 'm' },
    'affiliateTrackingId',
  ),
  addCase(
    'cids are allowed only in tracking mode',
    {
      kind: 'manual',
      program: PROGRAM,
      rule: RULE,
      externalId: 'm',
      affiliateTrackingId: 1001,
      cids: [CLICK_ID],
    },
    'cids',
  ),
  {
    rule: 'refuse needs a reason that is not blank',
    route: 'conversions.refuse',
    call: (c) => c.refuseConversion({ ...refuse, reason: '   ' }),
    raw: { ...refuse, reason: '   ' },
    field: 'reason',
  },
  {
    rule: 'refuse needs a 24-hex conversion id',
    route: 'conversions.refuse',
    call: (c) => c.refuseConversion({ ...refuse, id: 'order-1' }),
    raw: { ...refuse, id: 'order-1' },
    field: 'id',
  },
  {
    rule: 'accept needs the program',
    route: 'conversions.accept',
    call: (c) => c.acceptConversion({ id: refuse.id } as never),
    raw: { id: refuse.id },
    field: 'program',
  },
  {
    rule: 'update takes integer cents',
    route: 'conversions.update',
    call: (c) => c.updateConversionAmount({ ...update, amount: 10.5 }),
    raw: { ...update, amount: 10.5 },
    field: 'amount',
  },
  {
    rule: 'update needs a reason',
    route: 'conversions.update',
    call: (c) => c.updateConversionAmount(without(update, 'reason') as never),
    raw: without(update, 'reason'),
    field: 'reason',
  },
  {
    rule: 'update takes no program (the spec lists none)',
    route: 'conversions.update',
    call: (c) => c.updateConversionAmount({ ...update, program: PROGRAM } as never),
    raw: { ...update, program: PROGRAM },
    field: 'program',
  },
  {
    rule: 'conversion info needs externalId or customerId',
    route: 'conversions.info',
    call: (c) => c.conversionInfo({ program: PROGRAM }),
    raw: `program=${PROGRAM}`,
    field: 'externalId',
  },
  {
    rule: 'conversion info needs a 24-hex program',
    route: 'conversions.info',
    call: (c) => c.conversionInfo({ program: 'shop', externalId: 'o-1' }),
    raw: 'program=shop&externalId=o-1',
    field: 'program',
  },
  {
    rule: 'conversions list limit is at most 10000',
    route: 'conversions.list',
    call: (c) => c.listConversions({ limit: 10_001 }),
    raw: 'limit=10001',
    field: 'limit',
  },
  {
    rule: 'conversions list status is pending, accepted or refused',
    route: 'conversions.list',
    call: (c) => c.listConversions({ status: 'locked' as never }),
    raw: 'status=locked',
    field: 'status',
  },
  {
    rule: 'conversions list takes only known parameters',
    route: 'conversions.list',
    call: (c) => c.listConversions({ page: 2 } as never),
    raw: 'page=2',
    field: 'page',
  },
  {
    rule: 'commission adjustment type is bonus or fixed_fees',
    route: 'commissionAdjustments.add',
    call: (c) => c.addCommissionAdjustment({ ...adjustment, type: 'gift' } as never),
    raw: { ...adjustment, type: 'gift' },
    field: 'type',
  },
  {
    rule: 'commission adjustment commission is not negative',
    route: 'commissionAdjustments.add',
    call: (c) => c.addCommissionAdjustment({ ...adjustment, commission: -5 } as never),
    raw: { ...adjustment, commission: -5 },
    field: 'commission',
  },
  {
    rule: 'commission adjustment needs an identifier',
    route: 'commissionAdjustments.add',
    call: (c) => c.addCommissionAdjustment(without(adjustment, 'identifier') as never),
    raw: without(adjustment, 'identifier'),
    field: 'identifier',
  },
];

describe('validation rules, enforced on both sides', () => {
  it.each(VALIDATION_CASES)(
    'client side: $rule ($field) never reaches the sandbox',
    async ({ call, field }) => {
      // Prepare
      const client = clientFor(sandbox);

      // Act
      const result = call(client);

      // Assess
      await expect(result).rejects.toBeInstanceOf(BadInputError);
      await expect(result).rejects.toMatchObject({ field });
      expect(totalCalls()).toBe(0);
    },
  );

  it.each(VALIDATION_CASES)(
    'sandbox side: $rule ($field) is a 400 naming the field',
    async ({ route, raw, field }) => {
      // Prepare
      const path = DEFAULT_ROUTES[route];
      const headers = { authorization: `Bearer ${sandbox.token}`, 'content-type': 'application/json' };

      // Act
      const response =
        typeof raw === 'string'
          ? await fetch(`${sandbox.url}${path}?${raw}`, { headers })
          : await fetch(`${sandbox.url}${path}`, { method: 'POST', headers, body: JSON.stringify(raw) });

      // Assess
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ statusCode: 400, field });
    },
  );
});

describe('rate limits, faults and timeouts', () => {
  it('waits what the rate-limit header says after a 429, then succeeds', async () => {
    // Prepare
    sandbox.control.setFaults({ burst429: 1, burstRetryAfterMs: 300 });
    const { fetch, log } = timedFetch();
    const client = clientFor(sandbox, { fetch });

    // Act
    const advertiser = await client.advertiserInfo();

    // Assess
    expect(advertiser.id).toBe(DEFAULT_SEED.advertiser);
    expect(log.map((l) => l.status)).toEqual([429, 200]);
    const [limited, retried] = log;
    expect(retried!.sentAt - limited!.answeredAt).toBeGreaterThanOrEqual(300);
    expect(statusesOf(DEFAULT_ROUTES['advertisers.me'])).toEqual({ 200: 1, 429: 1 });
  });

  it('surfaces a TransientError with the retry-after when the wait would pass the deadline', async () => {
    // Prepare
    sandbox.control.setFaults({ burst429: 1, burstRetryAfterMs: 300 });
    const client = clientFor(sandbox);

    // Act
    const result = client.listConversions({}, { deadline: Date.now() + 150 });

    // Assess
    await expect(result).rejects.toBeInstanceOf(TransientError);
    await expect(result).rejects.toMatchObject({ status: 429, retryAfterMs: 300 });
    expect(statusesOf(DEFAULT_ROUTES['conversions.list'])).toEqual({ 429: 1 });
  });

  it('retries 5xx with backoff and surfaces a TransientError after maxAttempts', async () => {
    // Prepare
    sandbox.control.setFaults({ errorRate: 1 });
    const client = clientFor(sandbox, { maxAttempts: 3 });

    // Act
    // Both settle before any assertion, so neither rejection is left unhandled while the other is awaited.
    const [read, add] = await Promise.allSettled([
      client.listConversions({ program: PROGRAM }),
      client.addConversion(tracking('order-5001')),
    ]);

    // Assess
    expect(read.status === 'rejected' && read.reason).toBeInstanceOf(TransientError);
    expect(read.status === 'rejected' && read.reason).toMatchObject({ status: 503 });
    expect(add.status === 'rejected' && add.reason).toMatchObject({ name: 'TransientError', status: 503 });
    expect(statusesOf(DEFAULT_ROUTES['conversions.list'])).toEqual({ 503: 3 });
    // A 503 comes before any work, so even an add is retried.
    expect(statusesOf(DEFAULT_ROUTES['conversions.add'])).toEqual({ 503: 3 });
    expect(sandbox.control.conversions()).toEqual([]);
  });

  it('does not retry an add after a 500: the platform may have recorded it', async () => {
    // Prepare
    sandbox.control.setFaults({ errorRate: 1, errorStatus: 500 });
    const client = clientFor(sandbox, { maxAttempts: 3 });

    // Act
    const add = client.addConversion(tracking('order-5002'));

    // Assess
    await expect(add).rejects.toMatchObject({ name: 'TransientError', status: 500 });
    expect(statusesOf(DEFAULT_ROUTES['conversions.add'])).toEqual({ 500: 1 });
  });

  it('cuts a hanging request at timeoutMs as a TransientError, and retries a read', async () => {
    // Prepare
    sandbox.control.setFaults({ hangRate: 1, hangMs: 20_000 });
    const client = clientFor(sandbox, { timeoutMs: 200, maxAttempts: 2 });
    const started = performance.now();

    // Act
    const result = client.conversionInfo({ program: PROGRAM, externalId: 'order-1' });

    // Assess
    await expect(result).rejects.toBeInstanceOf(TransientError);
    await expect(result).rejects.toThrow('no answer within 200 ms');
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(400);
    expect(elapsed).toBeLessThan(20_000); // cut by the client, not released by the sandbox
    expect(statusesOf(DEFAULT_ROUTES['conversions.info'])).toEqual({ hang: 2 });
  });

  it('keeps a 300-call burst within 100 per second: no 429, spread over 2 s and more', async () => {
    // Prepare
    const { fetch, log } = timedFetch();
    const client = clientFor(sandbox, { fetch, maxAttempts: 1 });

    // Act
    const results = await Promise.allSettled(Array.from({ length: 300 }, () => client.advertiserInfo()));

    // Assess
    expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    expect(statusesOf(DEFAULT_ROUTES['advertisers.me'])).toEqual({ 200: 300 });
    const sent = log.map((l) => l.sentAt).sort((a, b) => a - b);
    expect(sent[299]! - sent[0]!).toBeGreaterThanOrEqual(2000);
  });

  it('gets 429s on the same burst without the limiter (the sandbox does enforce the limit)', async () => {
    // Prepare
    const client = clientFor(sandbox, { ratePerSecond: Number.POSITIVE_INFINITY, maxAttempts: 1 });

    // Act
    const results = await Promise.allSettled(Array.from({ length: 300 }, () => client.advertiserInfo()));

    // Assess
    const rejected = results.filter((r) => r.status === 'rejected');
    expect(rejected.length).toBeGreaterThan(0);
    expect(statusesOf(DEFAULT_ROUTES['advertisers.me'])['429']).toBe(rejected.length);
  });
});

describe('rate-limit headers of another vendor word', () => {
  let acme: RunningSandbox;
  beforeAll(async () => {
    acme = await startSandbox({ port: 0, vendor: 'acme' });
  });
  afterAll(async () => {
    await acme.close();
  });

  it('waits the decimal x-acme-…-retry-after rather than the whole seconds of Retry-After', async () => {
    // Prepare
    acme.control.setFaults({ burst429: 1, burstRetryAfterMs: 300 });
    const events: AffiliateClientEvent[] = [];
    const client = clientFor(acme, { onEvent: (e) => events.push(e) });

    // Act
    await client.advertiserInfo();

    // Assess: Retry-After said 1 (second, rounded up); the vendor header said 0.300.
    expect(events.find((e) => e.type === 'rate_limited' && e.status === 429)?.waitMs).toBe(300);
    expect(statusesOf(DEFAULT_ROUTES['advertisers.me'], acme)).toEqual({ 200: 1, 429: 1 });
  });
});

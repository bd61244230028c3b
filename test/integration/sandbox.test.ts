import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { sandboxOptionsFromEnv } from '../../sandbox/env.ts';
import {
  DEFAULT_SEED,
  type RunningSandbox,
  type SandboxOptions,
  type StoredConversion,
  startSandbox,
} from '../../sandbox/server.ts';
import { until } from '../support/until.ts';

const PROGRAM_EUR = DEFAULT_SEED.programs[0]!;
const PROGRAM_USD = DEFAULT_SEED.programs[1]!;
const RULE_EUR = DEFAULT_SEED.rules[0]!;
const RULE_USD = DEFAULT_SEED.rules[2]!;
const PARTNERSHIP = DEFAULT_SEED.partnerships[0]!;
const TRACKING_ID = DEFAULT_SEED.trackingIds[0]!;
const CLICK_ID = 'c1c1c1c1c1c1c1c1c1c1c1c1';
const HEX24 = /^[0-9a-f]{24}$/;
const RATE_HEADERS = ['limit', 'reset', 'remaining', 'consumed', 'retry-after'].map(
  (suffix) => `x-svc-ratelimit-route-second-${suffix}`,
);
const T0 = Date.parse('2024-03-01T10:00:00.000Z');
const DAY = 24 * 60 * 60 * 1000;

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

/** A tiny client over fetch, so each test reads as the HTTP exchange it checks. */
function clientOf(sandbox: RunningSandbox, token = sandbox.token) {
  const auth = { authorization: `Bearer ${token}` };
  async function answer(response: Response): Promise<Answer> {
    const text = await response.text();
    return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : {} };
  }
  return {
    get: async (path: string, query: Record<string, string | string[]> = {}) => {
      const params = new URLSearchParams();
      for (const [key, value] of Object.entries(query)) {
        for (const v of Array.isArray(value) ? value : [value]) params.append(key, v);
      }
      const qs = params.size > 0 ? `?${params}` : '';
      return answer(await fetch(`${sandbox.url}${path}${qs}`, { headers: auth }));
    },
    post: async (path: string, body: unknown) =>
      answer(
        await fetch(`${sandbox.url}${path}`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: typeof body === 'string' ? body : JSON.stringify(body),
        }),
      ),
    control: async (method: string, path: string, body?: unknown) =>
      answer(
        await fetch(`${sandbox.url}/_sandbox${path}`, {
          method,
          headers: { 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        }),
      ),
  };
}

function trackingBody(overrides: Record<string, unknown> = {}) {
  return {
    kind: 'tracking',
    program: PROGRAM_EUR,
    rule: RULE_EUR,
    externalId: 'order-1',
    amount: 4200,
    cids: [CLICK_ID],
    ip: '203.0.113.7',
    ...overrides,
  };
}

/** Adds a conversion and returns it as stored (the default add answer carries no id). */
async function addConversion(sandbox: RunningSandbox, overrides: Record<string, unknown> = {}) {
  const before = new Set(sandbox.control.conversions().map((c) => c.id));
  const added = await clientOf(sandbox).post('/advertiser/conversions.add', trackingBody(overrides));
  expect(added.status).toBe(200);
  const created = sandbox.control.conversions().find((c) => !before.has(c.id));
  return created as StoredConversion;
}

describe('sandbox: API basics', () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0 });
  });
  afterAll(() => sandbox.close());
  beforeEach(() => sandbox.control.reset());

  it('answers advertisers.me with the seeded account', async () => {
    // Act
    const { status, body } = await clientOf(sandbox).get('/advertiser/advertisers.me');

    // Assess
    expect(status).toBe(200);
    const advertiser = body['advertiser'] as Record<string, unknown>;
    expect(advertiser['id']).toBe(DEFAULT_SEED.advertiser);
    expect(advertiser['programs']).toEqual([
      {
        id: PROGRAM_EUR,
        title: expect.any(String),
        currency: 'EUR',
        rules: [
          { id: RULE_EUR, title: expect.any(String) },
          { id: DEFAULT_SEED.rules[1], title: expect.any(String) },
        ],
      },
      {
        id: PROGRAM_USD,
        title: expect.any(String),
        currency: 'USD',
        rules: [
          { id: RULE_USD, title: expect.any(String) },
          { id: DEFAULT_SEED.rules[3], title: expect.any(String) },
        ],
      },
    ]);
    expect(advertiser['partnerships']).toEqual([
      { id: PARTNERSHIP, trackingId: TRACKING_ID, status: 'approved' },
      { id: DEFAULT_SEED.partnerships[1], trackingId: DEFAULT_SEED.trackingIds[1], status: 'approved' },
    ]);
    expect(advertiser['groups']).toEqual([{ id: DEFAULT_SEED.groups[0] }]);
    expect(advertiser['users']).toEqual([{ id: DEFAULT_SEED.users[0] }]);
  });

  it('answers 401 on every API route without the right Bearer token, with the rate-limit headers', async () => {
    // Prepare
    const routes = [
      ['GET', '/advertiser/advertisers.me'],
      ['GET', '/advertiser/conversions.list'],
      ['GET', '/advertiser/conversions.info'],
      ['POST', '/advertiser/conversions.accept'],
      ['POST', '/advertiser/conversions.refuse'],
      ['POST', '/advertiser/conversions.update'],
      ['POST', '/advertiser/conversions.add'],
      ['POST', '/advertiser/commissionAdjustments.add'],
    ];

    for (const [method, path] of routes) {
      for (const authorization of [
        undefined,
        'Bearer wrong-token',
        `Basic ${sandbox.token}`,
        sandbox.token,
      ]) {
        // Act
        const response = await fetch(`${sandbox.url}${path}`, {
          method,
          headers: authorization === undefined ? {} : { authorization },
          body: method === 'POST' ? JSON.stringify(trackingBody()) : undefined,
        });

        // Assess
        expect(response.status, `${method} ${path} with ${authorization}`).toBe(401);
        expect(await response.json()).toMatchObject({ statusCode: 401, error: 'Unauthorized' });
        for (const header of RATE_HEADERS) expect(response.headers.get(header)).not.toBeNull();
      }
    }
    expect(sandbox.control.conversions()).toEqual([]);
  });

  it('answers 404 on an unknown route, 405 on a wrong method and 400 naming malformed JSON', async () => {
    // Act
    const unknown = await clientOf(sandbox).get('/advertiser/conversions.delete');
    const wrongMethod = await clientOf(sandbox).get('/advertiser/conversions.add');
    const malformed = await clientOf(sandbox).post('/advertiser/conversions.add', '{"kind": "tracking",');
    const notObject = await clientOf(sandbox).post('/advertiser/conversions.add', '[1, 2]');

    // Assess
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ statusCode: 404, error: 'Not Found' });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('POST');
    expect(malformed.status).toBe(400);
    expect(malformed.body['message']).toMatch(/^malformed JSON body/);
    expect(notObject.status).toBe(400);
    expect(notObject.body['message']).toMatch(/JSON object/);
  });
});

describe('sandbox: conversions.add validation', () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0 });
  });
  afterAll(() => sandbox.close());
  beforeEach(() => sandbox.control.reset());

  const add = (body: unknown) => clientOf(sandbox).post('/advertiser/conversions.add', body);

  it.each([
    ['tracking without cids', trackingBody({ cids: undefined }), 'cids'],
    ['tracking with empty cids', trackingBody({ cids: [] }), 'cids'],
    ['tracking without ip', trackingBody({ ip: undefined }), 'ip'],
    [
      'cids in manual mode',
      { ...trackingBody({ kind: 'manual', affiliateTrackingId: TRACKING_ID, ip: undefined }) },
      'cids',
    ],
    ['a program that is not 24 hex', trackingBody({ program: '5ad00000000000000000010' }), 'program'],
    ['a click id that is not hex', trackingBody({ cids: ['zzzzzzzzzzzzzzzzzzzzzzzz'] }), 'cids.0'],
    ['a non-integer amount', trackingBody({ amount: 42.5 }), 'amount'],
    ['a negative amount', trackingBody({ amount: -1 }), 'amount'],
    ['a currency outside the list', trackingBody({ currency: 'EURO' }), 'currency'],
    ['an unknown kind', trackingBody({ kind: 'gift' }), 'kind'],
    ['a date in another format', trackingBody({ date: '2024-03-01 10:00' }), 'date'],
    ['a date that does not exist', trackingBody({ date: '2024-02-30T10:00:00.000Z' }), 'date'],
    ['a time that does not exist', trackingBody({ date: '2024-03-01T25:61:00.000Z' }), 'date'],
    ['an unknown program', trackingBody({ program: 'ffffffffffffffffffffffff' }), 'program'],
    ['a rule of the other program', trackingBody({ rule: RULE_USD }), 'rule'],
    ['an unknown rule', trackingBody({ rule: 'eeeeeeeeeeeeeeeeeeeeeeee' }), 'rule'],
    [
      'bonus for an unknown partnership',
      {
        kind: 'bonus',
        program: PROGRAM_EUR,
        rule: RULE_EUR,
        externalId: 'b-1',
        partnership: 'dddddddddddddddddddddddd',
        bonus: 500,
      },
      'partnership',
    ],
    [
      'manual for an unknown tracking id',
      {
        kind: 'manual',
        program: PROGRAM_EUR,
        rule: RULE_EUR,
        externalId: 'm-1',
        affiliateTrackingId: 999_999,
      },
      'affiliateTrackingId',
    ],
  ])('refuses %s with a 400 naming the field', async (_case, body, field) => {
    // Act
    const { status, body: answer } = await add(body);

    // Assess
    expect(status).toBe(400);
    expect(answer).toMatchObject({ statusCode: 400, error: 'Bad Request', field });
    expect(answer['message']).toEqual(expect.any(String));
    expect(sandbox.control.conversions()).toEqual([]);
  });

  it('explains which program a misplaced rule belongs to', async () => {
    // Act
    const { body } = await add(trackingBody({ rule: RULE_USD }));

    // Assess
    expect(body['message']).toBe(
      `rule ${RULE_USD} belongs to program ${PROGRAM_USD}, not to program ${PROGRAM_EUR}`,
    );
  });

  it('stores every mode with a fresh id and the program currency by default', async () => {
    // Act
    const tracking = await add(trackingBody({ program: PROGRAM_USD, rule: RULE_USD, voucher: 'SPRING' }));
    const bonus = await add({
      kind: 'bonus',
      program: PROGRAM_EUR,
      rule: RULE_EUR,
      externalId: 'b-1',
      partnership: PARTNERSHIP,
      bonus: 500,
      currency: 'GBP',
    });
    const manual = await add({
      kind: 'manual',
      program: PROGRAM_EUR,
      rule: RULE_EUR,
      externalId: 'm-1',
      affiliateTrackingId: DEFAULT_SEED.trackingIds[1],
    });

    // Assess
    expect([tracking.status, bonus.status, manual.status]).toEqual([200, 200, 200]);
    expect(tracking.body).toEqual({ statusCode: 200, message: 'conversion created' });
    const [t, b, m] = sandbox.control.conversions();
    expect(t).toMatchObject({
      kind: 'tracking',
      currency: 'USD',
      status: 'pending',
      voucher: 'SPRING',
      amount: 4200,
    });
    expect(t?.cids).toEqual([CLICK_ID]);
    expect(b).toMatchObject({ kind: 'bonus', currency: 'GBP', partnership: PARTNERSHIP, bonus: 500 });
    expect(m).toMatchObject({
      kind: 'manual',
      currency: 'EUR',
      affiliateTrackingId: DEFAULT_SEED.trackingIds[1],
      partnership: DEFAULT_SEED.partnerships[1],
    });
    const ids = [t?.id, b?.id, m?.id];
    for (const id of ids) expect(id).toMatch(HEX24);
    expect(new Set(ids).size).toBe(3);
  });

  it('answers the created conversion with its id when addResponse is withId', async () => {
    // Prepare
    sandbox.control.setOptions({ addResponse: 'withId' });

    // Act
    const { status, body } = await add(trackingBody());

    // Assess
    expect(status).toBe(200);
    const conversion = body['conversion'] as StoredConversion;
    expect(conversion.id).toMatch(HEX24);
    expect(conversion).toMatchObject({
      externalId: 'order-1',
      status: 'pending',
      isLocked: false,
      lockedAt: null,
    });
  });

  it('creates a second conversion for a duplicate externalId by default', async () => {
    // Act
    const first = await add(trackingBody());
    const second = await add(trackingBody());

    // Assess
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(sandbox.control.conversions().filter((c) => c.externalId === 'order-1')).toHaveLength(2);
  });

  it('answers 409 for a duplicate externalId when duplicates is reject, in the same program only', async () => {
    // Prepare
    sandbox.control.setOptions({ duplicates: 'reject' });
    await add(trackingBody());

    // Act
    const duplicate = await add(trackingBody());
    const otherProgram = await add(trackingBody({ program: PROGRAM_USD, rule: RULE_USD }));

    // Assess
    expect(duplicate.status).toBe(409);
    expect(duplicate.body).toMatchObject({
      statusCode: 409,
      error: 'Conflict',
      message: 'a conversion with externalId order-1 already exists',
    });
    expect(otherProgram.status).toBe(200);
    expect(sandbox.control.conversions()).toHaveLength(2);
  });

  it('adds a commission adjustment with the program currency and checks its partnership', async () => {
    // Act
    const ok = await clientOf(sandbox).post('/advertiser/commissionAdjustments.add', {
      type: 'bonus',
      program: PROGRAM_USD,
      partnership: PARTNERSHIP,
      identifier: 'adj-1',
      commission: 1500,
    });
    const unknownPartnership = await clientOf(sandbox).post('/advertiser/commissionAdjustments.add', {
      type: 'fixed_fees',
      program: PROGRAM_USD,
      partnership: 'dddddddddddddddddddddddd',
      identifier: 'adj-2',
      commission: 1500,
    });

    // Assess
    expect(ok.status).toBe(200);
    expect(ok.body['commissionAdjustment']).toMatchObject({
      id: expect.stringMatching(HEX24),
      currency: 'USD',
      status: 'accepted',
      commission: 1500,
    });
    expect(unknownPartnership).toMatchObject({ status: 400, body: { field: 'partnership' } });
  });

  it('refuses a commission adjustment dated on a day that does not exist, naming the date', async () => {
    // Act
    const answer = await clientOf(sandbox).post('/advertiser/commissionAdjustments.add', {
      type: 'bonus',
      program: PROGRAM_EUR,
      partnership: PARTNERSHIP,
      identifier: 'adj-3',
      commission: 1500,
      date: '2023-02-29T00:00:00.000Z',
    });

    // Assess
    expect(answer).toMatchObject({ status: 400, body: { statusCode: 400, field: 'date' } });
  });
});

describe('sandbox: conversion lifecycle', () => {
  let sandbox: RunningSandbox;
  const clock = { now: T0 };
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, now: () => clock.now, lockAfterMs: 20 * DAY });
  });
  afterAll(() => sandbox.close());
  beforeEach(() => {
    sandbox.control.reset();
    clock.now = T0;
  });

  const api = () => clientOf(sandbox);

  it('accepts a pending conversion and refuses amount updates afterwards with 422', async () => {
    // Prepare
    const conversion = await addConversion(sandbox);

    // Act
    const accepted = await api().post('/advertiser/conversions.accept', {
      program: PROGRAM_EUR,
      id: conversion.id,
    });
    const update = await api().post('/advertiser/conversions.update', {
      id: conversion.id,
      amount: 100,
      reason: 'partial refund',
    });

    // Assess
    expect(accepted.status).toBe(200);
    expect(accepted.body['conversion']).toMatchObject({
      status: 'accepted',
      acceptedAt: new Date(T0).toISOString(),
    });
    expect(update.status).toBe(422);
    expect(update.body).toMatchObject({
      statusCode: 422,
      message: `conversion ${conversion.id} is accepted: its amount can only be updated while pending`,
    });
  });

  it('updates the amount of a pending conversion and keeps the history', async () => {
    // Prepare
    const conversion = await addConversion(sandbox);
    clock.now = T0 + 1000;

    // Act
    const { status, body } = await api().post('/advertiser/conversions.update', {
      id: conversion.id,
      amount: 3100,
      reason: 'partial refund',
    });

    // Assess
    expect(status).toBe(200);
    expect(body['conversion']).toMatchObject({
      amount: 3100,
      amountHistory: [{ amount: 3100, reason: 'partial refund', at: new Date(T0 + 1000).toISOString() }],
    });
  });

  it('locks an accepted conversion lockAfterMs after acceptance, computed from the clock', async () => {
    // Prepare
    const conversion = await addConversion(sandbox);
    await api().post('/advertiser/conversions.accept', { program: PROGRAM_EUR, id: conversion.id });
    clock.now = T0 + 20 * DAY - 1;
    const beforeLock = await api().get('/advertiser/conversions.info', {
      program: PROGRAM_EUR,
      externalId: 'order-1',
    });
    clock.now = T0 + 20 * DAY;

    // Act
    const refuse = await api().post('/advertiser/conversions.refuse', {
      program: PROGRAM_EUR,
      id: conversion.id,
      reason: 'returned',
    });

    // Assess
    expect(beforeLock.body['conversion']).toMatchObject({ isLocked: false, lockedAt: null });
    const lockedAt = new Date(T0 + 20 * DAY).toISOString();
    expect(refuse.status).toBe(422);
    expect(refuse.body['message']).toBe(
      `conversion ${conversion.id} is locked since ${lockedAt} and can no longer be refused`,
    );
    expect(sandbox.control.conversions()[0]).toMatchObject({ status: 'accepted', isLocked: true, lockedAt });
  });

  it('refuses a pending conversion once, then answers 422 to a second refuse and to accept', async () => {
    // Prepare
    const conversion = await addConversion(sandbox);
    const refuseBody = { program: PROGRAM_EUR, id: conversion.id, reason: 'cancelled order', notify: false };

    // Act
    const first = await api().post('/advertiser/conversions.refuse', refuseBody);
    const second = await api().post('/advertiser/conversions.refuse', refuseBody);
    const accept = await api().post('/advertiser/conversions.accept', {
      program: PROGRAM_EUR,
      id: conversion.id,
    });

    // Assess
    expect(first.status).toBe(200);
    expect(first.body['conversion']).toMatchObject({ status: 'refused', refuseReason: 'cancelled order' });
    expect(second.status).toBe(422);
    expect(second.body['message']).toMatch(/already refused/);
    expect(accept.status).toBe(422);
    expect(accept.body['message']).toMatch(/is refused and can no longer be accepted/);
  });

  it('accepts only a pending conversion: an accepted one again is 422 and unchanged, a locked one 422 naming the lock', async () => {
    // Prepare
    const conversion = await addConversion(sandbox);
    const body = { program: PROGRAM_EUR, id: conversion.id };
    const first = await api().post('/advertiser/conversions.accept', body);
    clock.now = T0 + 1000;

    // Act
    const again = await api().post('/advertiser/conversions.accept', body);
    clock.now = T0 + 20 * DAY;
    const locked = await api().post('/advertiser/conversions.accept', body);

    // Assess
    expect(first.status).toBe(200);
    expect(again.status).toBe(422);
    expect(sandbox.control.conversions()[0]).toMatchObject({
      status: 'accepted',
      acceptedAt: new Date(T0).toISOString(),
    });
    expect(locked.status).toBe(422);
    expect(locked.body['message']).toBe(
      `conversion ${conversion.id} is locked since ${new Date(T0 + 20 * DAY).toISOString()} and can no longer be accepted`,
    );
  });

  it('answers 404 for an unknown conversion id or one of another program', async () => {
    // Prepare
    const conversion = await addConversion(sandbox);

    // Act
    const unknown = await api().post('/advertiser/conversions.accept', {
      program: PROGRAM_EUR,
      id: 'abcabcabcabcabcabcabcabc',
    });
    const otherProgram = await api().post('/advertiser/conversions.accept', {
      program: PROGRAM_USD,
      id: conversion.id,
    });
    const update = await api().post('/advertiser/conversions.update', {
      id: 'abcabcabcabcabcabcabcabc',
      amount: 1,
      reason: 'x',
    });

    // Assess
    expect([unknown.status, otherProgram.status, update.status]).toEqual([404, 404, 404]);
    expect(unknown.body).toMatchObject({ statusCode: 404, error: 'Not Found', field: 'id' });
  });

  it('validates accept, refuse and update bodies with the shared schemas', async () => {
    // Act
    const noReason = await api().post('/advertiser/conversions.refuse', {
      program: PROGRAM_EUR,
      id: 'abcabcabcabcabcabcabcabc',
      reason: '  ',
    });
    const extraField = await api().post('/advertiser/conversions.update', {
      id: 'abcabcabcabcabcabcabcabc',
      amount: 1,
      reason: 'x',
      program: PROGRAM_EUR,
    });
    const badId = await api().post('/advertiser/conversions.accept', { program: PROGRAM_EUR, id: 'order-1' });

    // Assess
    expect(noReason.body).toMatchObject({ statusCode: 400, field: 'reason' });
    expect(extraField.body).toMatchObject({ statusCode: 400, field: 'program' });
    expect(badId.body).toMatchObject({ statusCode: 400, field: 'id' });
  });

  it('finds the oldest match with conversions.info and answers 404 when there is none', async () => {
    // Prepare
    const oldest = await addConversion(sandbox, { customerId: 'cust-9' });
    clock.now = T0 + 1000;
    await addConversion(sandbox, { customerId: 'cust-9' });

    // Act
    const byExternalId = await api().get('/advertiser/conversions.info', {
      program: PROGRAM_EUR,
      externalId: 'order-1',
    });
    const byCustomer = await api().get('/advertiser/conversions.info', {
      program: PROGRAM_EUR,
      customerId: 'cust-9',
    });
    const none = await api().get('/advertiser/conversions.info', {
      program: PROGRAM_EUR,
      externalId: 'order-404',
    });
    const noKey = await api().get('/advertiser/conversions.info', { program: PROGRAM_EUR });
    const unknownParam = await api().get('/advertiser/conversions.info', {
      program: PROGRAM_EUR,
      externalId: 'order-1',
      shop: 'x',
    });

    // Assess
    expect((byExternalId.body['conversion'] as StoredConversion).id).toBe(oldest.id);
    expect((byCustomer.body['conversion'] as StoredConversion).id).toBe(oldest.id);
    expect(none.status).toBe(404);
    expect(none.body).toEqual({
      statusCode: 404,
      error: 'Not Found',
      message: 'no conversion for externalId order-404',
    });
    expect(noKey.body).toMatchObject({ statusCode: 400, field: 'externalId' });
    expect(unknownParam.body).toMatchObject({ statusCode: 400, field: 'shop' });
  });

  it('counts pending conversions as accepted after autoAcceptAfterMs', async () => {
    // Prepare
    const auto = await startSandbox({
      port: 0,
      now: () => clock.now,
      autoAcceptAfterMs: DAY,
      lockAfterMs: DAY,
    });
    try {
      await addConversion(auto);

      // Act
      clock.now = T0 + DAY;
      const accepted = auto.control.conversions()[0];
      clock.now = T0 + 2 * DAY;
      const locked = auto.control.conversions()[0];

      // Assess
      expect(accepted).toMatchObject({
        status: 'accepted',
        acceptedAt: new Date(T0 + DAY).toISOString(),
        isLocked: false,
      });
      expect(locked).toMatchObject({
        status: 'accepted',
        isLocked: true,
        lockedAt: new Date(T0 + 2 * DAY).toISOString(),
      });
    } finally {
      await auto.close();
    }
  });
});

describe('sandbox: conversions.list', () => {
  let sandbox: RunningSandbox;
  const clock = { now: T0 };
  let ids: string[] = [];
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0, now: () => clock.now });
    const rows = [
      { externalId: 'a-1', amount: 300, customerId: 'c-1', subId: 'news' },
      { externalId: 'a-2', amount: 100, customerId: 'c-2' },
      { externalId: 'a-3', amount: 200, program: PROGRAM_USD, rule: RULE_USD },
      { externalId: 'a-4', amount: 400, rule: DEFAULT_SEED.rules[1] },
    ];
    ids = [];
    for (const [i, row] of rows.entries()) {
      clock.now = T0 + i * DAY;
      ids.push((await addConversion(sandbox, row)).id);
    }
    sandbox.control.accept(ids[0]!);
    sandbox.control.lock(ids[1]!);
    sandbox.control.unlock(ids[0]!);
    clock.now = T0 + 10 * DAY;
    await clientOf(sandbox).post('/advertiser/conversions.refuse', {
      program: PROGRAM_EUR,
      id: ids[3],
      reason: 'fraud',
    });
  });
  afterAll(() => sandbox.close());

  const list = async (query: Record<string, string | string[]> = {}) => {
    const { status, body } = await clientOf(sandbox).get('/advertiser/conversions.list', query);
    expect(status).toBe(200);
    const conversions = body['conversions'] as { total: number; data: StoredConversion[] };
    return { total: conversions.total, externalIds: conversions.data.map((c) => c.externalId) };
  };

  it('answers { statusCode, conversions: { total, data } }, newest first by default', async () => {
    // Act
    const { status, body } = await clientOf(sandbox).get('/advertiser/conversions.list');

    // Assess
    expect(status).toBe(200);
    expect(body['statusCode']).toBe(200);
    const conversions = body['conversions'] as { total: number; data: StoredConversion[] };
    expect(conversions.total).toBe(4);
    expect(conversions.data.map((c) => c.externalId)).toEqual(['a-4', 'a-3', 'a-2', 'a-1']);
    expect(conversions.data[0]).toMatchObject({ id: ids[3], status: 'refused', refuseReason: 'fraud' });
  });

  it.each([
    [{ program: PROGRAM_USD }, ['a-3']],
    [{ status: 'accepted' }, ['a-2', 'a-1']],
    [{ status: 'pending' }, ['a-3']],
    [{ locked: 'true' }, ['a-2']],
    [{ locked: 'false' }, ['a-4', 'a-3', 'a-1']],
    [{ externalId: 'a-2' }, ['a-2']],
    [{ customerId: 'c-1' }, ['a-1']],
    [{ subId: 'news' }, ['a-1']],
    [{ rule: DEFAULT_SEED.rules[1]! }, ['a-4']],
    [{ from: new Date(T0 + DAY).toISOString(), to: new Date(T0 + 2 * DAY).toISOString() }, ['a-3', 'a-2']],
    [{ orderBy: 'amount', sort: 'asc' }, ['a-2', 'a-3', 'a-1', 'a-4']],
    [{ orderBy: 'externalId', sort: 'asc', program: PROGRAM_EUR }, ['a-1', 'a-2', 'a-4']],
  ])('filters and orders with %o', async (query, expected) => {
    // Act
    const { total, externalIds } = await list(query);

    // Assess
    expect(externalIds).toEqual(expected);
    expect(total).toBe(expected.length);
  });

  it('pages with limit and offset and counts total before paging', async () => {
    // Act
    const page = await list({ orderBy: 'amount', sort: 'desc', limit: '2', offset: '1' });

    // Assess
    expect(page).toEqual({ total: 4, externalIds: ['a-1', 'a-3'] });
  });

  it.each([
    [{ limit: '10001' }, 'limit'],
    [{ limit: 'ten' }, 'limit'],
    [{ status: 'lost' }, 'status'],
    [{ status: ['pending', 'accepted'] }, 'status'],
    [{ program: 'not-hex' }, 'program'],
    [{ locked: 'yes' }, 'locked'],
    [{ from: 'yesterday' }, 'from'],
    [{ color: 'red' }, 'color'],
  ])('answers 400 naming the bad query parameter in %o', async (query, field) => {
    // Act
    const { status, body } = await clientOf(sandbox).get('/advertiser/conversions.list', query);

    // Assess
    expect(status).toBe(400);
    expect(body).toMatchObject({ statusCode: 400, field });
  });
});

describe('sandbox: rate limit', () => {
  it('answers ≥ 50 of a 150-request burst with 429 carrying the five headers, then frees the window', async () => {
    // Prepare: a frozen clock keeps the whole burst in one window however slow the machine is.
    const clock = { now: T0 };
    const sandbox = await startSandbox({ port: 0, now: () => clock.now });
    try {
      const api = clientOf(sandbox);

      // Act
      const answers = await Promise.all(
        Array.from({ length: 150 }, () => api.get('/advertiser/advertisers.me')),
      );
      clock.now = T0 + 400;
      const stillLimited = await api.get('/advertiser/advertisers.me');
      const otherRoute = await api.get('/advertiser/conversions.list');
      clock.now = T0 + 1000;
      const nextWindow = await api.get('/advertiser/advertisers.me');

      // Assess
      const limited = answers.filter((a) => a.status === 429);
      expect(limited.length).toBeGreaterThanOrEqual(50);
      expect(answers.filter((a) => a.status === 200)).toHaveLength(100);
      for (const answer of answers) {
        for (const header of RATE_HEADERS) expect(answer.headers.get(header)).not.toBeNull();
        expect(answer.headers.get('x-svc-ratelimit-route-second-limit')).toBe('100');
        expect(answer.headers.get('x-svc-ratelimit-route-second-reset')).toBe('1');
      }
      for (const answer of limited) {
        expect(answer.body).toMatchObject({ statusCode: 429, error: 'Too Many Requests' });
        expect(answer.headers.get('x-svc-ratelimit-route-second-retry-after')).toBe('1.000');
        expect(answer.headers.get('x-svc-ratelimit-route-second-remaining')).toBe('0');
        expect(answer.headers.get('x-svc-ratelimit-route-second-consumed')).toBe('100');
        expect(answer.headers.get('retry-after')).toBe('1');
      }
      expect(stillLimited.status).toBe(429);
      expect(stillLimited.headers.get('x-svc-ratelimit-route-second-retry-after')).toBe('0.600');
      expect(otherRoute.status).toBe(200);
      expect(nextWindow.status).toBe(200);
      expect(nextWindow.headers.get('x-svc-ratelimit-route-second-remaining')).toBe('99');
      expect(sandbox.control.calls()['/advertiser/advertisers.me']).toEqual({
        total: 152,
        byStatus: { '200': 101, '429': 51 },
      });
    } finally {
      await sandbox.close();
    }
  });

  it('counts per token, counts rejected requests, and honours vendor and ratePerSecond', async () => {
    // Prepare
    const clock = { now: T0 };
    const sandbox = await startSandbox({ port: 0, now: () => clock.now, vendor: 'acme', ratePerSecond: 2 });
    try {
      const api = clientOf(sandbox);
      const intruder = clientOf(sandbox, 'other-token');

      // Act
      const invalid = await api.post('/advertiser/conversions.add', { kind: 'tracking' });
      const valid = await api.post('/advertiser/conversions.add', trackingBody());
      const third = await api.post('/advertiser/conversions.add', trackingBody());
      const otherToken = await intruder.post('/advertiser/conversions.add', trackingBody());

      // Assess
      expect([invalid.status, valid.status, third.status, otherToken.status]).toEqual([400, 200, 429, 401]);
      expect(third.headers.get('x-acme-ratelimit-route-second-limit')).toBe('2');
      expect(third.headers.get('x-acme-ratelimit-route-second-retry-after')).toBe('1.000');
      expect(otherToken.headers.get('x-acme-ratelimit-route-second-remaining')).toBe('1');
      expect(sandbox.control.conversions()).toHaveLength(1);
    } finally {
      await sandbox.close();
    }
  });
});

describe('sandbox: foreign consumer', () => {
  it('spends N requests per second of a route on the same token, so the client sees the shared budget', async () => {
    // Prepare
    const clock = { now: T0 };
    const sandbox = await startSandbox({ port: 0, now: () => clock.now });
    try {
      const api = clientOf(sandbox);
      const set = await api.control('PUT', '/foreign-load', {
        route: '/advertiser/advertisers.me',
        perSecond: 30,
      });

      // Act: one request opens the window; half a second later the foreign client has sent 15 more
      const first = await api.get('/advertiser/advertisers.me');
      clock.now = T0 + 500;
      const later = await api.get('/advertiser/advertisers.me');
      const otherRoute = await api.get('/advertiser/conversions.list');
      await api.control('PUT', '/foreign-load', {
        route: '/advertiser/advertisers.me',
        perSecond: 0,
      });
      clock.now = T0 + 1500;
      const stopped = await api.get('/advertiser/advertisers.me');

      // Assess
      expect(set.status).toBe(200);
      expect(set.body).toEqual({ foreignLoad: { route: '/advertiser/advertisers.me', perSecond: 30 } });
      expect(first.headers.get('x-svc-ratelimit-route-second-remaining')).toBe('98');
      expect(later.headers.get('x-svc-ratelimit-route-second-remaining')).toBe('82');
      expect(otherRoute.headers.get('x-svc-ratelimit-route-second-remaining')).toBe('99');
      expect(stopped.headers.get('x-svc-ratelimit-route-second-remaining')).toBe('99');
      expect(sandbox.control.calls()['/advertiser/advertisers.me']?.total).toBe(3);
    } finally {
      await sandbox.close();
    }
  });

  it('refuses a route the sandbox does not serve, naming the field', async () => {
    const sandbox = await startSandbox({ port: 0 });
    try {
      const answer = await clientOf(sandbox).control('PUT', '/foreign-load', {
        route: '/advertiser/nope',
        perSecond: 30,
      });

      expect(answer.status).toBe(400);
      expect(answer.body).toMatchObject({ field: 'route' });
    } finally {
      await sandbox.close();
    }
  });
});

describe('sandbox: faults', () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0 });
  });
  afterAll(() => sandbox.close());
  beforeEach(() => sandbox.control.reset());

  it('answers a forced burst of 429 with the announced retry-after, then serves again', async () => {
    // Prepare
    sandbox.control.setFaults({ burst429: 3, burstRetryAfterMs: 1500 });
    const api = clientOf(sandbox);

    // Act
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await api.get('/advertiser/advertisers.me'));

    // Assess
    expect(answers.map((a) => a.status)).toEqual([429, 429, 429, 200]);
    for (const answer of answers.slice(0, 3)) {
      expect(answer.headers.get('x-svc-ratelimit-route-second-retry-after')).toBe('1.500');
      expect(answer.headers.get('retry-after')).toBe('2');
      for (const header of RATE_HEADERS) expect(answer.headers.get(header)).not.toBeNull();
    }
    expect(sandbox.control.getFaults().burst429).toBe(0);
  });

  it('reports the window as spent on a forced 429, as a platform 429 does', async () => {
    // Prepare
    sandbox.control.setFaults({ burst429: 1 });
    const api = clientOf(sandbox);

    // Act
    const limited = await api.get('/advertiser/advertisers.me');
    const served = await api.get('/advertiser/advertisers.me');

    // Assess: a 429 is "the rate limit is exceeded": nothing remains of the window.
    expect(limited.status).toBe(429);
    expect(limited.headers.get('x-svc-ratelimit-route-second-remaining')).toBe('0');
    expect(limited.headers.get('x-svc-ratelimit-route-second-consumed')).toBe('100');
    expect(served.status).toBe(200);
  });

  it('answers 503 to every API request with errorRate 1, but leaves control routes alone', async () => {
    // Prepare
    const api = clientOf(sandbox);
    await api.control('PUT', '/faults', { errorRate: 1 });

    // Act
    const add = await api.post('/advertiser/conversions.add', trackingBody());
    const me = await api.get('/advertiser/advertisers.me');
    const calls = await api.control('GET', '/calls');

    // Assess
    expect(add.status).toBe(503);
    expect(add.body).toMatchObject({ statusCode: 503, error: 'Service Unavailable' });
    for (const header of RATE_HEADERS) expect(add.headers.get(header)).not.toBeNull();
    expect(me.status).toBe(503);
    expect(sandbox.control.conversions()).toEqual([]);
    expect(calls.status).toBe(200);
    expect(calls.body['calls']).toEqual({
      '/advertiser/conversions.add': { total: 1, byStatus: { '503': 1 } },
      '/advertiser/advertisers.me': { total: 1, byStatus: { '503': 1 } },
    });
  });

  it('restricts faults to the routes named, with the status asked for', async () => {
    // Prepare
    sandbox.control.setFaults({ errorRate: 1, errorStatus: 502, routes: ['/advertiser/conversions.add'] });
    const api = clientOf(sandbox);

    // Act
    const add = await api.post('/advertiser/conversions.add', trackingBody());
    const me = await api.get('/advertiser/advertisers.me');

    // Assess
    expect(add.status).toBe(502);
    expect(me.status).toBe(200);
  });

  it('draws the same faults from the same seed', async () => {
    // Prepare
    const api = clientOf(sandbox);
    const draw = async () => {
      sandbox.control.setFaults({ errorRate: 0.5, seed: 42 });
      const statuses = [];
      for (let i = 0; i < 20; i++) statuses.push((await api.get('/advertiser/advertisers.me')).status);
      return statuses;
    };

    // Act
    const first = await draw();
    const second = await draw();

    // Assess
    expect(first).toEqual(second);
    expect(first).toContain(503);
    expect(first).toContain(200);
  });

  it('adds latency before answering', async () => {
    // Prepare
    sandbox.control.setFaults({ latencyMs: 150 });
    const started = performance.now();

    // Act
    const me = await clientOf(sandbox).get('/advertiser/advertisers.me');

    // Assess
    expect(me.status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(145);
  });

  it('holds a hung request until the client aborts, and stays healthy', async () => {
    // Prepare
    sandbox.control.setFaults({ hangRate: 1, hangMs: 60_000 });

    // Act
    const hung = fetch(`${sandbox.url}/advertiser/advertisers.me`, {
      headers: { authorization: `Bearer ${sandbox.token}` },
      signal: AbortSignal.timeout(300),
    });
    await expect(hung).rejects.toMatchObject({ name: 'TimeoutError' });
    sandbox.control.setFaults({});
    const after = await clientOf(sandbox).get('/advertiser/advertisers.me');

    // Assess
    expect(after.status).toBe(200);
    expect(sandbox.control.calls()['/advertiser/advertisers.me']?.byStatus).toEqual({ hang: 1, '200': 1 });
  });

  it('records a late write after the client gave up, lateWriteMs after the request', async () => {
    // Prepare: a sandbox on a clock the test moves. On the wall clock, a loaded machine could pass
    // the 400 ms before the test looked, or the client's 100 ms timeout before the sandbox had read
    // the body (nothing recorded then, rightly, and the test waited in vain)
    const ADD = '/advertiser/conversions.add';
    const clock = { now: T0 };
    const own = await startSandbox({
      port: 0,
      now: () => clock.now,
      faults: { lateWriteRate: 1, lateWriteMs: 400, routes: [ADD] },
    });
    const late1 = () => own.control.conversions().filter((c) => c.externalId === 'late-1');

    try {
      // Act: the client gives up once the sandbox holds the request
      const giveUp = new AbortController();
      const unanswered = fetch(`${own.url}${ADD}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${own.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(trackingBody({ externalId: 'late-1' })),
        signal: giveUp.signal,
      });
      await until(
        () => own.control.calls()[ADD]?.byStatus['hang'] ?? 0,
        (held) => held === 1,
        'the add held',
      );
      giveUp.abort();
      await expect(unanswered).rejects.toMatchObject({ name: 'AbortError' });
      const rightAfter = late1().length;
      clock.now = T0 + 400;
      const landed = await until(late1, (found) => found.length > 0, 'the late write of late-1');

      // Assess: nothing when the client gave up; one conversion, dated lateWriteMs after the request
      expect(rightAfter).toBe(0);
      expect(landed).toHaveLength(1);
      expect(landed[0]?.createdAt).toBe(new Date(T0 + 400).toISOString());
      expect(own.control.calls()[ADD]?.byStatus).toEqual({ hang: 1 });
    } finally {
      await own.close();
    }
  });

  it('lands a late write when its own clock says so: minutes late without waiting minutes', async () => {
    // Prepare: a sandbox on an injected clock; the add is due 240 s after it arrived
    const clock = { now: T0 };
    const late = await startSandbox({
      port: 0,
      now: () => clock.now,
      faults: { lateWriteRate: 1, lateWriteMs: 240_000, routes: ['/advertiser/conversions.add'] },
    });
    const shown = async () => {
      const listed = await clientOf(late).get('/advertiser/conversions.list', { externalId: 'late-2' });
      const viaControl = await clientOf(late).control('GET', '/conversions');
      return {
        listed: (listed.body['conversions'] as { total: number }).total,
        inProcess: late.control.conversions().length,
        viaControl: (viaControl.body['conversions'] as unknown[]).length,
      };
    };

    try {
      // Act
      const unanswered = fetch(`${late.url}/advertiser/conversions.add`, {
        method: 'POST',
        headers: { authorization: `Bearer ${late.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(trackingBody({ externalId: 'late-2' })),
        signal: AbortSignal.timeout(100),
      });
      await expect(unanswered).rejects.toMatchObject({ name: 'TimeoutError' });
      clock.now = T0 + 239_999;
      const justBefore = await shown();
      clock.now = T0 + 300_000;
      const after = await shown();

      // Assess: nothing until the due time, then everywhere, dated when the platform recorded it
      expect(justBefore).toEqual({ listed: 0, inProcess: 0, viaControl: 0 });
      expect(after).toEqual({ listed: 1, inProcess: 1, viaControl: 1 });
      expect(late.control.conversions()[0]?.createdAt).toBe(new Date(T0 + 240_000).toISOString());
    } finally {
      await late.close();
    }
  });

  it('drops a hung request after hangMs without answering', async () => {
    // Prepare
    sandbox.control.setFaults({ hangRate: 1, hangMs: 100 });

    // Act
    const hung = fetch(`${sandbox.url}/advertiser/advertisers.me`, {
      headers: { authorization: `Bearer ${sandbox.token}` },
    });

    // Assess
    await expect(hung).rejects.toThrow();
  });

  it('closes promptly while a request hangs', async () => {
    // Prepare
    const own = await startSandbox({ port: 0, faults: { hangRate: 1, hangMs: 600_000 } });
    const hung = fetch(`${own.url}/advertiser/advertisers.me`, {
      headers: { authorization: `Bearer ${own.token}` },
    });
    const settled = hung.then(
      () => 'answered',
      () => 'dropped',
    );
    await until(
      () => own.control.calls()['/advertiser/advertisers.me']?.byStatus['hang'] ?? 0,
      (hung) => hung === 1,
      'the request to hang',
    );

    // Act
    await own.close();

    // Assess
    expect(await settled).toBe('dropped');
  });
});

describe('sandbox: control routes', () => {
  let sandbox: RunningSandbox;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0 });
  });
  afterAll(() => sandbox.close());
  beforeEach(() => sandbox.control.reset());

  it('lists, accepts, locks, unlocks, changes and deletes conversions', async () => {
    // Prepare
    const api = clientOf(sandbox);
    const conversion = await addConversion(sandbox);
    const path = `/conversions/${conversion.id}`;

    // Act
    const listed = await api.control('GET', '/conversions');
    const patched = await api.control('PATCH', path, { amount: 999 });
    const accepted = await api.control('POST', `${path}/accept`);
    const locked = await api.control('POST', `${path}/lock`);
    const refuseLocked = await api.post('/advertiser/conversions.refuse', {
      program: PROGRAM_EUR,
      id: conversion.id,
      reason: 'late return',
    });
    const unlocked = await api.control('POST', `${path}/unlock`);
    const refuseUnlocked = await api.post('/advertiser/conversions.refuse', {
      program: PROGRAM_EUR,
      id: conversion.id,
      reason: 'late return',
    });
    const deleted = await api.control('DELETE', path);
    const missing = await api.control('POST', `${path}/accept`);
    const missingInfo = await api.get('/advertiser/conversions.info', {
      program: PROGRAM_EUR,
      externalId: conversion.externalId,
    });

    // Assess
    expect((listed.body['conversions'] as StoredConversion[]).map((c) => c.id)).toEqual([conversion.id]);
    expect(patched.body['conversion']).toMatchObject({ amount: 999 });
    expect(accepted.body['conversion']).toMatchObject({ status: 'accepted', isLocked: false });
    expect(locked.body['conversion']).toMatchObject({ isLocked: true, lockedAt: expect.any(String) });
    expect(refuseLocked.status).toBe(422);
    expect(refuseLocked.body['message']).toMatch(/is locked since .* and can no longer be refused/);
    expect(unlocked.body['conversion']).toMatchObject({ isLocked: false, lockedAt: null });
    expect(refuseUnlocked.status).toBe(200);
    expect(deleted.status).toBe(204);
    expect(missing.status).toBe(404);
    expect(missingInfo.status).toBe(404);
    expect(sandbox.control.conversions()).toEqual([]);
  });

  it('records a conversion as the browser pixel does, with a commission, and refuses bad values by field', async () => {
    // Prepare
    const api = clientOf(sandbox);
    // Act
    const seeded = await api.control('POST', '/conversions', {
      program: PROGRAM_USD,
      externalId: 'pixel-1',
      amount: 4_999,
      createdAt: '2026-05-02T10:00:00.000Z',
    });
    const given = await api.control('POST', '/conversions', {
      program: PROGRAM_EUR,
      externalId: 'pixel-2',
      amount: 10_000,
      status: 'accepted',
      commission: 1_234,
    });
    const badProgram = await api.control('POST', '/conversions', {
      program: 'ffffffffffffffffffffffff',
      externalId: 'x',
      amount: 1,
    });
    const badAmount = await api.control('POST', '/conversions', {
      program: PROGRAM_EUR,
      externalId: 'x',
      amount: 1.5,
    });
    const listed = await api.get('/advertiser/conversions.list', {
      program: PROGRAM_USD,
      from: '2026-05-01T00:00:00.000Z',
      to: '2026-05-31T00:00:00.000Z',
    });
    // Assess
    expect(seeded.body['conversion']).toMatchObject({
      id: expect.stringMatching(HEX24),
      externalId: 'pixel-1',
      amount: 4_999,
      currency: 'USD',
      rule: RULE_USD,
      status: 'pending',
      cids: null,
      createdAt: '2026-05-02T10:00:00.000Z',
      commission: 500,
    });
    expect(given.body['conversion']).toMatchObject({
      status: 'accepted',
      commission: 1_234,
      currency: 'EUR',
    });
    expect(badProgram).toMatchObject({ status: 400, body: { field: 'program' } });
    expect(badAmount).toMatchObject({ status: 400, body: { field: 'amount' } });
    expect(
      (listed.body['conversions'] as { data: StoredConversion[] }).data.map((c) => c.externalId),
    ).toEqual(['pixel-1']);
    expect(sandbox.control.calls()['/advertiser/conversions.add']).toBeUndefined();
  });

  it('answers 422 as an injected fault on the routes named', async () => {
    // Prepare
    const api = clientOf(sandbox);
    const conversion = await addConversion(sandbox);
    sandbox.control.setFaults({ errorRate: 1, errorStatus: 422, routes: ['/advertiser/conversions.refuse'] });
    // Act
    const refused = await api.post('/advertiser/conversions.refuse', {
      program: PROGRAM_EUR,
      id: conversion.id,
      reason: 'returned',
    });
    // Assess
    expect(refused.status).toBe(422);
    expect(sandbox.control.conversions()[0]?.status).toBe('pending');
  });

  it('reads and replaces faults and options, refusing bad values by field', async () => {
    // Prepare
    const api = clientOf(sandbox);

    // Act
    const putFaults = await api.control('PUT', '/faults', { errorRate: 0.25, seed: 7 });
    const getFaults = await api.control('GET', '/faults');
    const badRate = await api.control('PUT', '/faults', { errorRate: 2 });
    const badRoute = await api.control('PUT', '/faults', { errorRate: 1, routes: ['/advertiser/nope'] });
    const typo = await api.control('PUT', '/faults', { errorRat: 1 });
    const putOptions = await api.control('PUT', '/options', { duplicates: 'reject', ratePerSecond: 5 });
    const badOption = await api.control('PUT', '/options', { addResponse: 'full' });

    // Assess
    expect(putFaults.body).toEqual({ faults: { errorRate: 0.25, seed: 7 } });
    expect(getFaults.body).toEqual({ faults: { errorRate: 0.25, seed: 7 } });
    expect(badRate.body).toMatchObject({ statusCode: 400, field: 'errorRate' });
    expect(badRoute.body).toMatchObject({ statusCode: 400, field: 'routes.0' });
    expect(typo.body).toMatchObject({ statusCode: 400, field: 'errorRat' });
    expect(putOptions.body['options']).toMatchObject({
      duplicates: 'reject',
      ratePerSecond: 5,
      addResponse: 'bare',
    });
    expect(badOption.body).toMatchObject({ statusCode: 400, field: 'addResponse' });
    expect(sandbox.control.getFaults()).toEqual({ errorRate: 0.25, seed: 7 });
  });

  it('resets conversions, calls, faults and options', async () => {
    // Prepare
    const api = clientOf(sandbox);
    const added = await addConversion(sandbox);
    await api.control('PUT', '/options', { duplicates: 'reject' });
    await api.control('PUT', '/faults', { errorRate: 1 });

    // Act
    const reset = await api.control('POST', '/reset');
    const calls = await api.control('GET', '/calls');
    const options = await api.control('GET', '/options');
    const info = await api.get('/advertiser/conversions.info', {
      program: PROGRAM_EUR,
      externalId: added.externalId,
    });

    // Assess
    expect(reset.status).toBe(204);
    expect(calls.body).toEqual({ calls: {} });
    expect(options.body['options']).toMatchObject({ duplicates: 'create' });
    expect(sandbox.control.getFaults()).toEqual({});
    expect(sandbox.control.conversions()).toEqual([]);
    expect(info.status).toBe(404);
  });

  it('answers 404 and 405 on control paths, and 400 on a malformed control body', async () => {
    // Prepare
    const api = clientOf(sandbox);

    // Act
    const unknown = await api.control('GET', '/nothing');
    const wrongMethod = await api.control('DELETE', '/faults');
    const malformed = await fetch(`${sandbox.url}/_sandbox/faults`, { method: 'PUT', body: '{' });

    // Assess
    expect(unknown.status).toBe(404);
    expect(wrongMethod.status).toBe(405);
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { message: string }).message).toMatch(/malformed JSON/);
  });
});

describe('sandbox: persistence', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sandbox-persist-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('reloads conversions written by a previous run', async () => {
    // Prepare
    const persistPath = join(dir, 'nested', 'state.json');
    const first = await startSandbox({ port: 0, persistPath });
    const conversion = await addConversion(first);
    await clientOf(first).post('/advertiser/conversions.refuse', {
      program: PROGRAM_EUR,
      id: conversion.id,
      reason: 'cancelled',
    });
    await first.close();

    // Act
    const second = await startSandbox({ port: 0, persistPath });
    const info = await clientOf(second).get('/advertiser/conversions.info', {
      program: PROGRAM_EUR,
      externalId: 'order-1',
    });
    await addConversion(second, { externalId: 'order-2' });
    await second.close();

    // Assess
    expect(info.body['conversion']).toMatchObject({
      id: conversion.id,
      status: 'refused',
      refuseReason: 'cancelled',
    });
    const saved = JSON.parse(readFileSync(persistPath, 'utf8'));
    expect(saved.conversions.map((c: StoredConversion) => c.externalId)).toEqual(['order-1', 'order-2']);
    expect(readdirSync(join(dir, 'nested'))).toEqual(['state.json']);
  });

  it('refuses to start on a corrupt file, naming it', async () => {
    // Prepare
    const persistPath = join(dir, 'state.json');
    writeFileSync(persistPath, '{"version": 1, "conv');

    // Act
    const start = startSandbox({ port: 0, persistPath });

    // Assess
    await expect(start).rejects.toThrow(persistPath);
  });
});

describe('sandbox: options and environment', () => {
  it.each<[SandboxOptions, string]>([
    [{ ratePerSecond: 0 }, 'ratePerSecond'],
    [{ vendor: 'a b' }, 'vendor'],
    [{ faults: { errorRate: -1 } }, 'faults.errorRate'],
    [{ seed: { programs: ['5ad000000000000000000101'] } }, 'seed.rules'],
    [{ seed: { advertiser: 'x' } }, 'seed.advertiser'],
  ])('refuses to start with %o', async (options, name) => {
    // Act
    const start = startSandbox({ port: 0, ...options });

    // Assess
    await expect(start).rejects.toThrow(name);
  });

  it('serves a configured seed', async () => {
    // Prepare
    const seed = {
      programs: ['aaaaaaaaaaaaaaaaaaaaaaa1'],
      rules: ['bbbbbbbbbbbbbbbbbbbbbbb1', 'bbbbbbbbbbbbbbbbbbbbbbb2'],
    };
    const sandbox = await startSandbox({ port: 0, seed });
    try {
      // Act
      const added = await clientOf(sandbox).post(
        '/advertiser/conversions.add',
        trackingBody({ program: seed.programs[0], rule: seed.rules[1] }),
      );

      // Assess
      expect(added.status).toBe(200);
      expect(sandbox.seed.programs).toEqual(seed.programs);
      expect(sandbox.seed.partnerships).toEqual(DEFAULT_SEED.partnerships);
    } finally {
      await sandbox.close();
    }
  });

  it('reads SANDBOX_* variables', () => {
    // Act
    const options = sandboxOptionsFromEnv({
      SANDBOX_PORT: '0',
      SANDBOX_TOKEN: 't0k',
      SANDBOX_VENDOR: 'acme',
      SANDBOX_RATE: '7',
      SANDBOX_DUPLICATES: 'reject',
      SANDBOX_ADD_RESPONSE: 'withId',
      SANDBOX_FAULTS: '{"errorRate":0.1,"routes":["/advertiser/conversions.add"]}',
      SANDBOX_PERSIST: '.sandbox-data.json',
    });

    // Assess
    expect(options).toEqual({
      port: 0,
      token: 't0k',
      vendor: 'acme',
      ratePerSecond: 7,
      duplicates: 'reject',
      addResponse: 'withId',
      faults: { errorRate: 0.1, routes: ['/advertiser/conversions.add'] },
      persistPath: '.sandbox-data.json',
    });
    expect(sandboxOptionsFromEnv({})).toEqual({ port: 4010, token: 'sandbox-token' });
  });

  it('takes SANDBOX_FAULTS on a legacy 2.0 route, as startSandbox and PUT /_sandbox/faults do', async () => {
    // Prepare
    const faults = { errorRate: 1, routes: ['/2.0/advertiser/{programId}/conversions/add'] };
    const sandbox = await startSandbox({ port: 0 });
    try {
      // Act
      const fromEnv = () => sandboxOptionsFromEnv({ SANDBOX_FAULTS: JSON.stringify(faults) });
      const put = await fetch(`${sandbox.url}/_sandbox/faults`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(faults),
      });
      // Assess
      expect(put.status).toBe(200);
      expect(fromEnv).not.toThrow();
      expect(fromEnv().faults).toEqual(faults);
    } finally {
      await sandbox.close();
    }
  });

  it.each([
    ['SANDBOX_PORT', '70000'],
    ['SANDBOX_RATE', 'fast'],
    ['SANDBOX_RATE', '0'],
    ['SANDBOX_DUPLICATES', 'merge'],
    ['SANDBOX_ADD_RESPONSE', 'full'],
    ['SANDBOX_VENDOR', 'a b'],
    ['SANDBOX_FAULTS', '{"errorRate":'],
    ['SANDBOX_FAULTS', '{"errorRate":3}'],
    ['SANDBOX_FAULTS', '{"routes":["/nope"]}'],
    ['SANDBOX_SEED', '{"programs":[]}'],
  ])('names %s when it is %s', (name, value) => {
    // Act
    const read = () => sandboxOptionsFromEnv({ [name]: value });

    // Assess
    expect(read).toThrow(name);
  });

  it('runs as `npm run sandbox`: prints the URL, token and seeded ids, and stops on SIGTERM', async () => {
    // Prepare
    const child = spawn(process.execPath, ['sandbox/main.ts'], {
      cwd: join(import.meta.dirname, '..', '..'),
      env: { ...process.env, SANDBOX_PORT: '0', SANDBOX_TOKEN: 'main-token' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
    });
    const exited = once(child, 'exit');
    // The banner's last line, however long a loaded machine takes to start Node.
    await new Promise<void>((resolve, reject) => {
      const check = () => {
        if (/users: .*\n/.test(output)) resolve();
      };
      child.stdout.on('data', check);
      child.once('exit', () => reject(new Error(`the sandbox exited before its banner:\n${output}`)));
      check();
    });
    const url = /listening on (http:\/\/\S+)/.exec(output)?.[1] ?? '';

    // Act
    const me = await fetch(`${url}/advertiser/advertisers.me`, {
      headers: { authorization: 'Bearer main-token' },
    });
    child.kill('SIGTERM');
    const [code] = await exited;

    // Assess
    expect(me.status).toBe(200);
    expect(output).toContain('main-token');
    for (const id of [
      DEFAULT_SEED.advertiser,
      ...DEFAULT_SEED.programs,
      ...DEFAULT_SEED.rules,
      ...DEFAULT_SEED.partnerships,
    ]) {
      expect(output).toContain(id);
    }
    expect(output).toContain('stopped');
    expect(code).toBe(0);
  });

  it('exits 1 naming the bad variable', async () => {
    // Prepare
    const child = spawn(process.execPath, ['sandbox/main.ts'], {
      cwd: join(import.meta.dirname, '..', '..'),
      env: { ...process.env, SANDBOX_PORT: '0', SANDBOX_RATE: 'fast' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let errors = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      errors += chunk;
    });

    // Act
    const [code] = await once(child, 'exit');

    // Assess
    expect(code).toBe(1);
    expect(errors).toContain('SANDBOX_RATE');
  });
});

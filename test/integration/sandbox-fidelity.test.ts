import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_SEED, type RunningSandbox, startSandbox } from '../../sandbox/server.ts';

// Where the sandbox answered otherwise than the platform's documents (current-api-4.93.md,
// legacy-api-2.0.md) say the platform does: each case is the document's rule, asked over HTTP.

const PROGRAM = DEFAULT_SEED.programs[0]!;
const RULE = DEFAULT_SEED.rules[0]!;
const PARTNERSHIP = DEFAULT_SEED.partnerships[0]!;
const TRACKING_ID = DEFAULT_SEED.trackingIds[0]!;
const T0 = Date.parse('2024-03-01T10:00:00.000Z');

/**
 * ISO 4217 codes in use today that the platform's `Currency` list (API 4.93) does not carry: the
 * list still has their predecessors (BYR, MRO, SLL, STD, VEF, ANG…) or never had them.
 */
const NOT_IN_THE_PLATFORM_LIST = [
  'BYN',
  'MRU',
  'SLE',
  'STN',
  'SVC',
  'USN',
  'UYW',
  'VED',
  'VES',
  'XCG',
  'XSU',
  'XUA',
  'ZWG',
  'ZWL',
];

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

let sandbox: RunningSandbox;
const clock = { now: T0 };

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, now: () => clock.now });
});
afterAll(() => sandbox.close());
beforeEach(() => {
  sandbox.control.reset();
  clock.now = T0;
});

async function call(method: string, path: string, authorization: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${sandbox.url}${path}`, {
    method,
    headers: { authorization, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : {} };
}

const api = (method: string, path: string, body?: unknown) =>
  call(method, path, `Bearer ${sandbox.token}`, body);
const legacy = (method: string, path: string, body?: unknown) =>
  call(
    method,
    `/2.0/advertiser/${PROGRAM}${path}`,
    `Basic ${Buffer.from(`${sandbox.legacy.userCode}:${sandbox.legacy.apiKey}`).toString('base64')}`,
    body,
  );

function manualAdd(overrides: Record<string, unknown> = {}) {
  return {
    kind: 'manual',
    program: PROGRAM,
    rule: RULE,
    externalId: 'order-1',
    amount: 4200,
    affiliateTrackingId: TRACKING_ID,
    ...overrides,
  };
}

describe('sandbox fidelity: currencies are those of the platform list', () => {
  it.each(NOT_IN_THE_PLATFORM_LIST)(
    'refuses a conversion in %s with a 400 naming currency, as the platform would, and stores nothing',
    async (currency) => {
      // Act
      const added = await api('POST', '/advertiser/conversions.add', manualAdd({ currency }));

      // Assess
      expect(added.status).toBe(400);
      expect(added.body).toMatchObject({ statusCode: 400, field: 'currency' });
      expect(added.body['message']).toContain(currency);
      expect(sandbox.control.conversions()).toEqual([]);
    },
  );

  it('refuses a commission adjustment in a currency the platform does not list, naming currency', async () => {
    // Act
    const added = await api('POST', '/advertiser/commissionAdjustments.add', {
      type: 'bonus',
      program: PROGRAM,
      partnership: PARTNERSHIP,
      identifier: 'adj-1',
      commission: 500,
      currency: 'VES',
    });

    // Assess
    expect(added.status).toBe(400);
    expect(added.body).toMatchObject({ field: 'currency' });
  });

  it.each(['EUR', 'JPY', 'BYR', 'VEF', 'MRO'])(
    'still takes %s, which the platform list carries (withdrawn codes included)',
    async (currency) => {
      // Act
      const added = await api('POST', '/advertiser/conversions.add', manualAdd({ currency }));

      // Assess
      expect(added.status).toBe(200);
      expect(sandbox.control.conversions()).toMatchObject([{ currency }]);
    },
  );
});

describe('sandbox fidelity: accept needs a pending conversion', () => {
  it('answers 422 to accepting a conversion already accepted, and leaves it as it was', async () => {
    // Prepare
    await api('POST', '/advertiser/conversions.add', manualAdd());
    const [conversion] = sandbox.control.conversions();
    const body = { program: PROGRAM, id: conversion?.id };
    const first = await api('POST', '/advertiser/conversions.accept', body);
    clock.now = T0 + 60_000;

    // Act
    const again = await api('POST', '/advertiser/conversions.accept', body);

    // Assess
    expect(first.status).toBe(200);
    expect(again.status).toBe(422);
    expect(again.body['message']).toBe(
      `conversion ${conversion?.id} is already accepted: only a pending conversion can be accepted`,
    );
    expect(sandbox.control.conversions()).toMatchObject([
      { status: 'accepted', acceptedAt: new Date(T0).toISOString() },
    ]);
  });
});

describe('sandbox fidelity: the commission of a legacy add', () => {
  it('keeps the commission the add gives and answers it in the detail and on the current API', async () => {
    // Prepare
    await legacy('POST', '/conversions/add', {
      identifier: 'legacy-1',
      partnership_id: PARTNERSHIP,
      amount: 49.9,
      commission: 5.25,
      rule_id: RULE,
    });
    const [stored] = sandbox.control.conversions();

    // Act
    const detail = await legacy('GET', `/conversions/${stored?.id}`);

    // Assess
    expect(stored).toMatchObject({ amount: 4990, commission: 525 });
    expect(detail.status).toBe(200);
    expect(detail.body['commissions']).toMatchObject([
      { commission: 5.25, partnership: { id: PARTNERSHIP } },
    ]);
  });

  it('takes a commission of 0 as 0: the document gives no rule that computes it instead', async () => {
    // Act
    await legacy('POST', '/conversions/add', {
      identifier: 'legacy-2',
      partnership_id: PARTNERSHIP,
      amount: 49.9,
      commission: 0,
      rule_id: RULE,
    });

    // Assess
    expect(sandbox.control.conversions()).toMatchObject([{ amount: 4990, commission: 0 }]);
  });

  it('answers in the legacy detail the commission the current API shows for the same conversion', async () => {
    // Prepare
    await api('POST', '/advertiser/conversions.add', manualAdd({ amount: 4200 }));
    const [stored] = sandbox.control.conversions();

    // Act
    const detail = await legacy('GET', `/conversions/${stored?.id}`);

    // Assess
    expect(stored?.commission).toBe(420);
    expect(detail.body['commissions']).toMatchObject([{ commission: 4.2 }]);
  });
});

import { describe, expect, it } from 'vitest';
import { DeployConfig } from '../../infra/deploy-config.ts';
import { parseSources } from '../../shared/config/sources.ts';
import { BadInputError, ConfigurationError } from '../../shared/errors.ts';
import { LegacyBackend, type LegacyBackendOptions } from '../../shared/legacy/backend.ts';
import { LegacyClient } from '../../shared/legacy/client.ts';
import { parsePercent, percentOfMinor } from '../../shared/money.ts';
import { firstIssue } from '../../shared/validation.ts';

/**
 * The legacy 2.0 add's `commission` is "total amount excluding tax of the commission", a plain field:
 * the document never says that 0 means "let the rule compute it". A source may therefore state the
 * commission the connector sends (`legacyCommission: { percent }`), computed exactly from the
 * amount sent; without it (or with `{ rule: true }`) the add sends 0 as before.
 */

const PROGRAM = '5ad000000000000000000101';
const RULE = '5ad000000000000000000201';
const PARTNERSHIP = '5ad000000000000000000301';
const TRACKING_ID = 1001;

const json = (body: unknown) =>
  new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } });

/** A legacy client over a fetch that knows one partnership and takes every add; records the adds. */
function fakeLegacy() {
  const adds: Record<string, unknown>[] = [];
  const fetchFn = (async (input: URL | string, init?: RequestInit) => {
    const url = new URL(String(input));
    if (url.pathname.endsWith('/partnerships')) {
      return json([{ id: PARTNERSHIP, tracking_id: TRACKING_ID, status: 1, weight: 1 }]);
    }
    if (url.pathname.endsWith('/conversions/add')) {
      adds.push(JSON.parse(String(init?.body)) as Record<string, unknown>);
      return json({ status: 'done', message: 'conversion created', code: 200 });
    }
    throw new Error(`unexpected request ${url.pathname}`);
  }) as typeof fetch;
  const client = new LegacyClient({
    baseUrl: 'https://legacy.example.com',
    userCode: 'user-7',
    apiKey: 'key-7',
    ratePerSecond: Number.POSITIVE_INFINITY,
    fetch: fetchFn,
  });
  return { client, adds };
}

async function sentCommission(
  options: LegacyBackendOptions,
  amount: number,
  currency = 'EUR',
): Promise<unknown> {
  const { client, adds } = fakeLegacy();
  await new LegacyBackend(client, options).add({
    program: PROGRAM,
    rule: RULE,
    externalId: 'order-1',
    kind: 'manual',
    amount,
    currency,
    affiliateTrackingId: TRACKING_ID,
  });
  expect(adds).toHaveLength(1);
  return adds[0]?.['commission'];
}

describe('parsePercent and percentOfMinor', () => {
  it('reads a decimal percentage exactly, as a fraction', () => {
    expect(parsePercent('8.5')).toEqual({ numerator: 85, denominator: 1000 });
    expect(parsePercent('10')).toEqual({ numerator: 10, denominator: 100 });
    expect(parsePercent('0.0125')).toEqual({ numerator: 125, denominator: 1_000_000 });
    expect(parsePercent('100')).toEqual({ numerator: 100, denominator: 100 });
  });

  it.each(['8,5', '.5', '8.', '+8', '-1', ' 8', '1e1', '8.12345', '100.01', '101', '', 'abc'])(
    'refuses %j naming the field',
    (text) => {
      const error = (() => {
        try {
          parsePercent(text, 'sources.0.legacyCommission.percent');
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error).toBeInstanceOf(BadInputError);
      expect((error as Error).message).toMatch(/^sources\.0\.legacyCommission\.percent: /);
    },
  );

  it('takes the percentage of an amount in minor units, half a unit rounded up', () => {
    // 8.5 % of EUR 49.90 is 4.2415: EUR 4.24.
    expect(percentOfMinor(4990, parsePercent('8.5'))).toBe(424);
    // 8.5 % of EUR 49.99 is 4.24915: EUR 4.25.
    expect(percentOfMinor(4999, parsePercent('8.5'))).toBe(425);
    // Exactly half a cent goes up: 10 % of 0.05 is 0.005.
    expect(percentOfMinor(5, parsePercent('10'))).toBe(1);
    // Just under half stays down: 10 % of 0.04 is 0.004.
    expect(percentOfMinor(4, parsePercent('10'))).toBe(0);
    // 0.1 + 0.2 in floats is 0.30000000000000004: here 30 % of 1.00 is exactly 0.30.
    expect(percentOfMinor(100, parsePercent('30'))).toBe(30);
    expect(percentOfMinor(4990, parsePercent('100'))).toBe(4990);
  });
});

describe('legacyCommission of a source', () => {
  const sources = (extra: Record<string, unknown>) =>
    JSON.stringify([
      {
        id: 'old-shop',
        platform: 'woocommerce',
        program: '0123456789abcdef01234567',
        rule: '76543210fedcba9876543210',
        secretRef: 'OLD_SHOP_SECRET',
        backend: 'legacy',
        ...extra,
      },
    ]);

  it('is absent unless set, and takes a percentage or the rule', () => {
    expect(parseSources(sources({}), 's.json')[0]?.legacyCommission).toBeUndefined();
    expect(parseSources(sources({ legacyCommission: { percent: '8.5' } }), 's.json')[0]).toMatchObject({
      legacyCommission: { percent: '8.5' },
    });
    expect(parseSources(sources({ legacyCommission: { rule: true } }), 's.json')[0]).toMatchObject({
      legacyCommission: { rule: true },
    });
  });

  it.each([
    ['a number', { percent: 8.5 }, /^s\.json: 0\.legacyCommission\.percent: /],
    ['a comma', { percent: '8,5' }, /^s\.json: 0\.legacyCommission\.percent: /],
    ['zero', { percent: '0' }, /^s\.json: 0\.legacyCommission\.percent: /],
    ['more than 100', { percent: '120' }, /^s\.json: 0\.legacyCommission\.percent: /],
    ['rule false', { rule: false }, /^s\.json: 0\.legacyCommission\.rule: /],
    ['both', { percent: '8.5', rule: true }, /^s\.json: 0\.legacyCommission: either "percent" .* or "rule"/],
    ['neither', {}, /^s\.json: 0\.legacyCommission: either "percent" .* or "rule"/],
    ['a misspelt key', { percentage: '8.5' }, /^s\.json: 0\.legacyCommission\.percentage: /],
    ['a bare string', '8.5', /^s\.json: 0\.legacyCommission: an object/],
  ])('refuses %s naming the setting', (_what, legacyCommission, message) => {
    expect(() => parseSources(sources({ legacyCommission }), 's.json')).toThrow(message);
  });

  it('is refused on a current-API source, naming the setting', () => {
    let thrown: unknown;
    try {
      parseSources(sources({ backend: 'current', legacyCommission: { percent: '8.5' } }), 's.json');
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigurationError);
    expect((thrown as Error).message).toMatch(
      /^s\.json: 0\.legacyCommission: only for a source with "backend": "legacy"/,
    );
  });
});

describe('legacyCommission in the deploy config', () => {
  const config = (backend: string) => ({
    sources: [
      {
        id: 'old-shop',
        platform: 'woocommerce',
        program: '0123456789abcdef01234567',
        rule: '76543210fedcba9876543210',
        secretRef: 'connector/webhooks/old-shop',
        backend,
        legacyCommission: { percent: '8.5' },
      },
    ],
    affiliate: { baseUrl: 'https://api.platform.example', tokenSecret: 'connector/token' },
    legacy: { credentialsSecret: 'connector/legacy-credentials' },
    financeApiKeySecret: 'connector/finance',
  });

  it('is kept for a legacy source and refused on a current one, naming the setting', () => {
    const legacy = DeployConfig.safeParse(config('legacy'));
    const current = DeployConfig.safeParse(config('current'));

    expect(legacy.success && legacy.data.sources[0]?.legacyCommission).toEqual({ percent: '8.5' });
    expect(current.success).toBe(false);
    expect(current.error && firstIssue(current.error).field).toBe('sources.0.legacyCommission');
  });
});

describe('LegacyBackend add: the commission sent', () => {
  it('sends 0 without a setting, and with { rule: true }', async () => {
    expect(await sentCommission({}, 4990)).toBe(0);
    expect(await sentCommission({ commission: { rule: true } }, 4990)).toBe(0);
  });

  it('sends the percentage of the amount sent, rounded half up in minor units, as a float like the amount', async () => {
    expect(await sentCommission({ commission: { percent: '8.5' } }, 4990)).toBe(4.24);
    expect(await sentCommission({ commission: { percent: '8.5' } }, 4999)).toBe(4.25);
    // JPY has no decimals: 8.5 % of ¥1,990 is 169.15 → ¥169.
    expect(await sentCommission({ commission: { percent: '8.5' } }, 1990, 'JPY')).toBe(169);
    // KWD has three: 12.5 % of KWD 10.005 is 1.250625 → KWD 1.251.
    expect(await sentCommission({ commission: { percent: '12.5' } }, 10005, 'KWD')).toBe(1.251);
  });
});

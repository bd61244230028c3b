import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { CliError } from '../../cli/io.ts';
import {
  applyChanges,
  checkChanges,
  defaultTopic,
  findSample,
  freshEventId,
  PLATFORMS,
  type Platform,
  SAMPLES,
  samplePath,
  signedHeaders,
} from '../../cli/samples.ts';
import { UnauthorizedError } from '../../shared/errors.ts';
import { emptyDir, runCli } from '../support/cli.ts';
import {
  ADAPTERS,
  NOW,
  onlyEvent,
  SECRET,
  sampleRaw,
  signatureVector,
  sourceOf,
} from './platforms/support.ts';

const CLICK = 'abcdef0123456789abcdef01';
const IP = '198.51.100.9';

function sampleOf(
  platform: Platform,
  topic = defaultTopic(platform, undefined) ?? '',
): Record<string, unknown> {
  const sample = findSample(platform, undefined, platform === 'generic' ? undefined : topic);
  if (!sample) throw new Error(`no sample for ${platform} ${topic}`);
  return JSON.parse(readFileSync(samplePath(sample), 'utf8')) as Record<string, unknown>;
}

/** What the connector's own adapter makes of a body signed by `send`. */
function received(platform: Platform, body: string, headers: Record<string, string>, secret = SECRET) {
  return ADAPTERS[platform].handle(
    { rawBody: Buffer.from(body), headers },
    { source: sourceOf(platform), secrets: [secret], now: NOW },
  );
}

const changes = { clickIdAttribute: 'aecid', trackingIdAttribute: 'affiliate_tracking_id' };

describe('send: samples signed like the platform', () => {
  it.each(PLATFORMS)(
    '%s: the connector verifies the signature and reads the order id, click id and IP',
    (platform) => {
      // Prepare
      const topic = defaultTopic(platform, undefined);
      const body = JSON.stringify(
        applyChanges(platform, topic, sampleOf(platform), {
          ...changes,
          orderId: '4242',
          clickId: CLICK,
          ip: IP,
          eventId: freshEventId(platform),
        }),
      );
      // Act
      const event = onlyEvent(
        received(platform, body, signedHeaders(platform, body, SECRET, { topic, now: NOW })),
      );
      // Assess
      expect(event).toMatchObject({
        type: 'OrderPlaced',
        externalId: '4242',
        clickIds: [CLICK],
        buyerIp: IP,
      });
    },
  );

  it.each(PLATFORMS)('%s: a wrong secret is refused by the connector', (platform) => {
    // Prepare
    const topic = defaultTopic(platform, undefined);
    const body = JSON.stringify(sampleOf(platform));
    const headers = signedHeaders(platform, body, 'another-secret', { topic, now: NOW });
    // Act
    const handle = () => received(platform, body, headers);
    // Assess
    expect(handle).toThrow(UnauthorizedError);
  });

  it.each([
    ['shopify', 'x-shopify-hmac-sha256'],
    ['woocommerce', 'x-wc-webhook-signature'],
  ] as const)('%s: matches the shared signature test vector over the sample bytes', (platform, header) => {
    // Prepare
    const vector = signatureVector(platform);
    const raw = readFileSync(samplePath(findSample(platform) ?? SAMPLES[0]!), 'utf8');
    // Act
    const headers = signedHeaders(platform, raw, vector.secret, { now: NOW });
    // Assess
    expect(raw).toBe(sampleRaw(vector.body_file).toString('utf8'));
    expect(headers[header]).toBe(vector.value);
  });

  it('stripe: matches the shared signature test vector', () => {
    // Prepare
    const vector = signatureVector('stripe');
    const raw = sampleRaw(vector.body_file).toString('utf8');
    // Act
    const headers = signedHeaders('stripe', raw, vector.secret, {
      now: new Date((vector.timestamp ?? 0) * 1000),
    });
    // Assess
    expect(headers['stripe-signature']).toBe(vector.value);
  });

  it('puts a tracking id where each platform carries it (manual mode)', () => {
    for (const platform of PLATFORMS) {
      // Prepare
      const topic = defaultTopic(platform, undefined);
      const body = JSON.stringify(
        applyChanges(platform, topic, sampleOf(platform), {
          ...changes,
          trackingId: 1001,
          eventId: freshEventId(platform),
        }),
      );
      // Act
      const event = onlyEvent(
        received(platform, body, signedHeaders(platform, body, SECRET, { topic, now: NOW })),
      );
      // Assess
      expect(event, platform).toMatchObject({ affiliateTrackingId: 1001 });
    }
  });

  it('points the Shopify refund sample at the order given', () => {
    // Prepare
    const topic = 'refunds/create';
    const body = JSON.stringify(
      applyChanges('shopify', topic, sampleOf('shopify', topic), { ...changes, orderId: '777' }),
    );
    // Act
    const event = onlyEvent(
      received('shopify', body, signedHeaders('shopify', body, SECRET, { topic, now: NOW })),
    );
    // Assess
    expect(event).toMatchObject({ type: 'OrderRefunded', externalId: '777', amount: 39_133 });
  });

  it('has no built-in sample for a topic it cannot fake', () => {
    // Act and assess
    expect(findSample('shopify', undefined, 'products/update')).toBeUndefined();
    expect(findSample('stripe', 'cancel')).toBeUndefined();
    expect(findSample('generic', 'cancel', 'refund')).toBeUndefined();
  });

  const LIFE = [
    ['shopify', 'order', 'OrderPlaced', '450789469'],
    ['shopify', 'partial-refund', 'OrderRefunded', '450789469'],
    ['shopify', 'full-refund', 'OrderRefunded', '450789469'],
    ['shopify', 'cancel', 'OrderCancelled', '450789469'],
    ['woocommerce', 'order', 'OrderPlaced', '727'],
    ['woocommerce', 'partial-refund', 'OrderRefunded', '727'],
    ['woocommerce', 'full-refund', 'OrderRefunded', '727'],
    ['woocommerce', 'cancel', 'OrderCancelled', '727'],
    ['stripe', 'order', 'OrderPlaced', 'pi_1PgafyB7WZ01zgkWSjxsAJo3'],
    ['stripe', 'partial-refund', 'OrderRefunded', 'pi_1PgafyB7WZ01zgkWSjxsAJo3'],
    ['stripe', 'full-refund', 'OrderRefunded', 'pi_1PgafyB7WZ01zgkWSjxsAJo3'],
    ['generic', 'order', 'OrderPlaced', '1001'],
    ['generic', 'partial-refund', 'OrderRefunded', '1001'],
    ['generic', 'full-refund', 'OrderRefunded', '1001'],
    ['generic', 'cancel', 'OrderCancelled', '1001'],
  ] as const;

  it.each(LIFE)('%s %s: the connector reads a %s of order %s', (platform, kind, type, externalId) => {
    // Prepare
    const sample = findSample(platform, kind);
    const body = readFileSync(samplePath(sample ?? SAMPLES[0]!), 'utf8');
    // Act
    const result = received(
      platform,
      body,
      signedHeaders(platform, body, SECRET, { topic: sample?.topic, now: NOW }),
    );
    // Assess
    expect(result.kind).toBe('events');
    const events = result.kind === 'events' ? result.events : [];
    expect(events.map((e) => [e.type, e.externalId])).toEqual(events.map(() => [type, externalId]));
    expect(events.length).toBeGreaterThan(0);
    if (kind === 'full-refund' && platform !== 'shopify') expect(events.at(-1)).toMatchObject({ full: true });
    if (kind === 'partial-refund') expect(events[0]).toMatchObject({ full: false });
  });

  it('lists every sample in order of the life of an order, for each platform', () => {
    // Act and assess
    expect(SAMPLES.filter((s) => s.topic !== 'refund.created').map((s) => [s.platform, s.kind])).toEqual(
      LIFE.map(([platform, kind]) => [platform, kind]),
    );
  });
});

describe('send: flag values', () => {
  it.each([
    [{ clickId: 'xyz' }, '--click-id'],
    [{ ip: '300.1.1.1' }, '--ip'],
    [{ trackingId: Number('abc') }, '--tracking-id'],
    [{ trackingId: 0 }, '--tracking-id'],
    [{ orderId: ' ' }, '--order-id'],
    [{ eventId: '' }, '--event-id'],
    [{ eventId: 'evt-1\nx' }, '--event-id'],
    [{ eventId: 'e'.repeat(257) }, '--event-id'],
    [{ eventId: 'evt-\ud83c' }, '--event-id'],
    [{ deliveryId: 'evt-🎁' }, '--event-id'],
    [{ deliveryId: 'evt-1\r\nx-injected: 1' }, '--event-id'],
    [{ deliveryId: 'café' }, '--event-id'],
    [{ deliveryId: ' evt-1' }, '--event-id'],
  ])('rejects %o naming %s', (given, flag) => {
    // Act
    let error: unknown;
    try {
      checkChanges(given);
    } catch (e) {
      error = e;
    }
    // Assess
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).message.startsWith(flag)).toBe(true);
    expect((error as CliError).exitCode).toBe(2);
  });

  it('takes an event id of the body in any script, and a delivery id (a header) in printable ASCII', () => {
    // Act and assess
    expect(() => checkChanges({ eventId: 'evt_🎁-1001', deliveryId: 'evt-1 2/3:a_b' })).not.toThrow();
  });
});

describe('connector send --event-id', () => {
  const dir = emptyDir();
  afterAll(() => dir.remove());
  // Nothing listens there: a refused value never leaves the process.
  const NOWHERE = 'http://127.0.0.1:9';

  it.each([
    ['shopify', 'an emoji', 'evt-🎁'],
    ['woocommerce', 'a line break', 'evt-1\nx-injected: 1'],
    ['stripe', 'a line break', 'evt_1\nx'],
    ['generic', 'a control character', 'evt-1\u0000'],
  ] as const)(
    '%s, with %s: a usage error naming --event-id (exit 2), not an unreachable connector',
    async (platform, _what, eventId) => {
      // Act
      const result = await runCli(
        ['send', platform, '--event-id', eventId, '--url', NOWHERE, '--secret', 'a-test-secret'],
        {
          cwd: dir.dir,
          env: {},
        },
      );
      // Assess
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/^error: --event-id: /);
      expect(result.stderr).not.toContain('could not reach');
    },
  );
});

import { describe, expect, it } from 'vitest';
import { parseSources } from '../../../shared/config/sources.ts';
import { SOURCE_PLATFORMS, type SourcePlatform } from '../../../shared/domain/platforms.ts';
import { UnauthorizedError } from '../../../shared/errors.ts';
import { sampleFixture, signedHeaders } from '../../support/webhooks.ts';
import { ADAPTERS } from './support.ts';

/**
 * `map` is `handle` without the signature check (for deliveries the backfill rebuilds from a shop's
 * API): the same events from the same bytes, while `handle` still refuses what is not signed.
 */
const SECRET = 'map-test-secret';
const NOW = new Date('2026-11-20T12:00:00Z');

/** Each platform's samples (file, topic header): a record, so a new platform must bring some. */
const SAMPLES: Readonly<Record<SourcePlatform, ReadonlyArray<readonly [string, string | undefined]>>> = {
  shopify: [
    ['shopify/order_2026-07_docs_example.json', 'orders/create'],
    ['shopify/refund_2026-07_docs_example.json', 'refunds/create'],
  ],
  woocommerce: [['woocommerce/order_v3_docs_example.json', 'order.created']],
  stripe: [['stripe/event_envelope_stripe_mock_fixture.json', undefined]],
  generic: [['generic/order.json', undefined]],
};
const CASES = SOURCE_PLATFORMS.flatMap((platform) =>
  SAMPLES[platform].map(([file, topic]) => [platform, file, topic] as const),
);

describe('PlatformAdapter.map', () => {
  it.each(CASES)('%s %s: the same result as a signed delivery through handle', (platform, file, topic) => {
    const source = parseSources(
      JSON.stringify([{ id: 's', platform, program: 'a'.repeat(24), rule: 'b'.repeat(24), secretRef: 'S' }]),
      'sources',
    )[0]!;
    const body = sampleFixture(file);
    const signed = signedHeaders(platform, SECRET, body, { topic, now: Math.floor(NOW.getTime() / 1000) });
    const unsigned = Object.fromEntries(Object.entries(signed).filter(([k]) => !/signature|hmac/.test(k)));
    const context = { source, now: NOW };

    const handled = ADAPTERS[platform].handle(
      { headers: signed, rawBody: Buffer.from(body) },
      { ...context, secrets: [SECRET] },
    );
    const mapped = ADAPTERS[platform].map(
      { headers: unsigned, rawBody: Buffer.from(body) },
      { ...context, secrets: [] },
    );

    expect(mapped).toEqual(handled);
    expect(() =>
      ADAPTERS[platform].handle(
        { headers: unsigned, rawBody: Buffer.from(body) },
        { ...context, secrets: [SECRET] },
      ),
    ).toThrow(UnauthorizedError);
  });
});

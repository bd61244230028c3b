import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { expect } from 'vitest';
import { SourceConfig, type SourceConfigInput } from '../../../shared/config/sources.ts';
import type { SourcePlatform } from '../../../shared/domain/platforms.ts';
import type { ConnectorError } from '../../../shared/errors.ts';
import type { HttpRequest } from '../../../shared/http/types.ts';
import { genericAdapter } from '../../../shared/platforms/generic.ts';
import { shopifyAdapter } from '../../../shared/platforms/shopify.ts';
import { stripeAdapter } from '../../../shared/platforms/stripe.ts';
import type { AdapterContext, AdapterResult, PlatformAdapter } from '../../../shared/platforms/types.ts';
import { woocommerceAdapter } from '../../../shared/platforms/woocommerce.ts';

/** The platforms' own samples and our variants of them (test/fixtures/platforms/SOURCES.md). */
const SAMPLE_FIXTURES = new URL('../../fixtures/platforms/', import.meta.url);

/** Exact bytes of a sample (`shopify/order_2026-07_docs_example.json`). */
export function sampleRaw(path: string): Buffer {
  return readFileSync(new URL(path, SAMPLE_FIXTURES));
}

/** A shared sample as a plain object, to derive variants from (re-serialized, then re-signed). */
export function sampleJson(path: string): Record<string, unknown> {
  return JSON.parse(sampleRaw(path).toString('utf8')) as Record<string, unknown>;
}

export interface SignatureVector {
  platform: string;
  header: string;
  secret: string;
  timestamp?: number;
  body_file: string;
  value: string;
}

export function signatureVector(platform: string): SignatureVector {
  const file = JSON.parse(sampleRaw('signature_test_vectors.json').toString('utf8')) as {
    vectors: SignatureVector[];
  };
  const vector = file.vectors.find((v) => v.platform === platform);
  if (!vector) throw new Error(`no signature vector for ${platform}`);
  return vector;
}

/** Each platform's adapter, for tests that call one directly (the registry loads them on demand). */
export const ADAPTERS: Readonly<Record<SourcePlatform, PlatformAdapter>> = {
  shopify: shopifyAdapter,
  woocommerce: woocommerceAdapter,
  stripe: stripeAdapter,
  generic: genericAdapter,
};

export const SECRET = 'test_webhook_secret';
export const NOW = new Date('2026-06-01T12:00:00.000Z');
/** NOW in unix seconds, as signed timestamps carry it. */
export const NOW_S = Math.floor(NOW.getTime() / 1000);

export function sourceOf(
  platform: SourceConfig['platform'],
  overrides: Partial<SourceConfigInput> = {},
): SourceConfig {
  return SourceConfig.parse({
    id: `${platform}-shop`,
    platform,
    program: '0123456789abcdef01234567',
    rule: '76543210fedcba9876543210',
    secretRef: 'TEST_SECRET',
    ...overrides,
  });
}

export function contextOf(
  source: SourceConfig,
  secrets: readonly string[] = [SECRET],
  now = NOW,
): AdapterContext {
  return { source, secrets, now };
}

export function base64Hmac(secret: string, body: Buffer): string {
  return createHmac('sha256', secret).update(body).digest('base64');
}

export function hexHmac(secret: string, ...parts: Array<string | Buffer>): string {
  const mac = createHmac('sha256', secret);
  for (const p of parts) mac.update(p);
  return mac.digest('hex');
}

export function request(rawBody: Buffer | string, headers: Record<string, string | undefined>): HttpRequest {
  return { rawBody: Buffer.isBuffer(rawBody) ? rawBody : Buffer.from(rawBody), headers };
}

/**
 * Deliveries signed the way `adapter`'s platform signs them. `headersOf` gets the exact bytes of a
 * body and the platform's own arguments (topic, timestamp…) and returns the headers; `delivery`
 * builds the request, `handle` also hands it to the adapter with `context`, the platform's test
 * context (source `<platform>-shop`, SECRET, NOW).
 */
export function signedDeliveries<Args extends unknown[]>(
  adapter: PlatformAdapter,
  headersOf: (body: Buffer, ...args: Args) => Record<string, string>,
) {
  const context = contextOf(sourceOf(adapter.platform));
  const delivery = (raw: Buffer | string, ...args: Args): HttpRequest => {
    const body = Buffer.isBuffer(raw) ? raw : Buffer.from(raw);
    return request(body, headersOf(body, ...args));
  };
  const handle = (raw: Buffer | string, ...args: Args): AdapterResult =>
    adapter.handle(delivery(raw, ...args), context);
  return { context, delivery, handle };
}

/** The events of a result, failing the test when it is not `events`. */
export function eventsOf(result: AdapterResult) {
  if (result.kind !== 'events') throw new Error(`expected events, got ${JSON.stringify(result)}`);
  return result.events;
}

/** The one event of a result. */
export function onlyEvent(result: AdapterResult) {
  const events = eventsOf(result);
  expect(events).toHaveLength(1);
  return events[0]!;
}

/** Runs `act` and returns what it threw (failing the test when it did not throw). */
export function thrown(act: () => unknown): ConnectorError {
  try {
    act();
  } catch (error) {
    return error as ConnectorError;
  }
  throw new Error('expected a throw');
}

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SourcePlatform } from '../../shared/domain/platforms.ts';
import { hmacSha256, signGeneric } from '../../shared/platforms/signature.ts';

const here = dirname(fileURLToPath(import.meta.url));
/** The platforms' webhook samples (test/fixtures/platforms/SOURCES.md). */
export const SAMPLE_FIXTURES = join(here, '..', 'fixtures', 'platforms');

export function sampleFixture(path: string): string {
  return readFileSync(join(SAMPLE_FIXTURES, path), 'utf8');
}

export interface SignedPost {
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Every platform signs its webhooks (`signedHeaders` must say how: its switch has no default). */
export type SignedPlatform = SourcePlatform;

export interface SignatureOptions {
  /** Shopify's and WooCommerce's topic header (default `orders/create`, `order.created`). */
  readonly topic?: string;
  /** Shopify's event id (default a random UUID). */
  readonly eventId?: string;
  /** Stripe's and the generic webhook's timestamp, in seconds (default now). */
  readonly now?: number;
}

/** Valid signature headers for exactly these bytes, as each platform documents them. */
export function signedHeaders(
  platform: SignedPlatform,
  secret: string,
  body: Buffer | string,
  options: SignatureOptions = {},
): Record<string, string> {
  const now = options.now ?? Math.floor(Date.now() / 1000);
  switch (platform) {
    case 'shopify':
      return {
        'content-type': 'application/json',
        'x-shopify-topic': options.topic ?? 'orders/create',
        'x-shopify-hmac-sha256': hmacSha256(secret, body).toString('base64'),
        'x-shopify-event-id': options.eventId ?? randomUUID(),
      };
    case 'woocommerce':
      return {
        'content-type': 'application/json',
        'x-wc-webhook-topic': options.topic ?? 'order.created',
        'x-wc-webhook-signature': hmacSha256(secret, body).toString('base64'),
      };
    case 'stripe':
      return {
        'content-type': 'application/json',
        'stripe-signature': `t=${now},v1=${hmacSha256(secret, `${now}.`, body).toString('hex')}`,
      };
    case 'generic':
      return {
        'content-type': 'application/json',
        'x-connector-timestamp': String(now),
        'x-connector-signature': signGeneric(body, secret, now),
      };
  }
}

export function shopifyWebhook(
  body: string,
  secret: string,
  topic: string,
  eventId = randomUUID(),
): SignedPost {
  return {
    body,
    headers: {
      ...signedHeaders('shopify', secret, body, { topic, eventId }),
      'x-shopify-webhook-id': randomUUID(),
      'x-shopify-triggered-at': new Date().toISOString(),
    },
  };
}

export function wooWebhook(body: string, secret: string, topic: string): SignedPost {
  return {
    body,
    headers: {
      ...signedHeaders('woocommerce', secret, body, { topic }),
      'x-wc-webhook-delivery-id': randomUUID(),
    },
  };
}

export function stripeWebhook(
  body: string,
  secret: string,
  timestamp = Math.floor(Date.now() / 1000),
): SignedPost {
  return { body, headers: signedHeaders('stripe', secret, body, { now: timestamp }) };
}

export function genericWebhook(
  body: string,
  secret: string,
  timestamp = Math.floor(Date.now() / 1000),
): SignedPost {
  return { body, headers: signedHeaders('generic', secret, body, { now: timestamp }) };
}

export async function post(
  url: string,
  signed: SignedPost,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, { method: 'POST', headers: signed.headers, body: signed.body });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    json = { text };
  }
  return { status: res.status, json };
}

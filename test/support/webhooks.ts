import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
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

export function shopifyWebhook(
  body: string,
  secret: string,
  topic: string,
  eventId = randomUUID(),
): SignedPost {
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'x-shopify-topic': topic,
      'x-shopify-hmac-sha256': hmacSha256(secret, body).toString('base64'),
      'x-shopify-event-id': eventId,
      'x-shopify-webhook-id': randomUUID(),
      'x-shopify-triggered-at': new Date().toISOString(),
    },
  };
}

export function wooWebhook(body: string, secret: string, topic: string): SignedPost {
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'x-wc-webhook-topic': topic,
      'x-wc-webhook-signature': hmacSha256(secret, body).toString('base64'),
      'x-wc-webhook-delivery-id': randomUUID(),
    },
  };
}

export function stripeWebhook(
  body: string,
  secret: string,
  timestamp = Math.floor(Date.now() / 1000),
): SignedPost {
  const v1 = hmacSha256(secret, `${timestamp}.${body}`).toString('hex');
  return {
    body,
    headers: { 'content-type': 'application/json', 'stripe-signature': `t=${timestamp},v1=${v1}` },
  };
}

export function genericWebhook(
  body: string,
  secret: string,
  timestamp = Math.floor(Date.now() / 1000),
): SignedPost {
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'x-connector-timestamp': String(timestamp),
      'x-connector-signature': signGeneric(body, secret, timestamp),
    },
  };
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

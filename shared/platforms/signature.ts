import { createHmac, timingSafeEqual } from 'node:crypto';
import { ConfigurationError, UnauthorizedError } from '../errors.ts';
import type { HttpRequest } from '../http/types.ts';

/**
 * Webhook signature checks over the exact bytes received. Every check accepts several secrets so a
 * secret can be rotated without downtime (old and new valid at once), compares with
 * `timingSafeEqual` after a length check, and fails with one `UnauthorizedError` whose message
 * names the header, never a secret or a computed digest.
 */

/** HMAC-SHA256 of the concatenated parts. */
export function hmacSha256(secret: string, ...parts: ReadonlyArray<Buffer | string>): Buffer {
  const mac = createHmac('sha256', secret);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

/** Constant-time equality of two byte strings; false (not a throw) when the lengths differ. */
export function safeEqual(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

function requireSecrets(secrets: readonly string[]): void {
  if (secrets.length === 0)
    throw new ConfigurationError('no webhook signing secret is configured for this source');
}

function requireHeader(value: string | undefined, header: string): string {
  const trimmed = value?.trim();
  if (!trimmed) throw new UnauthorizedError(`missing ${header} header`);
  return trimmed;
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const HEX_SHA256 = /^[0-9a-fA-F]{64}$/;

/**
 * Checks a base64 HMAC-SHA256 of the raw body (Shopify `x-shopify-hmac-sha256`, WooCommerce
 * `x-wc-webhook-signature`) against every secret. A header sent twice arrives joined with commas
 * (API Gateway, Node), which base64 never holds: each value is a candidate, as Stripe's `v1`s are.
 *
 * @throws UnauthorizedError when the header is missing or matches no secret
 * @throws ConfigurationError when no secret is configured
 */
export function verifyBase64Hmac(
  rawBody: Buffer,
  signature: string | undefined,
  secrets: readonly string[],
  header: string,
): void {
  requireSecrets(secrets);
  const given = requireHeader(signature, header)
    .split(',')
    .map((v) => v.trim())
    .filter((v) => BASE64.test(v))
    .map((v) => Buffer.from(v, 'base64'));
  const matches = secrets.some((secret) => {
    const expected = hmacSha256(secret, rawBody);
    return given.some((g) => safeEqual(expected, g));
  });
  if (!matches) throw new UnauthorizedError(`${header} does not match`);
}

/**
 * `verifyBase64Hmac` on a delivery whose signature travels in the header `name`.
 *
 * @throws UnauthorizedError when the header is missing or matches no secret
 * @throws ConfigurationError when no secret is configured
 */
export function verifyBase64HmacHeader(request: HttpRequest, secrets: readonly string[], name: string): void {
  verifyBase64Hmac(request.rawBody, request.headers[name], secrets, name);
}

/** Hex signatures compared as bytes: `AB…` and `ab…` are the same signature. */
function matchesAnyHex(
  candidates: readonly string[],
  secrets: readonly string[],
  parts: Array<Buffer | string>,
) {
  const given = candidates.filter((c) => HEX_SHA256.test(c)).map((c) => Buffer.from(c, 'hex'));
  if (given.length === 0) return false;
  return secrets.some((secret) => {
    const expected = hmacSha256(secret, ...parts);
    return given.some((g) => safeEqual(expected, g));
  });
}

export interface TimestampOptions {
  readonly now: Date;
  /** Largest accepted distance between the signed timestamp and `now`, either way (default 300). */
  readonly toleranceSeconds?: number;
}

function checkTimestamp(text: string, header: string, options: TimestampOptions): string {
  if (!/^[0-9]{1,12}$/.test(text)) throw new UnauthorizedError(`${header}: timestamp is not unix seconds`);
  const tolerance = options.toleranceSeconds ?? 300;
  const skew = Math.floor(options.now.getTime() / 1000) - Number.parseInt(text, 10);
  if (skew > tolerance) throw new UnauthorizedError(`${header}: timestamp is older than ${tolerance} s`);
  if (skew < -tolerance)
    throw new UnauthorizedError(`${header}: timestamp is more than ${tolerance} s ahead`);
  return text;
}

/**
 * Checks Stripe's `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]` header: hex HMAC-SHA256 of
 * `<t>.<raw body>`. Stripe sends one `v1` per active endpoint secret while a secret is being
 * rolled, so any `v1` matching any secret passes; `v0` (test-mode legacy scheme) is ignored. A
 * timestamp further than the tolerance in the past (replay) or the future is rejected.
 *
 * @throws UnauthorizedError when missing, malformed, stale, ahead of time or matching no secret
 */
export function verifyStripeSignature(
  rawBody: Buffer,
  header: string | undefined,
  secrets: readonly string[],
  options: TimestampOptions,
): void {
  const name = 'stripe-signature';
  requireSecrets(secrets);
  const value = requireHeader(header, name);
  let timestamp: string | undefined;
  const v1: string[] = [];
  for (const item of value.split(',')) {
    const eq = item.indexOf('=');
    if (eq < 0) continue;
    const key = item.slice(0, eq).trim();
    const part = item.slice(eq + 1).trim();
    if (key === 't') timestamp = part;
    else if (key === 'v1') v1.push(part);
  }
  if (timestamp === undefined) throw new UnauthorizedError(`${name}: no t= timestamp`);
  if (v1.length === 0) throw new UnauthorizedError(`${name}: no v1= signature`);
  const t = checkTimestamp(timestamp, name, options);
  if (!matchesAnyHex(v1, secrets, [`${t}.`, rawBody])) throw new UnauthorizedError(`${name} does not match`);
}

/** Header names of the Generic platform's signature scheme. */
export const GENERIC_SIGNATURE_HEADER = 'x-connector-signature';
export const GENERIC_TIMESTAMP_HEADER = 'x-connector-timestamp';

/**
 * Checks the Generic platform's signature, modelled on Standard Webhooks:
 * `x-connector-signature: sha256=<hex>` (several, separated by spaces or commas, while the sender
 * rotates) = hex HMAC-SHA256 of `<x-connector-timestamp>.<raw body>`, the timestamp in unix seconds
 * within the tolerance of `now`.
 *
 * @throws UnauthorizedError when a header is missing, malformed, stale, ahead of time or matches no secret
 */
export function verifyGenericSignature(
  rawBody: Buffer,
  headers: Readonly<Record<string, string | undefined>>,
  secrets: readonly string[],
  options: TimestampOptions,
): void {
  requireSecrets(secrets);
  const signature = requireHeader(headers[GENERIC_SIGNATURE_HEADER], GENERIC_SIGNATURE_HEADER);
  const timestamp = requireHeader(headers[GENERIC_TIMESTAMP_HEADER], GENERIC_TIMESTAMP_HEADER);
  const t = checkTimestamp(timestamp, GENERIC_TIMESTAMP_HEADER, options);
  const candidates = signature
    .split(/[\s,]+/)
    .filter((s) => s.startsWith('sha256='))
    .map((s) => s.slice('sha256='.length));
  if (candidates.length === 0)
    throw new UnauthorizedError(`${GENERIC_SIGNATURE_HEADER}: no sha256= signature`);
  if (!matchesAnyHex(candidates, secrets, [`${t}.`, rawBody])) {
    throw new UnauthorizedError(`${GENERIC_SIGNATURE_HEADER} does not match`);
  }
}

/**
 * Builds a Generic signature header value for a body (what a shop module computes; also used by
 * tests and the local tools).
 */
export function signGeneric(rawBody: Buffer | string, secret: string, timestamp: number): string {
  return `sha256=${hmacSha256(secret, `${timestamp}.`, rawBody).toString('hex')}`;
}

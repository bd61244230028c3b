import { describe, expect, it } from 'vitest';
import { ConfigurationError, UnauthorizedError } from '../../../shared/errors.ts';
import {
  signGeneric,
  verifyBase64Hmac,
  verifyGenericSignature,
  verifyStripeSignature,
} from '../../../shared/platforms/signature.ts';
import { base64Hmac, hexHmac, sampleRaw, signatureVector, thrown } from './support.ts';

const SECRET = 'whsec_rotation_new';
const OLD_SECRET = 'whsec_rotation_old';

function expectUnauthorized(act: () => unknown, ...secrets: string[]): UnauthorizedError {
  const error = thrown(act);
  expect(error).toBeInstanceOf(UnauthorizedError);
  for (const secret of secrets) expect(error.message).not.toContain(secret);
  return error as UnauthorizedError;
}

describe('signature_test_vectors.json cross-check', () => {
  it.each(['shopify', 'woocommerce'])('%s: base64 HMAC-SHA256 of the raw body', (platform) => {
    // Prepare
    const vector = signatureVector(platform);
    const body = sampleRaw(vector.body_file);
    // Act
    const computed = base64Hmac(vector.secret, body);
    // Assess: the vector agrees with the documented algorithm, and the verifier accepts it
    expect(computed).toBe(vector.value);
    expect(() => verifyBase64Hmac(body, vector.value, [vector.secret], vector.header)).not.toThrow();
  });

  it('stripe: hex HMAC-SHA256 of "t.body"', () => {
    // Prepare
    const vector = signatureVector('stripe');
    const body = sampleRaw(vector.body_file);
    // Act
    const computed = hexHmac(vector.secret, `${vector.timestamp}.`, body);
    // Assess
    expect(vector.value).toBe(`t=${vector.timestamp},v1=${computed}`);
    const now = new Date((vector.timestamp! + 299) * 1000);
    expect(() => verifyStripeSignature(body, vector.value, [vector.secret], { now })).not.toThrow();
  });

  it('shopware: hex HMAC-SHA256 of the body (no adapter, checked for completeness)', () => {
    // Prepare
    const vector = signatureVector('shopware');
    // Act / Assess
    expect(hexHmac(vector.secret, sampleRaw(vector.body_file))).toBe(vector.value);
  });

  it('rejects the vector when a single byte of the body changes', () => {
    // Prepare
    const vector = signatureVector('shopify');
    const body = Buffer.from(sampleRaw(vector.body_file));
    body[10] = body[10]! ^ 1;
    // Act / Assess
    expectUnauthorized(
      () => verifyBase64Hmac(body, vector.value, [vector.secret], vector.header),
      vector.secret,
    );
  });
});

describe('verifyBase64Hmac', () => {
  const body = Buffer.from('{"id":1}');

  it('accepts a signature made with any of the configured secrets (rotation)', () => {
    // Act / Assess
    expect(() =>
      verifyBase64Hmac(body, base64Hmac(OLD_SECRET, body), [SECRET, OLD_SECRET], 'h'),
    ).not.toThrow();
    expect(() => verifyBase64Hmac(body, base64Hmac(SECRET, body), [SECRET, OLD_SECRET], 'h')).not.toThrow();
  });

  it.each([
    ['missing', undefined],
    ['blank', '  '],
    ['wrong secret', base64Hmac('someone-else', body)],
    ['truncated', base64Hmac(SECRET, body).slice(0, 20)],
    ['not base64', '!!!!'],
    ['hex instead of base64', hexHmac(SECRET, body)],
  ])('rejects a %s signature with a message naming the header, not the secret', (_case, signature) => {
    // Act
    const error = expectUnauthorized(
      () => verifyBase64Hmac(body, signature, [SECRET, OLD_SECRET], 'x-shopify-hmac-sha256'),
      SECRET,
      OLD_SECRET,
    );
    // Assess
    expect(error.message).toContain('x-shopify-hmac-sha256');
    expect(error.message).not.toContain(base64Hmac(SECRET, body));
  });

  it('is a configuration error when no secret is configured', () => {
    // Act / Assess
    expect(thrown(() => verifyBase64Hmac(body, 'x', [], 'h'))).toBeInstanceOf(ConfigurationError);
  });
});

describe('verifyStripeSignature', () => {
  const body = Buffer.from('{"id":"evt_1","type":"refund.created"}');
  const t = 1_780_000_000;
  const now = new Date(t * 1000);
  const sign = (secret: string, ts = t) => hexHmac(secret, `${ts}.`, body);

  it('accepts any v1 matching any secret, ignoring v0 and unknown keys', () => {
    // Prepare: Stripe sends one v1 per active secret while a secret is rolled
    const header = `t=${t},v1=${sign('other')},v1=${sign(OLD_SECRET)},v0=${sign(SECRET)},x=1`;
    // Act / Assess
    expect(() => verifyStripeSignature(body, header, [SECRET, OLD_SECRET], { now })).not.toThrow();
  });

  it('accepts upper-case hex', () => {
    // Act / Assess
    const header = `t=${t},v1=${sign(SECRET).toUpperCase()}`;
    expect(() => verifyStripeSignature(body, header, [SECRET], { now })).not.toThrow();
  });

  it.each([
    ['stale beyond the default 300 s', t - 301, 'older'],
    ['from the future beyond 300 s', t + 301, 'ahead'],
  ])('rejects a timestamp %s', (_case, ts, word) => {
    // Prepare
    const header = `t=${ts},v1=${sign(SECRET, ts)}`;
    // Act
    const error = expectUnauthorized(() => verifyStripeSignature(body, header, [SECRET], { now }), SECRET);
    // Assess
    expect(error.message).toContain(word);
  });

  it('accepts the edge of the tolerance and honours a configured tolerance', () => {
    // Prepare
    const edge = `t=${t - 300},v1=${sign(SECRET, t - 300)}`;
    const older = `t=${t - 900},v1=${sign(SECRET, t - 900)}`;
    // Act / Assess
    expect(() => verifyStripeSignature(body, edge, [SECRET], { now })).not.toThrow();
    expect(() => verifyStripeSignature(body, older, [SECRET], { now, toleranceSeconds: 1000 })).not.toThrow();
    expectUnauthorized(() => verifyStripeSignature(body, older, [SECRET], { now, toleranceSeconds: 600 }));
  });

  it.each([
    ['missing', undefined],
    ['without t', `v1=${'a'.repeat(64)}`],
    ['without v1', `t=${t},v0=${'a'.repeat(64)}`],
    ['with a non-numeric t', `t=abc,v1=${'a'.repeat(64)}`],
    ['with a short v1', `t=${t},v1=abcd`],
    ['signed with another secret', `t=${t},v1=${hexHmac('other', `${t}.`, body)}`],
    ['signed over another timestamp', `t=${t},v1=${hexHmac(SECRET, `${t - 1}.`, body)}`],
  ])('rejects a header %s', (_case, header) => {
    // Act / Assess
    expectUnauthorized(() => verifyStripeSignature(body, header, [SECRET], { now }), SECRET);
  });
});

describe('verifyGenericSignature', () => {
  const body = Buffer.from('{"type":"cancel","orderId":"1"}');
  const t = 1_780_000_000;
  const now = new Date((t + 5) * 1000);
  const headers = (signature: string | undefined, ts: string | null = String(t)) => ({
    'x-connector-signature': signature,
    'x-connector-timestamp': ts ?? undefined,
  });

  it('accepts sha256=<hex> over "<timestamp>.<body>" with any configured secret', () => {
    // Prepare
    const signature = signGeneric(body, OLD_SECRET, t);
    // Act / Assess
    expect(signature).toBe(`sha256=${hexHmac(OLD_SECRET, `${t}.`, body)}`);
    expect(() =>
      verifyGenericSignature(body, headers(signature), [SECRET, OLD_SECRET], { now }),
    ).not.toThrow();
  });

  it('accepts several signatures in the header (sender-side rotation)', () => {
    // Prepare
    const signature = `sha256=${'0'.repeat(64)} sha256=${hexHmac(SECRET, `${t}.`, body)}`;
    // Act / Assess
    expect(() => verifyGenericSignature(body, headers(signature), [SECRET], { now })).not.toThrow();
  });

  it.each([
    ['a missing signature', headers(undefined)],
    ['a missing timestamp', headers(signGeneric(body, SECRET, t), null)],
    ['a stale timestamp', headers(signGeneric(body, SECRET, t - 400), String(t - 400))],
    ['a future timestamp', headers(signGeneric(body, SECRET, t + 400), String(t + 400))],
    ['a timestamp other than the signed one', headers(signGeneric(body, SECRET, t - 1))],
    ['a signature without the sha256= prefix', headers(hexHmac(SECRET, `${t}.`, body))],
    ['a millisecond timestamp', headers(signGeneric(body, SECRET, t * 1000), String(t * 1000))],
  ])('rejects %s', (_case, h) => {
    // Act / Assess
    expectUnauthorized(() => verifyGenericSignature(body, h, [SECRET], { now }), SECRET);
  });
});

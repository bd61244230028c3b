import { describe, expect, it } from 'vitest';
import { BadInputError, ConfigurationError, UnauthorizedError } from '../../shared/errors.ts';
import { answerFor, type EdgeResult, refusalOf, refusedBody } from '../../shared/http/answers.ts';

/**
 * The HTTP edge's one mapping: a result with a reason becomes a status and a body in one place, for
 * `POST /webhooks/<source>` and `POST /refunds` alike.
 */

describe('answerFor: one reason, one status and body', () => {
  it.each<[string, EdgeResult, number, Record<string, unknown>, Record<string, string> | undefined]>([
    [
      'queued',
      { kind: 'queued', receipt: { messageIds: ['m-1'] } },
      202,
      { status: 'queued', messageIds: ['m-1'] },
      undefined,
    ],
    [
      'ignored',
      { kind: 'ignored', reason: 'topic x' },
      200,
      { status: 'ignored', reason: 'topic x' },
      undefined,
    ],
    ['ping', { kind: 'ping' }, 200, { status: 'ok' }, undefined],
    [
      'bad input',
      { kind: 'bad_input', field: 'amount', message: 'must be greater than zero' },
      400,
      { error: 'bad_request', field: 'amount', message: 'must be greater than zero' },
      undefined,
    ],
    [
      'unauthorized',
      { kind: 'unauthorized', message: 'no' },
      401,
      { error: 'unauthorized', message: 'no' },
      undefined,
    ],
    [
      'not found',
      { kind: 'not_found', message: 'unknown source "x"' },
      404,
      { error: 'not_found', message: 'unknown source "x"' },
      undefined,
    ],
    [
      'too large',
      { kind: 'too_large', message: 'big' },
      413,
      { error: 'payload_too_large', message: 'big' },
      undefined,
    ],
    [
      'compressed',
      { kind: 'compressed', encoding: 'gzip' },
      415,
      {
        error: 'unsupported_media_type',
        field: 'content-encoding',
        message: 'gzip bodies are not supported: send the JSON uncompressed',
      },
      undefined,
    ],
    [
      'unavailable',
      { kind: 'unavailable', message: 'queue unavailable, retry later', retryAfterSeconds: 5 },
      503,
      { error: 'unavailable', message: 'queue unavailable, retry later' },
      { 'retry-after': '5' },
    ],
  ])('answers %s', (_case, result, status, body, headers) => {
    // Act
    const answer = answerFor(result);

    // Assess
    expect(answer).toEqual({ status, body, ...(headers ? { headers } : {}) });
  });

  it('never puts the log detail into the body', () => {
    // Act
    const answer = answerFor({
      kind: 'unavailable',
      message: 'try again later',
      retryAfterSeconds: 30,
      detail: 'secret x missing',
    });

    // Assess
    expect(JSON.stringify(answer)).not.toContain('secret x missing');
  });
});

describe('refusalOf: one mapping from error class to reason', () => {
  it('maps a bad signature to 401, bad input to 400 naming the field, our configuration to 503', () => {
    // Act
    const answers = [
      new UnauthorizedError('x-shopify-hmac-sha256 does not match'),
      new BadInputError('line_items.0.price: not a decimal amount', { field: 'line_items.0.price' }),
      new ConfigurationError('no webhook signing secret is configured for this source'),
      new RangeError('amount past the safe range'),
    ].map((error) => answerFor(refusalOf(error)));

    // Assess
    expect(
      answers.map((a) => [a.status, a.body['field'] ?? null, a.headers?.['retry-after'] ?? null]),
    ).toEqual([
      [401, null, null],
      [400, 'line_items.0.price', null],
      [503, null, '30'],
      [400, null, null],
    ]);
    expect(answers[2]?.body['message']).toBe('try again later');
    expect(answers[3]?.body['message']).toBe('a value in the payload is out of range');
  });

  it('lets an error it has no class for through, to fail loudly', () => {
    // Act + Assess
    expect(() => refusalOf(new TypeError('a bug'))).toThrow('a bug');
  });
});

describe('refusedBody: the body checks every endpoint makes first', () => {
  it('refuses a body over the limit with 413 and a compressed body with 415, whatever the endpoint', () => {
    // Act
    const big = refusedBody({ headers: {}, rawBody: Buffer.alloc(1024 * 1024 + 1, 0x7b) });
    const gzip = refusedBody({ headers: {}, rawBody: Buffer.from([0x1f, 0x8b, 8, 0]) });
    const declared = refusedBody({ headers: { 'content-encoding': 'br' }, rawBody: Buffer.from('{}') });
    const fine = refusedBody({ headers: { 'content-encoding': 'identity' }, rawBody: Buffer.from('{}') });

    // Assess
    expect([big, gzip, declared].map((r) => r && answerFor(r).status)).toEqual([413, 415, 415]);
    expect(declared && answerFor(declared).body['message']).toMatch(/^br bodies/);
    expect(fine).toBeUndefined();
  });
});

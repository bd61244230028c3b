import { describe, expect, it } from 'vitest';
import { presentedKey } from '../../shared/finance.ts';
import { FINANCE_KEY, postToRefundsHandler } from '../support/finance-door.ts';

/**
 * `POST /refunds` with the finance key in `Authorization`. The scheme is case-insensitive (RFC 9110
 * §11.1) and the grammar puts one or more spaces (`1*SP`) between it and the token, so `bearer` and
 * `BEARER` pass as `Bearer` does; a finance script sending `bearer <key>` got a 401.
 */

async function post(authorization: string) {
  const { result, queue } = await postToRefundsHandler(
    { Authorization: authorization },
    { externalId: '1001', refundId: 'RF-1', amountCents: 1_000, currency: 'USD' },
  );
  return { status: result.statusCode, queued: queue.events.length };
}

describe('POST /refunds: the finance key as a Bearer token', () => {
  it.each([
    ['Bearer', `Bearer ${FINANCE_KEY}`],
    ['lower-case bearer', `bearer ${FINANCE_KEY}`],
    ['upper-case BEARER', `BEARER ${FINANCE_KEY}`],
    ['mixed-case bEaReR', `bEaReR ${FINANCE_KEY}`],
    ['several spaces after the scheme', `Bearer   ${FINANCE_KEY}`],
  ])('accepts the scheme written %s and queues the refund', async (_, authorization) => {
    // Act
    const answer = await post(authorization);
    // Assess
    expect(answer).toEqual({ status: 202, queued: 1 });
  });

  it.each([
    ['a wrong key', 'bearer wrong-key-0123456789abcdef0123456789'],
    ['another scheme', `Basic ${FINANCE_KEY}`],
    ['no space after the scheme', `Bearer${FINANCE_KEY}`],
    ['a tab after the scheme (the grammar has spaces only)', `Bearer\t${FINANCE_KEY}`],
    ['the scheme alone', 'Bearer'],
    ['the key with a character more', `bearer ${FINANCE_KEY}x`],
  ])('answers 401 to %s and queues nothing', async (_, authorization) => {
    // Act
    const answer = await post(authorization);
    // Assess
    expect(answer).toEqual({ status: 401, queued: 0 });
  });
});

describe('presentedKey', () => {
  it('reads the token after the scheme whatever its case and however many spaces precede it', () => {
    expect(presentedKey({ authorization: 'bearer  abc def' })).toBe('abc def');
    expect(presentedKey({ authorization: 'BEARER abc' })).toBe('abc');
  });

  it('prefers x-api-key, and reads nothing from another scheme or an empty token', () => {
    expect(presentedKey({ 'x-api-key': 'direct', authorization: 'Bearer other' })).toBe('direct');
    expect(presentedKey({ authorization: 'Basic abc' })).toBeUndefined();
    expect(presentedKey({ authorization: 'Bearer ' })).toBeUndefined();
    expect(presentedKey({ authorization: 'Bearer    ' })).toBeUndefined();
  });
});

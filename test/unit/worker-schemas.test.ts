import { describe, expect, it } from 'vitest';
import { Cents, ConversionUpdateBody } from '../../shared/affiliate/schemas.ts';
import { LegacyPartnershipsQuery } from '../../shared/legacy/schemas.ts';
import { firstIssue } from '../../shared/validation.ts';

/**
 * The schemas the worker loads are zod/mini (infra/bundle-report.ts), which has no messages of its
 * own. This file imports none of classic zod, as the worker's bundle does not: the reasons an
 * operator reads in the DLQ must still be the English ones classic zod gave.
 */
describe('worker schemas on zod/mini', () => {
  it.each([
    [-1, 'Too small: expected number to be >=0'],
    [1.5, 'must be an integer count of cents'],
    ['12', 'Invalid input: expected number, received string'],
    [2 ** 60, 'Too big: expected number to be <=9007199254740991'],
  ])('an amount of %j is refused with "%s"', (amount, message) => {
    const result = Cents.safeParse(amount);

    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.message).toBe(message);
  });

  it('names the first failing field, an unknown key by its name', () => {
    const body = { id: '5e6f708192a3b4c5d6e7f809', amount: 100, reason: 'late return', extra: 1 };

    const result = ConversionUpdateBody.safeParse(body);

    expect(firstIssue(result.error!)).toMatchObject({ field: 'extra', message: 'extra is not allowed here' });
  });

  it('reads query strings as numbers and refuses what is out of range with the bound', () => {
    expect(LegacyPartnershipsQuery.parse({ limit: '20', trackingId: '7' })).toEqual({
      limit: 20,
      trackingId: 7,
    });
    expect(LegacyPartnershipsQuery.safeParse({ limit: '101' }).error?.issues[0]?.message).toBe(
      'must be at most 100',
    );
  });
});

import { describe, expect, it } from 'vitest';
import { keyMatches } from '../../shared/finance.ts';

/** The finance key check: only a key equal to one of the current keys passes, whatever its length. */
describe('keyMatches', () => {
  const KEY = 'k'.repeat(40);
  const NEXT = 'n'.repeat(48);

  it('takes a current key, and only a current key', () => {
    expect(keyMatches(KEY, [KEY])).toBe(true);
    expect(keyMatches(NEXT, [KEY, NEXT])).toBe(true);
    expect(keyMatches(KEY.slice(0, -1), [KEY])).toBe(false);
    expect(keyMatches(`${KEY}k`, [KEY])).toBe(false);
    expect(keyMatches(`${KEY} `, [KEY])).toBe(false);
    expect(keyMatches('x'.repeat(100_000), [KEY])).toBe(false);
    expect(keyMatches('', [KEY])).toBe(false);
    expect(keyMatches(undefined, [KEY])).toBe(false);
    expect(keyMatches(KEY, [])).toBe(false);
  });
});

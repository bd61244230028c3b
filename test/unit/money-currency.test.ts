import { describe, expect, it } from 'vitest';
import { otherCurrency, sameCurrency } from '../../shared/money.ts';

describe('sameCurrency', () => {
  it.each([
    ['EUR', 'EUR'],
    ['eur', 'EUR'],
    [' EUR', 'eur '],
  ])('takes %j and %j for one currency', (a, b) => {
    // Act and assess
    expect(sameCurrency(a, b)).toBe(true);
  });

  it.each([
    ['EUR', 'USD'],
    ['EUR', undefined],
    [undefined, undefined],
    ['', ''],
    ['  ', 'EUR'],
  ])('does not take %j and %j for one currency', (a, b) => {
    // Act and assess
    expect(sameCurrency(a, b)).toBe(false);
  });
});

describe('otherCurrency', () => {
  it.each([
    ['EUR', 'USD'],
    ['eur', ' usd '],
  ])('calls %j and %j other money', (a, b) => {
    // Act and assess
    expect(otherCurrency(a, b)).toBe(true);
  });

  it.each([
    ['EUR', 'eur'],
    ['EUR', 'EUR '],
    ['EUR', undefined],
    [undefined, 'USD'],
    ['EUR', ''],
    ['  ', 'USD'],
  ])('does not call %j and %j other money', (a, b) => {
    // Act and assess
    expect(otherCurrency(a, b)).toBe(false);
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BadInputError } from '../../shared/errors.ts';
import {
  currencyExponent,
  formatMinor,
  formatMoney,
  multiplyMinor,
  parseMoney,
  prorateMinor,
  sumMinor,
} from '../../shared/money.ts';

/** One currency per exponent the module knows. */
const BY_EXPONENT = { 0: 'JPY', 2: 'EUR', 3: 'BHD', 4: 'CLF' } as const;
const CURRENCIES = Object.values(BY_EXPONENT);

function badInput(act: () => unknown): BadInputError {
  try {
    act();
  } catch (error) {
    expect(error).toBeInstanceOf(BadInputError);
    return error as BadInputError;
  }
  throw new Error('expected a BadInputError');
}

/**
 * Test oracle independent of the module: column addition of non-negative decimal strings, digit by
 * digit, as on paper.
 */
function addDecimalStrings(values: readonly string[]): string {
  const scale = Math.max(0, ...values.map((v) => (v.split('.')[1] ?? '').length));
  const aligned = values.map((v) => {
    const [whole = '0', fraction = ''] = v.split('.');
    return whole + fraction.padEnd(scale, '0');
  });
  const width = Math.max(...aligned.map((a) => a.length)) + 4;
  const padded = aligned.map((a) => a.padStart(width, '0'));
  let carry = 0;
  let digits = '';
  for (let i = width - 1; i >= 0; i--) {
    let column = carry;
    for (const p of padded) column += p.charCodeAt(i) - 48;
    digits = String(column % 10) + digits;
    carry = Math.floor(column / 10);
  }
  digits = (carry > 0 ? String(carry) : '') + digits;
  const whole = digits.slice(0, digits.length - scale).replace(/^0+(?=\d)/, '') || '0';
  return scale === 0 ? whole : `${whole}.${digits.slice(digits.length - scale)}`;
}

describe('currencyExponent', () => {
  it.each([
    ['EUR', 2],
    ['USD', 2],
    ['usd', 2],
    ['JPY', 0],
    ['jpy', 0],
    ['KRW', 0],
    ['CLP', 0],
    ['ISK', 0],
    ['VND', 0],
    ['XAF', 0],
    ['XOF', 0],
    ['XPF', 0],
    ['UGX', 0],
    ['PYG', 0],
    ['RWF', 0],
    ['KMF', 0],
    ['GNF', 0],
    ['DJF', 0],
    ['BIF', 0],
    ['VUV', 0],
    ['BHD', 3],
    ['IQD', 3],
    ['JOD', 3],
    ['KWD', 3],
    ['LYD', 3],
    ['OMR', 3],
    ['TND', 3],
    ['CLF', 4],
  ])('%s has %i decimals', (currency, exponent) => {
    // Act / Assess
    expect(currencyExponent(currency)).toBe(exponent);
  });
});

describe('parseMoney', () => {
  it.each([
    ['12', 'EUR', 1200],
    ['12.3', 'EUR', 1230],
    ['12.30', 'EUR', 1230],
    ['0.29', 'EUR', 29],
    ['1.005', 'BHD', 1005],
    ['007.50', 'EUR', 750],
    ['1500', 'JPY', 1500],
    ['1500.00', 'JPY', 1500],
    ['12.340', 'EUR', 1234],
    ['0', 'EUR', 0],
    ['90071992547409.91', 'EUR', Number.MAX_SAFE_INTEGER],
  ])('reads %s %s as %i minor units', (text, currency, minor) => {
    // Act / Assess
    expect(parseMoney(text, currency)).toBe(minor);
  });

  it('is exact where float arithmetic drifts', () => {
    // Prepare: the classic float trap (0.29 * 100 is 28.999999999999996)
    const text = '0.29';
    // Act
    const minor = parseMoney(text, 'EUR');
    // Assess
    expect(Number.parseFloat(text) * 100).not.toBe(29);
    expect(minor).toBe(29);
  });

  it('accepts a negative amount only when allowed', () => {
    // Act / Assess
    expect(parseMoney('-4.50', 'EUR', { allowNegative: true })).toBe(-450);
    expect(badInput(() => parseMoney('-4.50', 'EUR', { field: 'refunds.0.total' })).field).toBe(
      'refunds.0.total',
    );
  });

  it.each(['-0', '-0.00'])(
    'rejects the signed zero %j unless a minus is allowed, and never reads -0',
    (text) => {
      // Act
      const error = badInput(() => parseMoney(text, 'EUR', { field: 'price' }));
      const allowed = parseMoney(text, 'EUR', { allowNegative: true });
      // Assess
      expect(error.field).toBe('price');
      expect(Object.is(allowed, 0)).toBe(true);
    },
  );

  it('rejects more decimals than the currency has unless they are zeros', () => {
    // Act
    const eur = badInput(() => parseMoney('12.345', 'EUR', { field: 'line_items.0.price' }));
    const jpy = badInput(() => parseMoney('1500.5', 'JPY', { field: 'price' }));
    // Assess
    expect(eur.field).toBe('line_items.0.price');
    expect(eur.message).toContain('more than 2 decimals');
    expect(jpy.field).toBe('price');
  });

  it.each([
    '1e3',
    '1E3',
    '1.5e2',
    ' 12',
    '12 ',
    '+12',
    '12.',
    '.5',
    '1,000.00',
    '1 000',
    '0x10',
    '',
    '-',
    'NaN',
    'Infinity',
    '12.3.4',
    '١٢',
    '1'.repeat(80),
  ])('rejects %j naming the field', (text) => {
    // Act
    const error = badInput(() => parseMoney(text, 'EUR', { field: 'amount_x' }));
    // Assess
    expect(error.field).toBe('amount_x');
  });

  it('rejects values past Number.MAX_SAFE_INTEGER minor units', () => {
    // Act
    const error = badInput(() => parseMoney('90071992547409.92', 'EUR'));
    // Assess
    expect(error.field).toBe('amount');
    expect(error.message).toContain('too large');
  });

  it('rejects a non-string at run time', () => {
    // Act / Assess: a JSON number slipping past a schema must not be read as a float
    badInput(() => parseMoney(12.3 as unknown as string, 'EUR'));
  });
});

describe('formatMoney', () => {
  it.each([
    [1230, 'EUR', '12.30'],
    [5, 'EUR', '0.05'],
    [0, 'EUR', '0.00'],
    [-450, 'EUR', '-4.50'],
    [1230, 'JPY', '1230'],
    [-7, 'JPY', '-7'],
    [1234, 'BHD', '1.234'],
    [5, 'CLF', '0.0005'],
    [Number.MAX_SAFE_INTEGER, 'EUR', '90071992547409.91'],
  ])('formats %i %s as %s', (minor, currency, text) => {
    // Act / Assess
    expect(formatMoney(minor, currency)).toBe(text);
  });

  it('refuses a non-integer or unsafe amount', () => {
    // Act / Assess
    expect(() => formatMoney(12.5, 'EUR')).toThrow(RangeError);
    expect(() => formatMoney(2 ** 53, 'EUR')).toThrow(RangeError);
  });
});

describe('formatMinor: money in a message meant for a person', () => {
  it('writes the currency code then the amount in its decimals, never minor units', () => {
    // Act / Assess
    expect(formatMinor(95_610, 'EUR')).toBe('EUR 956.10');
    expect(formatMinor(4_390, 'EUR')).toBe('EUR 43.90');
    expect(formatMinor(5, 'USD')).toBe('USD 0.05');
    expect(formatMinor(2_455, 'JPY')).toBe('JPY 2455');
    expect(formatMinor(1, 'KWD')).toBe('KWD 0.001');
    expect(formatMinor(-1_250, 'EUR')).toBe('EUR -12.50');
  });

  it('says so when the currency is unknown rather than passing minor units off as money', () => {
    // Act / Assess
    expect(formatMinor(95_610, undefined)).toBe('95610 minor units (currency unknown)');
  });
});

describe('sumMinor, multiplyMinor, prorateMinor', () => {
  it('adds and multiplies exactly', () => {
    // Act / Assess
    expect(sumMinor([1999, 1, -500])).toBe(1500);
    expect(sumMinor([])).toBe(0);
    expect(multiplyMinor(11900, 2)).toBe(23800);
  });

  it('refuses to overflow with a BadInputError naming the payload field (a 400, not a 500)', () => {
    // Act
    const sum = badInput(() => sumMinor([Number.MAX_SAFE_INTEGER, 1], 'line_items'));
    const product = badInput(() => multiplyMinor(5_000_000_000_000_000, 2, 'line_items.0.price'));
    const share = badInput(() => prorateMinor(Number.MAX_SAFE_INTEGER, 3, 2, 'refunds.0.total'));
    const unsafeInput = badInput(() => sumMinor([2 ** 53]));
    // Assess
    expect([sum.field, product.field, share.field, unsafeInput.field]).toEqual([
      'line_items',
      'line_items.0.price',
      'refunds.0.total',
      'amount',
    ]);
    expect(product.message).toContain('MAX_SAFE_INTEGER');
  });

  it('keeps a fraction of a minor unit a RangeError: only a bug here can make one', () => {
    // Act / Assess
    expect(() => sumMinor([1.5])).toThrow(RangeError);
    expect(() => prorateMinor(100, 1, -2)).toThrow(RangeError);
  });

  it('pro-rates with integer rounding half away from zero', () => {
    // Act / Assess: WooCommerce order 723 of the docs: net 29.00 of gross 39.00
    expect(prorateMinor(1000, 2900, 3900)).toBe(744); // 743.59…
    expect(prorateMinor(900, 2900, 3900)).toBe(669); // 669.23…
    expect(prorateMinor(1, 1, 2)).toBe(1);
    expect(prorateMinor(3, 1, 2)).toBe(2);
    expect(prorateMinor(-3, 1, 2)).toBe(-2);
    expect(prorateMinor(1000, 0, 3900)).toBe(0);
    expect(prorateMinor(1000, 5, 0)).toBe(0);
  });

  it('keeps a pro-rated share within half a minor unit of the exact value', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10 ** 12 }),
        fc
          .integer({ min: 1, max: 10 ** 9 })
          .chain((denominator) =>
            fc.tuple(fc.integer({ min: 0, max: denominator }), fc.constant(denominator)),
          ),
        (amount, [numerator, denominator]) => {
          // Act
          const share = prorateMinor(amount, numerator, denominator);
          // Assess: |share × d − amount × n| ≤ d / 2, in BigInt
          const error = BigInt(share) * BigInt(denominator) - BigInt(amount) * BigInt(numerator);
          const doubled = error < 0n ? -2n * error : 2n * error;
          expect(doubled <= BigInt(denominator)).toBe(true);
        },
      ),
    );
  });
});

describe('money properties', () => {
  it('format then parse round-trips exactly for every exponent', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...CURRENCIES),
        fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
        (currency, minor) => {
          // Act
          const text = formatMoney(minor, currency);
          // Assess
          expect(parseMoney(text, currency, { allowNegative: true })).toBe(minor);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('parsing a sum of decimal strings equals the sum of the parsed amounts (no drift)', () => {
    const decimals = (exponent: number) =>
      fc
        .tuple(
          fc.integer({ min: 0, max: 10 ** 9 }),
          fc.string({ unit: fc.constantFrom(...'0123456789'), maxLength: exponent }),
        )
        .map(([whole, fraction]) => (fraction ? `${whole}.${fraction}` : String(whole)));
    fc.assert(
      fc.property(
        fc
          .constantFrom(0, 2, 3, 4)
          .chain((exponent) =>
            fc.tuple(
              fc.constant(BY_EXPONENT[exponent as keyof typeof BY_EXPONENT]),
              fc.array(decimals(exponent), { maxLength: 40 }),
            ),
          ),
        ([currency, texts]) => {
          // Act
          const parsedSum = sumMinor(texts.map((t) => parseMoney(t, currency)));
          const sumParsed = parseMoney(addDecimalStrings(['0', ...texts]), currency);
          // Assess
          expect(parsedSum).toBe(sumParsed);
        },
      ),
      { numRuns: 300 },
    );
  });
});

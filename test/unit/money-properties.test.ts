import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BadInputError } from '../../shared/errors.ts';
import { fromLegacyAmount, LEGACY_MAX_EXACT_MINOR, toLegacyAmount } from '../../shared/legacy/backend.ts';
import {
  formatMinor,
  formatMoney,
  MAX_PERCENT_DECIMALS,
  parseMoney,
  parsePercent,
  percentOfMinor,
  prorateMinor,
} from '../../shared/money.ts';

/**
 * Properties of the money arithmetic against oracles written here in BigInt and string terms, not
 * with the module's own helpers (the example cases and the format/parse round trip are in
 * money.test.ts). Fixed seeds: a failure names its counterexample and replays.
 */

const BY_EXPONENT = { 0: 'JPY', 2: 'EUR', 3: 'KWD', 4: 'CLF' } as const;
const EXPONENTS = [0, 2, 3, 4] as const;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const RUNS = { numRuns: 400 } as const;

const digits = (min: number, max: number) =>
  fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: min, maxLength: max });
const safeMinor = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER });
const exponent = fc.constantFrom(...EXPONENTS);

/** The BadInputError `act` throws (failing the test when it throws anything else or nothing). */
function badInput(act: () => unknown): BadInputError {
  try {
    act();
  } catch (error) {
    if (error instanceof BadInputError) return error;
    throw error;
  }
  throw new Error('expected a BadInputError');
}

/** Oracle: `a × n / d` rounded half away from zero, for d > 0, in BigInt. */
function halfAwayFromZero(a: bigint, n: bigint, d: bigint): bigint {
  const p = a * n;
  const m = p < 0n ? -p : p;
  const q = (2n * m + d) / (2n * d);
  return p < 0n ? -q : q;
}

describe('parseMoney and formatMoney', () => {
  it('reads every plain decimal as its digits shifted by the exponent, or refuses it as too large', () => {
    fc.assert(
      fc.property(
        exponent,
        digits(1, 20),
        fc.integer({ min: 0, max: 4 }),
        digits(0, 4),
        fc.integer({ min: 0, max: 6 }),
        fc.boolean(),
        (e, whole, fractionLength, fractionDigits, zeros, negative) => {
          // Prepare: at most e significant decimals, then any number of trailing zeros
          const fraction = fractionDigits.slice(0, Math.min(e, fractionLength)) + '0'.repeat(zeros);
          const text = `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`;
          const expected = BigInt(whole + fraction.slice(0, e).padEnd(e, '0'));
          // Act / Assess
          if (expected > MAX_SAFE) {
            const error = badInput(() =>
              parseMoney(text, BY_EXPONENT[e], { field: 'x.amount', allowNegative: true }),
            );
            expect(error.field).toBe('x.amount');
            return;
          }
          const minor = parseMoney(text, BY_EXPONENT[e], { allowNegative: true });
          expect(Number.isSafeInteger(minor)).toBe(true);
          expect(BigInt(minor)).toBe(negative ? -expected : expected);
          expect(Object.is(minor, -0)).toBe(false);
        },
      ),
      { ...RUNS, seed: 7101 },
    );
  });

  it('round-trips format then parse for every exponent, with leading zeros and trailing zeros added', () => {
    fc.assert(
      fc.property(exponent, safeMinor, digits(0, 3), fc.nat(4), (e, minor, lead, trail) => {
        // Prepare
        const currency = BY_EXPONENT[e];
        const plain = formatMoney(minor, currency);
        const padded = `${'0'.repeat(lead.length)}${plain}${e === 0 && trail > 0 ? '.' : ''}${'0'.repeat(trail)}`;
        // Act / Assess
        expect(parseMoney(plain, currency)).toBe(minor);
        expect(parseMoney(padded, currency)).toBe(minor);
        expect(formatMinor(minor, currency)).toBe(`${currency} ${plain}`);
      }),
      { ...RUNS, seed: 7102 },
    );
  });

  it('formats with exactly the currency’s decimals, most significant digit first, no exponent', () => {
    fc.assert(
      fc.property(
        exponent,
        fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
        (e, minor) => {
          // Act
          const text = formatMoney(minor, BY_EXPONENT[e]);
          // Assess
          const shape = e === 0 ? /^-?(0|[1-9][0-9]*)$/ : new RegExp(`^-?(0|[1-9][0-9]*)\\.[0-9]{${e}}$`);
          expect(text).toMatch(shape);
          expect(text.replace('.', '').replace(/^(-?)0+(?=[0-9])/, '$1')).toBe(String(minor));
        },
      ),
      { ...RUNS, seed: 7103 },
    );
  });

  /** Ways to spoil a valid amount; each must be refused with a 400 naming the field. */
  const spoilers: ReadonlyArray<readonly [string, (valid: string, e: number) => string]> = [
    ['exponent', (v) => `${v}e2`],
    ['capital exponent', (v) => `${v.replace('.', '')}E-2`],
    ['plus sign', (v) => `+${v}`],
    ['minus sign when not allowed', (v) => `-${v}`],
    ['leading space', (v) => ` ${v}`],
    ['trailing space', (v) => `${v} `],
    ['trailing newline', (v) => `${v}\n`],
    ['inner space', (v) => `${v.slice(0, 1)} ${v.slice(1)}`],
    ['thousands comma', (v) => `1,${v}`],
    ['underscore', (v) => `1_${v}`],
    ['decimal comma', (v, e) => (e === 0 ? `${v},5` : v.replace('.', ','))],
    ['bare point', (v, e) => (e === 0 ? `${v}.` : v.slice(0, v.indexOf('.') + 1))],
    ['point first', (v, e) => (e === 0 ? `.${v}` : v.slice(v.indexOf('.')))],
    ['two points', (v) => `${v}.5`],
    ['hex prefix', (v) => `0x${v}`],
    ['one decimal too many', (v, e) => (e === 0 ? `${v}.1` : `${v}1`)],
    ['full-width digit', (v) => `${v.slice(0, -1)}５`],
    ['arabic-indic digit', (v) => `${v.slice(0, -1)}٣`],
  ];

  it.each(spoilers)('refuses an amount spoilt by a %s, naming the field', (_name, spoil) => {
    fc.assert(
      fc.property(exponent, fc.integer({ min: 0, max: 10 ** 12 }), fc.nat(5), (e, minor, path) => {
        // Prepare
        const currency = BY_EXPONENT[e];
        const text = spoil(formatMoney(minor, currency), e);
        const field = `refunds.${path}.total`;
        // Act
        const error = badInput(() => parseMoney(text, currency, { field }));
        // Assess
        expect(error.field).toBe(field);
        expect(error.message.startsWith(`${field}: `)).toBe(true);
      }),
      { numRuns: 60, seed: 7104 },
    );
  });

  /** Oracle: the minor units a text stands for, or undefined when it is not a plain decimal of them. */
  function plainDecimal(text: string, e: number, allowNegative: boolean): bigint | undefined {
    const match = /^(-?)([0-9]+)(?:\.([0-9]+))?$/.exec(text);
    if (!match || text.length > 64) return undefined;
    const [, sign = '', whole = '', fraction = ''] = match;
    if (sign && !allowNegative) return undefined;
    if (/[1-9]/.test(fraction.slice(e))) return undefined;
    const minor = BigInt(whole + fraction.slice(0, e).padEnd(e, '0'));
    if (minor > MAX_SAFE) return undefined;
    return sign ? -minor : minor;
  }

  it('answers any string with the integer of minor units it stands for, or a BadInputError naming the field', () => {
    fc.assert(
      fc.property(
        exponent,
        fc.oneof(
          fc.string({ maxLength: 24 }),
          fc.string({ unit: fc.constantFrom(...'0123456789.-+eE ,'), maxLength: 24 }),
        ),
        fc.boolean(),
        (e, text, allowNegative) => {
          // Prepare
          const expected = plainDecimal(text, e, allowNegative);
          // Act / Assess
          if (expected === undefined) {
            const error = badInput(() => parseMoney(text, BY_EXPONENT[e], { field: 'total', allowNegative }));
            expect(error.field).toBe('total');
          } else {
            const minor = parseMoney(text, BY_EXPONENT[e], { field: 'total', allowNegative });
            expect(BigInt(minor)).toBe(expected);
          }
        },
      ),
      { numRuns: 1000, seed: 7105 },
    );
  });
});

describe('prorateMinor and percentOfMinor', () => {
  const share = fc
    .integer({ min: 1, max: 10 ** 12 })
    .chain((d) => fc.tuple(fc.integer({ min: 0, max: d }), fc.constant(d)));

  it('rounds half away from zero, exactly as the BigInt oracle, and never exceeds the whole', () => {
    fc.assert(
      fc.property(fc.integer({ min: -(10 ** 15), max: 10 ** 15 }), share, (amount, [n, d]) => {
        // Act
        const part = prorateMinor(amount, n, d);
        // Assess
        expect(BigInt(part)).toBe(halfAwayFromZero(BigInt(amount), BigInt(n), BigInt(d)));
        expect(Math.abs(part)).toBeLessThanOrEqual(Math.abs(amount));
        expect(prorateMinor(-amount, n, d)).toBe(-part || 0);
      }),
      { ...RUNS, seed: 7201 },
    );
  });

  it('rounds an exact half up: (2k + 1) / 2 is k + 1', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10 ** 14 }), (k) => {
        // Act / Assess
        expect(prorateMinor(2 * k + 1, 1, 2)).toBe(k + 1);
        expect(prorateMinor(2 * k + 1, 50, 100)).toBe(k + 1);
      }),
      { ...RUNS, seed: 7202 },
    );
  });

  it('grows with the numerator, so cumulative shares are never negative and add up to the whole', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10 ** 12 }), fc.integer({ min: 1, max: 60 }), (amount, parts) => {
        // Act: the k-th of `parts` units gets share(k) − share(k − 1)
        const units = Array.from(
          { length: parts },
          (_, k) => prorateMinor(amount, k + 1, parts) - prorateMinor(amount, k, parts),
        );
        // Assess
        expect(units.every((u) => u >= 0)).toBe(true);
        expect(units.reduce((s, u) => s + u, 0)).toBe(amount);
        expect(Math.max(...units) - Math.min(...units)).toBeLessThanOrEqual(1);
      }),
      { ...RUNS, seed: 7203 },
    );
  });

  /** Percentages as text: 0 to 100 with up to MAX_PERCENT_DECIMALS decimals. */
  const percentText = fc
    .tuple(fc.integer({ min: 0, max: 100 }), digits(0, MAX_PERCENT_DECIMALS))
    .filter(([whole, fraction]) => whole < 100 || /^0*$/.test(fraction))
    .map(([whole, fraction]) => (fraction ? `${whole}.${fraction}` : String(whole)));

  it('takes a percentage of an amount half up, exactly, never more than the amount', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10 ** 15 }), percentText, (amount, text) => {
        // Prepare: the oracle reads the text as digits over a power of ten
        const [whole = '', fraction = ''] = text.split('.');
        const n = BigInt(whole + fraction);
        const d = 100n * 10n ** BigInt(fraction.length);
        // Act
        const part = percentOfMinor(amount, parsePercent(text, 'legacyCommission.percent'));
        // Assess
        expect(BigInt(part)).toBe(halfAwayFromZero(BigInt(amount), n, d));
        expect(part).toBeGreaterThanOrEqual(0);
        expect(part).toBeLessThanOrEqual(amount);
      }),
      { ...RUNS, seed: 7204 },
    );
  });

  it('refuses a percentage past 100, signed, in exponent notation or too fine, naming the field', () => {
    const bad = fc.oneof(
      fc
        .tuple(fc.integer({ min: 100, max: 999 }), digits(1, MAX_PERCENT_DECIMALS))
        .filter(([w, f]) => w > 100 || /[1-9]/.test(f))
        .map(([w, f]) => `${w}.${f}`),
      fc.integer({ min: 101, max: 999 }).map(String),
      fc.integer({ min: 0, max: 99 }).map((w) => `-${w}`),
      fc.integer({ min: 0, max: 99 }).map((w) => `+${w}`),
      fc.integer({ min: 1, max: 9 }).map((w) => `${w}e1`),
      digits(MAX_PERCENT_DECIMALS + 1, 8).map((f) => `1.${f}`),
      fc.integer({ min: 0, max: 99 }).map((w) => ` ${w}`),
      fc.integer({ min: 0, max: 99 }).map((w) => `${w},5`),
    );
    fc.assert(
      fc.property(bad, (text) => {
        // Act
        const error = badInput(() => parsePercent(text, 'legacyCommission.percent'));
        // Assess
        expect(error.field).toBe('legacyCommission.percent');
      }),
      { ...RUNS, seed: 7205 },
    );
  });
});

describe('the legacy float boundary', () => {
  /** Amounts up to the documented limit, biased to its ends and to the largest of each magnitude. */
  const legacyMinor = fc.oneof(
    fc.integer({ min: 0, max: LEGACY_MAX_EXACT_MINOR }),
    fc.integer({ min: LEGACY_MAX_EXACT_MINOR - 10_000, max: LEGACY_MAX_EXACT_MINOR }),
    fc.integer({ min: 4, max: 13 }).chain((p) => fc.integer({ min: 10 ** p - 1_000, max: 10 ** p - 1 })),
  );

  it('sends the float of the exact decimal, which JSON carries, and reads it back as the same minor units', () => {
    fc.assert(
      fc.property(exponent, legacyMinor, (e, minor) => {
        // Prepare
        const currency = BY_EXPONENT[e];
        // Act
        const wire = JSON.parse(JSON.stringify({ amount: toLegacyAmount(minor, currency) })) as {
          amount: number;
        };
        // Assess: the JSON number is the decimal itself, and it comes back exactly
        expect(parseMoney(String(wire.amount), currency)).toBe(minor);
        expect(fromLegacyAmount(wire.amount, currency)).toBe(minor);
      }),
      { numRuns: 1000, seed: 7301 },
    );
  });
});

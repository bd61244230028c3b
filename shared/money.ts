import { BadInputError } from './errors.ts';

/**
 * Exact money: integer minor units ("cents") of an ISO 4217 currency, parsed from and formatted to
 * decimal strings with string and BigInt arithmetic only. Shops send amounts as decimal strings
 * (`"49.90"`); a float on the way (`parseFloat("0.29") * 100` is 28.999999999999996) would put a
 * cent of drift into commissions, so no float ever touches an amount here.
 */

const ZERO_DECIMALS = new Set([
  'BIF',
  'BYR',
  'CLP',
  'DJF',
  'GNF',
  'ISK',
  'JPY',
  'KMF',
  'KRW',
  'PYG',
  'RWF',
  'UGX',
  'UYI',
  'VND',
  'VUV',
  'XAF',
  'XOF',
  'XPF',
]);
const THREE_DECIMALS = new Set(['BHD', 'IQD', 'JOD', 'KWD', 'LYD', 'OMR', 'TND']);
const FOUR_DECIMALS = new Set(['CLF', 'UYW']);

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
/** Anything longer is junk: MAX_SAFE_INTEGER has 16 digits, plus sign, point and zero padding. */
const MAX_INPUT_LENGTH = 64;
const DECIMAL = /^(-)?([0-9]+)(?:\.([0-9]+))?$/;

/**
 * Number of digits after the decimal point of `currency`'s minor unit (ISO 4217): 0 for JPY, KRW,
 * CLP, ISK…, 3 for BHD, KWD, TND…, 4 for the CLF/UYW units of account, 2 for everything else.
 */
export function currencyExponent(currency: string): number {
  const code = currency.toUpperCase();
  if (ZERO_DECIMALS.has(code)) return 0;
  if (THREE_DECIMALS.has(code)) return 3;
  if (FOUR_DECIMALS.has(code)) return 4;
  return 2;
}

/**
 * A currency code as compared: trimmed, in upper case; undefined when there is none (missing, empty
 * or blank). The connector's events are upper case; the platform's answers are not checked.
 */
function comparable(code: string | undefined): string | undefined {
  return code?.trim().toUpperCase() || undefined;
}

/**
 * Whether two currency codes name the same currency, in any letter case and with spaces around:
 * `eur` and `EUR ` are EUR. False when either names none (missing, empty or blank).
 */
export function sameCurrency(a: string | undefined, b: string | undefined): boolean {
  const code = comparable(a);
  return code !== undefined && code === comparable(b);
}

/**
 * Whether amounts in `a` and in `b` are other money to each other (USD 49.90 is not EUR 49.90): both
 * name a currency, and not the same one (`sameCurrency`). A side that names none (the platform may
 * leave it out) is not other money. The one rule by which the worker adopts a conversion on the
 * platform or parks its order, and by which `connector status` and `reconcile` compare them.
 */
export function otherCurrency(a: string | undefined, b: string | undefined): boolean {
  return comparable(a) !== undefined && comparable(b) !== undefined && !sameCurrency(a, b);
}

export interface ParseMoneyOptions {
  /** Dotted path of the value in the payload, reported in the `BadInputError` (default `amount`). */
  readonly field?: string;
  /** Accept a leading minus sign (WooCommerce refund totals are negative). Default false. */
  readonly allowNegative?: boolean;
}

/**
 * Parses a decimal string (`"12"`, `"12.3"`, `"12.30"`, `"-4.50"` with `allowNegative`) into integer
 * minor units of `currency`. More decimals than the currency has are accepted only when the extra
 * ones are zeros (`"1000.00"` JPY is 1000). Rejects exponent notation, signs other than an allowed
 * leading minus, spaces, separators and anything past `Number.MAX_SAFE_INTEGER` minor units.
 *
 * @throws BadInputError naming `options.field`
 */
export function parseMoney(decimal: string, currency: string, options: ParseMoneyOptions = {}): number {
  const field = options.field ?? 'amount';
  const match =
    typeof decimal === 'string' && decimal.length <= MAX_INPUT_LENGTH ? DECIMAL.exec(decimal) : null;
  if (!match) {
    throw new BadInputError(`${field}: not a decimal amount (digits with an optional "." fraction)`, {
      field,
    });
  }
  const [, sign, whole = '', fraction = ''] = match;
  const exponent = currencyExponent(currency);
  const kept = fraction.slice(0, exponent);
  if (/[^0]/.test(fraction.slice(exponent))) {
    throw new BadInputError(`${field}: more than ${exponent} decimals for ${currency}`, { field });
  }
  const minor = BigInt(whole + kept.padEnd(exponent, '0'));
  if (minor > MAX_SAFE) {
    throw new BadInputError(`${field}: amount too large`, { field });
  }
  if (sign) {
    // "-0.00" is a sign too: only an allowed minus passes, and it reads as 0, never -0.
    if (!options.allowNegative) throw new BadInputError(`${field}: must not be negative`, { field });
    return minor === 0n ? 0 : -Number(minor);
  }
  return Number(minor);
}

/**
 * Formats integer minor units as a plain decimal string with the currency's number of decimals:
 * `formatMoney(1230, 'EUR')` is `"12.30"`, `formatMoney(1230, 'JPY')` is `"1230"`.
 *
 * @throws RangeError when `minor` is not a safe integer
 */
export function formatMoney(minor: number, currency: string): string {
  if (!Number.isSafeInteger(minor)) throw new RangeError('minor must be a safe integer of minor units');
  const exponent = currencyExponent(currency);
  const digits = (minor < 0 ? -minor : minor).toString().padStart(exponent + 1, '0');
  const sign = minor < 0 ? '-' : '';
  if (exponent === 0) return sign + digits;
  return `${sign}${digits.slice(0, -exponent)}.${digits.slice(-exponent)}`;
}

/**
 * Money as a person reads it, in every message meant for one (answers, CLI output, DLQ reasons):
 * the currency code, then the amount in its decimals: `formatMinor(95610, 'EUR')` is
 * `"EUR 956.10"`, never `95610`. Without a currency the decimals are unknown, and it says so.
 *
 * @throws RangeError when `minor` is not a safe integer
 */
export function formatMinor(minor: number, currency: string | undefined): string {
  if (!currency) {
    if (!Number.isSafeInteger(minor)) throw new RangeError('minor must be a safe integer of minor units');
    return `${minor} minor units (currency unknown)`;
  }
  return `${currency} ${formatMoney(minor, currency)}`;
}

/**
 * Adds amounts of minor units exactly. `field` is the dotted payload path the amounts come from,
 * reported when the payload's values add up past what an amount can be.
 *
 * @throws BadInputError naming `field` when an input or the sum is past `Number.MAX_SAFE_INTEGER`
 */
export function sumMinor(amounts: Iterable<number>, field = 'amount'): number {
  let total = 0n;
  for (const amount of amounts) {
    assertMinor(amount, field);
    total += BigInt(amount);
  }
  return toSafeNumber(total, field);
}

/**
 * `amount × factor` for a unit price times a quantity, exactly.
 *
 * @throws BadInputError naming `field` when the product is past `Number.MAX_SAFE_INTEGER`
 */
export function multiplyMinor(amount: number, factor: number, field = 'amount'): number {
  assertMinor(amount, field);
  assertMinor(factor, field);
  return toSafeNumber(BigInt(amount) * BigInt(factor), field);
}

/**
 * `amount × numerator / denominator` in integer arithmetic, rounded half away from zero: the share
 * of `amount` that `numerator` is of `denominator` (a gross refund turned net with the order's
 * net/gross ratio). A zero denominator gives 0: nothing to share.
 *
 * @throws BadInputError naming `field` when an input or the result is past `Number.MAX_SAFE_INTEGER`
 * @throws RangeError on a negative denominator (a caller's bug)
 */
export function prorateMinor(
  amount: number,
  numerator: number,
  denominator: number,
  field = 'amount',
): number {
  assertMinor(amount, field);
  assertMinor(numerator, field);
  assertMinor(denominator, field);
  if (denominator < 0) throw new RangeError('denominator must not be negative');
  if (denominator === 0) return 0;
  const product = BigInt(amount) * BigInt(numerator);
  const negative = product < 0n;
  const magnitude = negative ? -product : product;
  const den = BigInt(denominator);
  const quotient = magnitude / den;
  const rounded = (magnitude % den) * 2n >= den ? quotient + 1n : quotient;
  return toSafeNumber(negative ? -rounded : rounded, field);
}

/** A percentage held exactly as a fraction of the whole: `"8.5"` is 85/1000. */
export interface Percentage {
  readonly numerator: number;
  readonly denominator: number;
}

/** Most decimals a percentage may have (`"2.3456"`): finer than any commission rate. */
export const MAX_PERCENT_DECIMALS = 4;
const PERCENT = new RegExp(`^([0-9]{1,3})(?:\\.([0-9]{1,${MAX_PERCENT_DECIMALS}}))?$`);

/**
 * Parses a percentage from 0 to 100 written as a decimal string (`"8.5"`, `"10"`, `"0.25"`) into an
 * exact fraction, without floating point: digits only, at most `MAX_PERCENT_DECIMALS` decimals, no
 * sign, exponent, spaces or comma.
 *
 * @throws BadInputError naming `field`
 */
export function parsePercent(decimal: string, field = 'percent'): Percentage {
  const match = typeof decimal === 'string' ? PERCENT.exec(decimal) : null;
  if (!match) {
    throw new BadInputError(
      `${field}: not a percentage (digits with an optional "." and at most ${MAX_PERCENT_DECIMALS} decimals, such as "8.5")`,
      { field },
    );
  }
  const [, whole = '', fraction = ''] = match;
  const numerator = Number(whole + fraction);
  const denominator = 100 * 10 ** fraction.length;
  if (numerator > denominator) throw new BadInputError(`${field}: more than 100 percent`, { field });
  return { numerator, denominator };
}

/**
 * `percent` of `amount` in minor units, rounded half up (half away from zero) to a whole minor unit:
 * 8.5 % of 4990 (EUR 49.90) is 424.15, so 424.
 *
 * @throws BadInputError naming `field` when `amount` is past `Number.MAX_SAFE_INTEGER`
 */
export function percentOfMinor(amount: number, percent: Percentage, field = 'amount'): number {
  return prorateMinor(amount, percent.numerator, percent.denominator, field);
}

/**
 * Amounts reach these helpers from payloads, so one past 2^53 is the caller's bad input (a 400
 * naming the field); a fraction can only come from a bug here and stays a RangeError.
 */
function assertMinor(value: number, field: string): void {
  if (!Number.isInteger(value)) throw new RangeError(`${field}: not an integer of minor units`);
  if (!Number.isSafeInteger(value)) throw tooLarge(field);
}

function toSafeNumber(value: bigint, field: string): number {
  if (value > MAX_SAFE || value < -MAX_SAFE) throw tooLarge(field);
  return Number(value);
}

function tooLarge(field: string): BadInputError {
  return new BadInputError(`${field}: amount past Number.MAX_SAFE_INTEGER minor units`, { field });
}

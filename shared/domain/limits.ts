import * as z from 'zod/mini';
import en from 'zod/v4/locales/en.js';

// Every schema the functions load is zod/mini (a third of classic zod's size and start-up cost, see
// infra/bundle-report.ts); mini comes without messages, so it gets classic's English ones. (Imported
// by path: `z.locales.en` would make the bundler keep every locale, about 200 KiB.)
z.config(en());

/**
 * The platform's request limits, written once: the normalized events (so ingest and finance refuse at
 * the door what the worker could never send), the affiliate client's request schemas and the sandbox
 * all build on these, so an event the door accepts is one the client accepts.
 */

/** Longest id or code the platform takes (`externalId`, `customerId`, `subId`, `voucher`, …). */
export const MAX_ID_LENGTH = 256;

/**
 * ISO 4217 codes (List One, 2025) and the withdrawn codes the platform's own list still carries
 * (BYR, CUC, HRK, LTL, LVL, MRO, SLL, STD, VEF, XFU: a late refund of an old order may name one).
 * Left out: XTS (reserved for tests), XXX (no currency) and XBT (not ISO 4217).
 */
export const CURRENCIES = [
  ...['AED', 'AFN', 'ALL', 'AMD', 'ANG', 'AOA', 'ARS', 'AUD', 'AWG', 'AZN', 'BAM', 'BBD', 'BDT', 'BGN'],
  ...['BHD', 'BIF', 'BMD', 'BND', 'BOB', 'BOV', 'BRL', 'BSD', 'BTN', 'BWP', 'BYN', 'BYR', 'BZD', 'CAD'],
  ...['CDF', 'CHE', 'CHF', 'CHW', 'CLF', 'CLP', 'CNY', 'COP', 'COU', 'CRC', 'CUC', 'CUP', 'CVE', 'CZK'],
  ...['DJF', 'DKK', 'DOP', 'DZD', 'EGP', 'ERN', 'ETB', 'EUR', 'FJD', 'FKP', 'GBP', 'GEL', 'GHS', 'GIP'],
  ...['GMD', 'GNF', 'GTQ', 'GYD', 'HKD', 'HNL', 'HRK', 'HTG', 'HUF', 'IDR', 'ILS', 'INR', 'IQD', 'IRR'],
  ...['ISK', 'JMD', 'JOD', 'JPY', 'KES', 'KGS', 'KHR', 'KMF', 'KPW', 'KRW', 'KWD', 'KYD', 'KZT', 'LAK'],
  ...['LBP', 'LKR', 'LRD', 'LSL', 'LTL', 'LVL', 'LYD', 'MAD', 'MDL', 'MGA', 'MKD', 'MMK', 'MNT', 'MOP'],
  ...['MRO', 'MRU', 'MUR', 'MVR', 'MWK', 'MXN', 'MXV', 'MYR', 'MZN', 'NAD', 'NGN', 'NIO', 'NOK', 'NPR'],
  ...['NZD', 'OMR', 'PAB', 'PEN', 'PGK', 'PHP', 'PKR', 'PLN', 'PYG', 'QAR', 'RON', 'RSD', 'RUB', 'RWF'],
  ...['SAR', 'SBD', 'SCR', 'SDG', 'SEK', 'SGD', 'SHP', 'SLE', 'SLL', 'SOS', 'SRD', 'SSP', 'STD', 'STN'],
  ...['SVC', 'SYP', 'SZL', 'THB', 'TJS', 'TMT', 'TND', 'TOP', 'TRY', 'TTD', 'TWD', 'TZS', 'UAH', 'UGX'],
  ...['USD', 'USN', 'UYI', 'UYU', 'UYW', 'UZS', 'VED', 'VEF', 'VES', 'VND', 'VUV', 'WST', 'XAF', 'XAG'],
  ...['XAU', 'XBA', 'XBB', 'XBC', 'XBD', 'XCD', 'XCG', 'XDR', 'XFU', 'XOF', 'XPD', 'XPF', 'XPT', 'XSU'],
  ...['XUA', 'YER', 'ZAR', 'ZMW', 'ZWG', 'ZWL'],
] as const;
export type Currency = (typeof CURRENCIES)[number];
const CURRENCY_SET: ReadonlySet<string> = new Set(CURRENCIES);

/** Whether `code` is in `CURRENCIES` (exactly: upper case). */
export function isCurrency(code: string): code is Currency {
  return CURRENCY_SET.has(code);
}

/** A currency as the platform takes it: an upper-case code from `CURRENCIES`. */
export const Currency = z.enum(CURRENCIES, { error: 'must be an ISO 4217 currency code (upper case)' });

/**
 * A currency as callers write it (shops and finance staff send `eur` as often as `EUR`): trimmed and
 * upper-cased, then checked against `CURRENCIES`. Every door (webhooks, `/refunds`) reads it this way.
 */
export const CurrencyInput = z.pipe(
  z.string().check(z.trim(), z.toUpperCase(), z.refine(isCurrency, 'must be an ISO 4217 currency code')),
  z.transform((v) => v as Currency),
);

// C0, DEL and C1 controls: nothing an id or a code holds, and what some stores mangle (NUL ends a C string).
const CONTROL = /\p{Cc}/u;
// In free text, tab and line breaks are fine.
const CONTROL_IN_TEXT = /(?![\t\n\r])\p{Cc}/u;

/**
 * An id or a code (order, refund, customer, voucher, product, sub id): 1 to `max` characters, no
 * control characters, no lone surrogate (a half of an emoji is not a character any system can store).
 */
export function idText(max = MAX_ID_LENGTH) {
  return z.string().check(
    z.minLength(1, 'must not be empty'),
    z.maxLength(max, `must be at most ${max} characters`),
    z.refine((v) => !CONTROL.test(v), 'must not contain control characters'),
    z.refine((v) => v.isWellFormed(), 'must be valid Unicode (a lone surrogate)'),
  );
}

/** Free text (a reason): at most `max` characters, valid Unicode, no control characters but tab and line breaks. */
export function freeText(max: number) {
  return z.string().check(
    z.maxLength(max, `must be at most ${max} characters`),
    z.refine((v) => !CONTROL_IN_TEXT.test(v), 'must not contain control characters'),
    z.refine((v) => v.isWellFormed(), 'must be valid Unicode (a lone surrogate)'),
  );
}

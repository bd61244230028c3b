import { HttpError } from './http.ts';

/**
 * The `Currency` list of the platform's current API (4.93), as its document gives it. It is not the
 * connector's list (`shared/domain/limits.ts`, ISO 4217 of today): it lacks the codes that replaced
 * withdrawn ones (BYN, MRU, SLE, STN, VES, VED, ZWG, XCG…), and a platform that checks the enum
 * refuses them. The shared schema (the connector's) lets them through, so the sandbox checks this
 * list on top of it: an order in VES fails here as it would in production, not first there.
 */
const PLATFORM_CURRENCIES: ReadonlySet<string> = new Set([
  ...['AED', 'AFN', 'ALL', 'AMD', 'ANG', 'AOA', 'ARS', 'AUD', 'AWG', 'AZN', 'BAM', 'BBD', 'BDT', 'BGN'],
  ...['BHD', 'BIF', 'BMD', 'BND', 'BOB', 'BOV', 'BRL', 'BSD', 'BTN', 'BWP', 'BYR', 'BZD', 'CAD', 'CDF'],
  ...['CHE', 'CHF', 'CHW', 'CLF', 'CLP', 'CNY', 'COP', 'COU', 'CRC', 'CUC', 'CUP', 'CVE', 'CZK', 'DJF'],
  ...['DKK', 'DOP', 'DZD', 'EGP', 'ERN', 'ETB', 'EUR', 'FJD', 'FKP', 'GBP', 'GEL', 'GHS', 'GIP', 'GMD'],
  ...['GNF', 'GTQ', 'GYD', 'HKD', 'HNL', 'HRK', 'HTG', 'HUF', 'IDR', 'ILS', 'INR', 'IQD', 'IRR', 'ISK'],
  ...['JMD', 'JOD', 'JPY', 'KES', 'KGS', 'KHR', 'KMF', 'KPW', 'KRW', 'KWD', 'KYD', 'KZT', 'LAK', 'LBP'],
  ...['LKR', 'LRD', 'LSL', 'LTL', 'LVL', 'LYD', 'MAD', 'MDL', 'MGA', 'MKD', 'MMK', 'MNT', 'MOP', 'MRO'],
  ...['MUR', 'MVR', 'MWK', 'MXN', 'MXV', 'MYR', 'MZN', 'NAD', 'NGN', 'NIO', 'NOK', 'NPR', 'NZD', 'OMR'],
  ...['PAB', 'PEN', 'PGK', 'PHP', 'PKR', 'PLN', 'PYG', 'QAR', 'RON', 'RSD', 'RUB', 'RWF', 'SAR', 'SBD'],
  ...['SCR', 'SDG', 'SEK', 'SGD', 'SHP', 'SLL', 'SOS', 'SRD', 'SSP', 'STD', 'SYP', 'SZL', 'THB', 'TJS'],
  ...['TMT', 'TND', 'TOP', 'TRY', 'TTD', 'TWD', 'TZS', 'UAH', 'UGX', 'USD', 'UYI', 'UYU', 'UZS', 'VEF'],
  ...['VND', 'VUV', 'WST', 'XAF', 'XAG', 'XAU', 'XBA', 'XBB', 'XBC', 'XBD', 'XBT', 'XCD', 'XDR', 'XFU'],
  ...['XOF', 'XPD', 'XPF', 'XPT', 'XTS', 'XXX', 'YER', 'ZAR', 'ZMW'],
]);

/** A 400 naming `currency` when a currency sent is not in the platform's list. */
export function requirePlatformCurrency(currency: string | undefined): void {
  if (currency === undefined || PLATFORM_CURRENCIES.has(currency)) return;
  throw new HttpError(
    400,
    `currency: ${currency} is not in the platform's Currency list (API 4.93)`,
    'currency',
  );
}

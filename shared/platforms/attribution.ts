import type { SourceConfig } from '../config/sources.ts';
import { idText } from '../domain/limits.ts';
import { BadInputError } from '../errors.ts';
import { firstIp, unique } from './mapping.ts';

/**
 * Tracking data read from a shop's free-form attributes: Shopify `note_attributes` and the
 * `landing_site` query, WooCommerce `meta_data`, Stripe `metadata`, the Generic `attributes`. The
 * names are configuration (`SourceConfig.clickIdAttributes`, `trackingIdAttributes`,
 * `subIdAttributes`); the mode (tracking, manual, skip) is chosen later by the worker.
 */

/** One attribute with the dotted path of its value in the payload: the field a 400 names, or a skip reports. */
export interface AttributeEntry {
  readonly name: string;
  readonly value: unknown;
  readonly field: string;
}

/**
 * What an invalid value (a tracking id that is not one, a click id or subId the event would refuse)
 * gets. `skip` where the buyer writes the values, directly or not: a Shopify cart attribute can be
 * set by anyone through the storefront's AJAX cart (`/cart/update.js`), themes and plugins copy the
 * URL's `aecid` or a cookie into a cart attribute, WooCommerce order meta or Stripe session
 * metadata unchecked, and a landing URL is the visitor's. A 400 there makes the platform resend the
 * same body until it drops the order, and then disables the webhook (Shopify deletes the
 * subscription after repeated failures, WooCommerce disables it after 5 in a row). `reject` where
 * the sender's own code is the contract and sees the 400 when it posts (the Generic webhook).
 */
export type InvalidAttributes = 'skip' | 'reject';

export type AttributeNames = Pick<
  SourceConfig,
  'clickIdAttributes' | 'trackingIdAttributes' | 'subIdAttributes'
>;

export interface Attribution {
  readonly clickIds: string[];
  readonly affiliateTrackingId?: number;
  readonly subId?: string;
}

/** What `extractAttribution` read, and the fields of the values it skipped (paths, never values). */
export interface AttributionRead {
  readonly attribution: Attribution;
  readonly skippedFields: string[];
}

/** Attribute names that may carry the buyer's IP where the platform has no field for it (Stripe metadata). */
export const IP_ATTRIBUTES: readonly string[] = ['buyer_ip', 'ip', 'customer_ip'];

/** `[{ name, value }]` lists: Shopify `note_attributes`, the Generic `attributes`. */
export function nameValueEntries(
  list: readonly unknown[] | null | undefined,
  path: string,
): AttributeEntry[] {
  return pairEntries(list, path, 'name');
}

/** `[{ key, value }]` lists: WooCommerce `meta_data`. */
export function keyValueEntries(list: readonly unknown[] | null | undefined, path: string): AttributeEntry[] {
  return pairEntries(list, path, 'key');
}

function pairEntries(
  list: readonly unknown[] | null | undefined,
  path: string,
  nameKey: string,
): AttributeEntry[] {
  const entries: AttributeEntry[] = [];
  (list ?? []).forEach((item, i) => {
    if (typeof item !== 'object' || item === null) return;
    const record = item as Record<string, unknown>;
    const name = record[nameKey];
    if (typeof name === 'string') entries.push({ name, value: record['value'], field: `${path}.${i}.value` });
  });
  return entries;
}

/** `{ name: value }` maps: Stripe `metadata`. */
export function recordEntries(record: Readonly<Record<string, unknown>> | null | undefined, path: string) {
  return Object.entries(record ?? {}).map(
    ([name, value]): AttributeEntry => ({ name, value, field: `${path}.${name}` }),
  );
}

/**
 * The query parameters of a URL the buyer landed on (Shopify `landing_site`, often a bare path such
 * as `/products/x?aecid=…`). An unreadable URL yields nothing.
 */
export function urlQueryEntries(url: string | null | undefined, path: string): AttributeEntry[] {
  if (!url) return [];
  let parsed: URL;
  try {
    parsed = new URL(url, 'https://shop.invalid/');
  } catch {
    return [];
  }
  return [...parsed.searchParams].map(([name, value]) => ({ name, value, field: path }));
}

/**
 * Shops hide technical attributes behind a leading underscore (Shopify cart attributes `_aecid`,
 * WooCommerce private meta `_aecid`), so `aecid` matches both; the case is ignored.
 */
function matches(entryName: string, configured: readonly string[]): boolean {
  const name = entryName.trim().toLowerCase();
  return configured.some((c) => {
    const wanted = c.toLowerCase();
    return name === wanted || name === `_${wanted}`;
  });
}

function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value.trim() || undefined;
  if (typeof value === 'number' && Number.isFinite(value)) return value.toString();
  return undefined;
}

/**
 * Click ids, affiliate tracking id and subId from attribute entries. Click ids are collected from
 * every matching entry (a value may hold several, separated by commas or spaces) without
 * duplicates; the tracking id and subId come from the first matching non-blank entry. With
 * `invalid` `skip`, a value the event would refuse (a tracking id that is not one, a click id or
 * subId past the length limit or with a control character) is left out, the next valid one taken,
 * and its entry's field reported in `skippedFields`; with `reject`, it is passed on (the event check
 * answers 400 for a click id or subId).
 *
 * @throws BadInputError naming the attribute's field, with `invalid` `reject`, when the tracking id
 * is not a positive integer
 */
export function extractAttribution(
  entries: readonly AttributeEntry[],
  names: AttributeNames,
  invalid: InvalidAttributes,
): AttributionRead {
  const skipped = new Set<AttributeEntry>();
  const keep = (entry: AttributeEntry, valid: boolean): boolean => {
    if (!valid && invalid === 'skip') skipped.add(entry);
    return valid || invalid === 'reject';
  };
  const clickIds = unique(
    entries
      .filter((e) => matches(e.name, names.clickIdAttributes))
      .flatMap((e) =>
        (text(e.value) ?? '')
          .split(/[\s,]+/)
          .filter((id) => id.length > 0)
          .filter((id) => keep(e, isId(id))),
      ),
  );
  // Every candidate is judged (not only those up to the one taken), so each invalid one is reported.
  const trackingEntry = entries
    .filter((e) => matches(e.name, names.trackingIdAttributes) && text(e.value))
    .filter((e) => keep(e, trackingIdOf(e) !== undefined))[0];
  const subId = entries
    .filter((e) => matches(e.name, names.subIdAttributes))
    .flatMap((e) => {
      const value = text(e.value);
      return value !== undefined && keep(e, isId(value)) ? [value] : [];
    })[0];
  return {
    attribution: {
      clickIds,
      ...(trackingEntry ? { affiliateTrackingId: trackingId(trackingEntry) } : {}),
      ...(subId !== undefined ? { subId } : {}),
    },
    skippedFields: [...new Set(entries.filter((e) => skipped.has(e)).map((e) => e.field))],
  };
}

/** The event's rule for a click id or subId (`OrderPlaced`): what one must pass not to be skipped. */
const EventId = idText();

function isId(value: string): boolean {
  return EventId.safeParse(value).success;
}

/** The platform's tracking id is the integer after the tracking code's prefix: digits only here. */
function trackingIdOf(entry: AttributeEntry): number | undefined {
  const value = text(entry.value) ?? '';
  const id = /^[0-9]{1,16}$/.test(value) ? Number.parseInt(value, 10) : Number.NaN;
  return Number.isSafeInteger(id) && id > 0 ? id : undefined;
}

function trackingId(entry: AttributeEntry): number {
  const id = trackingIdOf(entry);
  if (id === undefined) {
    throw new BadInputError(
      `${entry.field}: attribute "${entry.name}" must be a positive integer affiliate tracking id`,
      {
        field: entry.field,
      },
    );
  }
  return id;
}

/** The buyer's IP from attributes named in `IP_ATTRIBUTES`, when valid. */
export function attributeIp(entries: readonly AttributeEntry[]): string | undefined {
  return firstIp(...entries.filter((e) => matches(e.name, IP_ATTRIBUTES)).map((e) => e.value));
}

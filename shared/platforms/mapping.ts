import { createHash } from 'node:crypto';
import * as z from 'zod/mini';
import {
  type BasisLine,
  ConnectorEvent,
  type ConnectorEventInput,
  MAX_BASIS_LINES,
  RefundBasis,
  RefundLine,
} from '../domain/events.ts';
import { CurrencyInput } from '../domain/limits.ts';
import { shopText } from '../domain/text.ts';
import { BadInputError } from '../errors.ts';
import { type ParseMoneyOptions, parseMoney, sumMinor } from '../money.ts';
import { firstIssue } from '../validation.ts';
import type { AdapterResult } from './types.ts';

/**
 * Pieces every adapter shares: zod building blocks for the parts of a payload we read, the
 * "400 naming the field" conversion, and the final check of each produced event (`mapped`).
 */

/** Ids arrive as numbers (safe ones), or as strings (big ones, via `parseJsonBody`): always strings out. */
export const IdString = idString();

/** `IdString` with its own zod `error` (a `topicMark`). */
export function idString(params?: { error: ReturnType<typeof topicMark> }) {
  return z.pipe(
    z.union([z.string().check(z.trim(), z.minLength(1)), z.number().check(z.int(), z.nonnegative())], params),
    z.transform((v) => (typeof v === 'number' ? v.toString() : v)),
  );
}

/**
 * A money value as the payload writes it: a decimal string (the rule), or a JSON number (Shopify's
 * refund `subtotal`, a plugin's totals). A number with more than 15 significant digits, which a
 * double cannot hold as written, reaches here as its source text (`parseJsonBody`); any other is
 * turned back into its shortest decimal text, which is then exactly the decimal written. Either way
 * `parseMoney` reads the digits the sender wrote, without float arithmetic, and rejects exponent
 * notation.
 */
export const MoneyText = z.union([
  z.string(),
  z.pipe(
    z.number().check(z.refine(Number.isFinite, 'must be a finite number')),
    z.transform((v) => v.toString()),
  ),
]);

/** Reads a decimal amount, reporting `field` (the dotted payload path) when it is not one. */
export function money(
  value: string,
  currency: string,
  field: string,
  options: ParseMoneyOptions = {},
): number {
  return parseMoney(value, currency, { ...options, field });
}

/** ISO 4217 code as received (some platforms send lower case): the door's one reading of a currency. */
export const CurrencyCode = CurrencyInput;

/**
 * A field that the payload of this topic never carries but another topic's does (null counts as
 * absent). Shop platforms sign the body, not the topic header, so a body signed for one topic can
 * be resent under another: `why` says whose field it is, and the 400 names it.
 */
export function absentField(why: string) {
  return z.optional(z.null({ error: why }));
}

/**
 * The zod `error` of a field only this topic's payload carries: its absence (or null) is reported as
 * `required: <why>` (see `absentField`); any other issue keeps zod's own message.
 */
export function topicMark(why: string) {
  return (issue: { input: unknown }) =>
    issue.input === undefined || issue.input === null
      ? `required: ${why}; this body was not sent for this topic`
      : undefined;
}

/**
 * Parses the part of a payload an adapter reads.
 *
 * @throws BadInputError naming the first failing field as a dotted path (`line_items.0.price`)
 */
export function parsePayload<S extends z.core.$ZodType>(schema: S, body: unknown, prefix = ''): z.output<S> {
  const result = z.safeParse(schema, body);
  if (result.success) return result.data;
  const issue = firstIssue(result.error, prefix);
  const field = issue.field || 'body';
  throw new BadInputError(`${field}: ${issue.message}`, { field });
}

/**
 * An adapter's result for the events it mapped, each validated against the queue's contract: the
 * one place events are checked, so a mapping bug or an odd payload is answered 400 at the door
 * instead of failing in the worker. `skippedFields` (see `AdapterResult`) is kept when not empty.
 *
 * @throws BadInputError naming the event field that failed
 */
export function mapped(events: readonly ConnectorEventInput[], skippedFields: string[] = []): AdapterResult {
  const checked = events.map(checkEvent);
  return skippedFields.length > 0
    ? { kind: 'events', events: checked, skippedFields }
    : { kind: 'events', events: checked };
}

function checkEvent(event: ConnectorEventInput): ConnectorEvent {
  let result = ConnectorEvent.safeParse(event);
  if (!result.success && result.error.issues.some((issue) => issue.path[0] === 'eventId')) {
    result = ConnectorEvent.safeParse({ ...event, eventId: hashedEventId(event.eventId) });
  }
  if (result.success) return result.data;
  const issue = firstIssue(result.error);
  const field = issue.field || 'event';
  throw new BadInputError(`mapped ${event.type} event: ${field}: ${issue.message}`, { field });
}

/**
 * The dedup key of an event whose key, as the adapter built it, would not pass the event schema (over
 * 512 characters, or with control characters): a hash of it. The key is ours, built from fields the
 * sender wrote validly (a WooCommerce `<topic>:<order id>:<date_modified_gmt>`, a Stripe `<event
 * id>:<refund id>`) and read only as the queue's deduplication id; the hash is the same for every
 * retry of the delivery, where a 400 naming `eventId` would lose a valid order over a field the
 * sender never wrote.
 */
function hashedEventId(eventId: string): string {
  return `key-sha256:${createHash('sha256').update(eventId).digest('hex')}`;
}

/**
 * A reason the shop wrote (a refund note, a cancel reason) as the event's `reason` takes it (see
 * `shopText`): at most 500 characters, cut on a character boundary, without control characters;
 * none when nothing is left.
 */
export function shopReason(value: string | null | undefined): string | undefined {
  return value ? shopText(value, 500) || undefined : undefined;
}

/** The dedup key of a delivery that carries none: a hash of the exact bytes. */
export function bodySha256(rawBody: Buffer): string {
  return `sha256:${createHash('sha256').update(rawBody).digest('hex')}`;
}

/**
 * A header's value, trimmed; undefined when absent or blank. A header sent twice arrives as one
 * value joined with commas (API Gateway writes `a,b`, Node `a, b`), and none of the platforms'
 * topics or ids holds a comma: the same value repeated is read as that value.
 *
 * @throws BadInputError naming the header when it arrived several times with different values
 */
export function header(
  headers: Readonly<Record<string, string | undefined>>,
  name: string,
): string | undefined {
  const values = [...new Set((headers[name] ?? '').split(',').map((v) => v.trim()))].filter(Boolean);
  if (values.length > 1) {
    throw new BadInputError(`${name} header: sent several times with different values`, { field: name });
  }
  return values[0];
}

/**
 * A header the platform always sends (the topic), trimmed.
 *
 * @throws BadInputError naming the header when it is absent or blank
 */
export function requiredHeader(headers: Readonly<Record<string, string | undefined>>, name: string): string {
  const value = header(headers, name);
  if (!value) throw new BadInputError(`missing ${name} header`, { field: name });
  return value;
}

/**
 * The event schema's `buyerIp` rule. Not node's `isIP`, which also takes what the schema refuses
 * (an IPv6 zone id such as `fe80::1%eth0`), so a candidate it passed would fail the whole event.
 */
const IpAddress = z.union([z.ipv4(), z.ipv6()]);

/** The first candidate that is an IPv4 or IPv6 address; blanks and junk are skipped, not fatal. */
export function firstIp(...candidates: unknown[]): string | undefined {
  for (const candidate of candidates) {
    if (typeof candidate !== 'string') continue;
    const ip = candidate.trim();
    if (IpAddress.safeParse(ip).success) return ip;
  }
  return undefined;
}

/**
 * An ISO 8601 timestamp with offset from a platform date: Shopify's carry an offset, WooCommerce's
 * `*_gmt` fields are UTC without one. Undefined when absent or unreadable (the date is optional).
 */
export function isoDate(value: string | null | undefined, assumeUtc = false): string | undefined {
  if (!value) return undefined;
  const text = assumeUtc && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?$/.test(value) ? `${value}Z` : value;
  return z.iso.datetime({ offset: true }).safeParse(text).success ? text : undefined;
}

/** Unix seconds (Stripe `created`) as an ISO timestamp. */
export function unixToIso(seconds: number | null | undefined): string | undefined {
  if (
    typeof seconds !== 'number' ||
    !Number.isSafeInteger(seconds) ||
    seconds <= 0 ||
    seconds > 253_402_300_799
  )
    return undefined;
  return new Date(seconds * 1000).toISOString();
}

/** Keeps the first occurrence of each non-empty string. */
export function unique(values: Iterable<string>): string[] {
  return [...new Set([...values].map((v) => v.trim()).filter((v) => v.length > 0))];
}

/**
 * The order's `RefundBasis` from its lines (net, tax, quantity each): totals over every line, the
 * lines themselves up to `MAX_BASIS_LINES` (past it only the totals and the tax mode are kept, and
 * refunds of the lines left out are computed from their own money).
 */
export function refundBasis(
  lines: readonly BasisLine[],
  options: { readonly taxesIncluded: boolean; readonly shipping: number },
): RefundBasis {
  return {
    taxesIncluded: options.taxesIncluded,
    net: sumMinor(
      lines.map((l) => l.net),
      'line_items',
    ),
    tax: sumMinor(
      lines.map((l) => l.tax),
      'line_items',
    ),
    shipping: Math.max(0, options.shipping),
    lines: lines.slice(0, MAX_BASIS_LINES),
    truncated: lines.length > MAX_BASIS_LINES,
  };
}

/**
 * A refund's lines for the event: none past `MAX_BASIS_LINES`, or when one would not pass the event
 * schema (an id past the length limit): the adapter's amount then stands, and the refund is not
 * refused for lines it was never judged by.
 */
export function refundLines(lines: readonly RefundLine[]): { lines?: RefundLine[] } {
  if (lines.length === 0 || lines.length > MAX_BASIS_LINES) return {};
  return lines.every((l) => RefundLine.safeParse(l).success) ? { lines: [...lines] } : {};
}

/**
 * The basis, or none when a part of the payload that the amount does not read (a tax or shipping
 * line) cannot be read: refunds of that order then keep the adapter's rules, and the order is not
 * refused for a field it was never judged by.
 */
export function optionalBasis(build: () => RefundBasis | undefined): RefundBasis | undefined {
  let basis: RefundBasis | undefined;
  try {
    basis = build();
  } catch (error) {
    if (error instanceof BadInputError) return undefined;
    throw error;
  }
  // A line the event schema refuses (an over-discounted line's negative net, an over-long id).
  return basis && RefundBasis.safeParse(basis).success ? basis : undefined;
}

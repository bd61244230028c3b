import { HttpError } from '../http.ts';

/** The query-string helpers of the shop fakes' list routes (orders, refunds, events, subscriptions). */

export type Query = Record<string, string | string[]>;

export function one(query: Query, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) throw new HttpError(400, `${name}: given more than once`, name);
  return value;
}

export function limit(query: Query, name: string, fallback: number, max: number): number {
  const raw = one(query, name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > max) {
    throw new HttpError(400, `${name}: an integer from 1 to ${max}`, name);
  }
  return value;
}

// Shopify's cursor: opaque to clients, here the offset and the filters of the first request.
export function cursor(state: { offset: number; query: Query }): string {
  return Buffer.from(JSON.stringify(state)).toString('base64url');
}

export function uncursor(raw: string): { offset: number; query: Query } {
  try {
    const state = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as {
      offset: number;
      query: Query;
    };
    if (Number.isInteger(state.offset) && typeof state.query === 'object') return state;
  } catch {
    // fall through
  }
  throw new HttpError(400, 'page_info: invalid value', 'page_info');
}

/**
 * Where a Shopify list request starts: its page size, offset and filters. As Shopify: a page after
 * the first takes only `limit` (and `fields`) besides `page_info`, whose cursor holds the filters.
 */
export function shopifyPageOf(query: Query): { size: number; offset: number; filters: Query } {
  const pageInfo = one(query, 'page_info');
  const size = limit(query, 'limit', 50, 250);
  if (pageInfo === undefined) return { size, offset: 0, filters: query };
  const extra = Object.keys(query).filter((k) => !['page_info', 'limit', 'fields'].includes(k));
  if (extra.length > 0) {
    throw new HttpError(400, `page_info cannot be combined with ${extra.join(', ')}`, extra[0]);
  }
  const { offset, query: filters } = uncursor(pageInfo);
  return { size, offset, filters };
}

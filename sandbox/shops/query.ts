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

import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import {
  CommissionAdjustmentAddBody,
  ConversionAcceptBody,
  ConversionAddBody,
  ConversionInfoQuery,
  ConversionRefuseBody,
  ConversionsListQuery,
  ConversionUpdateBody,
} from '../shared/affiliate/schemas.ts';
import { safeEqual } from '../shared/platforms/signature.ts';
import {
  acceptConversion,
  addCommissionAdjustment,
  addConversion,
  advertiserInfo,
  conversionInfo,
  listConversions,
  refuseConversion,
  updateConversionAmount,
} from './actions.ts';
import { parseOr400 } from './http.ts';
import type { SandboxWorld } from './world.ts';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** What a route handler receives; `body` is the parsed JSON object of routes with `body: true`. */
export interface RouteRequest {
  query: Record<string, string | string[]>;
  body: Record<string, unknown> | undefined;
  /** Values of `{name}` segments of the route path. */
  params: Record<string, string>;
}

/**
 * Authorization schemes of the API route tables. The server owns one checker per scheme: `bearer`
 * for the current API, `basic` for the legacy `/2.0/` routes.
 */
export type AuthScheme = 'bearer' | 'basic';

/** One row of an API route table: rate limited, authenticated and exposed to faults by the server. */
export interface ApiRoute {
  method: Method;
  /** Exact path, or a pattern with `{name}` segments (`/2.0/advertiser/{programId}/conversions`). */
  path: string;
  auth: AuthScheme;
  /** Reads a JSON body (action routes) rather than only the query (read routes). */
  body: boolean;
  /** Returns the 200 answer or throws HttpError. */
  handle(request: RouteRequest, world: SandboxWorld): unknown;
}

/** The current API (4.93) routes of the HTTP contract. */
export const CURRENT_API_ROUTES: readonly ApiRoute[] = [
  {
    method: 'GET',
    path: '/advertiser/advertisers.me',
    auth: 'bearer',
    body: false,
    handle: (_request, world) => advertiserInfo(world),
  },
  {
    method: 'GET',
    path: '/advertiser/conversions.list',
    auth: 'bearer',
    body: false,
    handle: ({ query }, world) => listConversions(parseOr400(ConversionsListQuery, query), world),
  },
  {
    method: 'GET',
    path: '/advertiser/conversions.info',
    auth: 'bearer',
    body: false,
    handle: ({ query }, world) => conversionInfo(parseOr400(ConversionInfoQuery, query), world),
  },
  {
    method: 'POST',
    path: '/advertiser/conversions.accept',
    auth: 'bearer',
    body: true,
    handle: ({ body }, world) => acceptConversion(parseOr400(ConversionAcceptBody, body), world),
  },
  {
    method: 'POST',
    path: '/advertiser/conversions.refuse',
    auth: 'bearer',
    body: true,
    handle: ({ body }, world) => refuseConversion(parseOr400(ConversionRefuseBody, body), world),
  },
  {
    method: 'POST',
    path: '/advertiser/conversions.update',
    auth: 'bearer',
    body: true,
    handle: ({ body }, world) => updateConversionAmount(parseOr400(ConversionUpdateBody, body), world),
  },
  {
    method: 'POST',
    path: '/advertiser/conversions.add',
    auth: 'bearer',
    body: true,
    handle: ({ body }, world) => addConversion(parseOr400(ConversionAddBody, body), world),
  },
  {
    method: 'POST',
    path: '/advertiser/commissionAdjustments.add',
    auth: 'bearer',
    body: true,
    handle: ({ body }, world) =>
      addCommissionAdjustment(parseOr400(CommissionAdjustmentAddBody, body), world),
  },
];

/** A route found for a request, or the methods the path does allow (405), or nothing (404). */
export type RouteMatch<R> =
  | { kind: 'found'; route: R; params: Record<string, string> }
  | { kind: 'method'; allowed: Method[] }
  | { kind: 'none' };

/** Finds the route of `method path` in a table of routes with `{name}` path patterns. */
export function matchRoute<R extends { method: Method; path: string }>(
  routes: readonly R[],
  method: string,
  path: string,
): RouteMatch<R> {
  const allowed: Method[] = [];
  for (const route of routes) {
    const params = matchPath(route.path, path);
    if (params === undefined) continue;
    if (route.method === method) return { kind: 'found', route, params };
    allowed.push(route.method);
  }
  return allowed.length > 0 ? { kind: 'method', allowed } : { kind: 'none' };
}

function matchPath(pattern: string, path: string): Record<string, string> | undefined {
  const want = pattern.split('/');
  const got = path.split('/');
  if (want.length !== got.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i] ?? '';
    const g = got[i] ?? '';
    if (w.startsWith('{') && w.endsWith('}')) {
      const value = safeDecode(g);
      if (value === undefined || value === '') return undefined;
      params[w.slice(1, -1)] = value;
    } else if (w !== g) return undefined;
  }
  return params;
}

function safeDecode(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** Checks `Authorization: Bearer <token>` in constant time. */
export function bearerChecker(token: string): (headers: IncomingHttpHeaders) => boolean {
  const expected = digest(`Bearer ${token}`);
  return (headers) => safeEqual(digest(headers.authorization ?? ''), expected);
}

/** Checks `Authorization: Basic base64(<user>:<password>)` in constant time. */
export function basicChecker(user: string, password: string): (headers: IncomingHttpHeaders) => boolean {
  const expected = digest(`${user}:${password}`);
  return (headers) => {
    const match = /^Basic +([A-Za-z0-9+/=]+) *$/i.exec(headers.authorization ?? '');
    const decoded = match?.[1] === undefined ? '' : Buffer.from(match[1], 'base64').toString('utf8');
    return safeEqual(digest(decoded), expected);
  };
}

// Hashing first gives equal lengths, so the compare takes the same time whatever the length.
function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

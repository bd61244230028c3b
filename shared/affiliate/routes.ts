import { ConfigurationError } from '../errors.ts';

/**
 * Paths of the platform's current API, relative to the base URL, keyed by operation name. The
 * specification names only a few routes for certain; the others come from public help pages, and
 * `conversions.add` only from the naming pattern (NOTES.md). So every path lives in this one table
 * and an operator can correct any of them by configuration, without a release.
 */
export const DEFAULT_ROUTES = {
  'advertisers.me': '/advertiser/advertisers.me',
  'conversions.list': '/advertiser/conversions.list',
  'conversions.info': '/advertiser/conversions.info',
  'conversions.accept': '/advertiser/conversions.accept',
  'conversions.refuse': '/advertiser/conversions.refuse',
  'conversions.update': '/advertiser/conversions.update',
  'conversions.add': '/advertiser/conversions.add',
  'commissionAdjustments.add': '/advertiser/commissionAdjustments.add',
} as const;

/** Operation names, which are also the keys of route overrides. */
export type RouteName = keyof typeof DEFAULT_ROUTES;

/** Path of every operation, relative to the base URL (`/advertiser/conversions.add`). */
export type RouteTable = { readonly [K in RouteName]: string };

export const ROUTE_NAMES = Object.keys(DEFAULT_ROUTES) as readonly RouteName[];

/** Reads take query parameters, actions a JSON body (spec, "Endpoints"). */
export const ROUTE_METHODS: { readonly [K in RouteName]: 'GET' | 'POST' } = {
  'advertisers.me': 'GET',
  'conversions.list': 'GET',
  'conversions.info': 'GET',
  'conversions.accept': 'POST',
  'conversions.refuse': 'POST',
  'conversions.update': 'POST',
  'conversions.add': 'POST',
  'commissionAdjustments.add': 'POST',
};

const PATH = /^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/;

function isRouteName(name: string): name is RouteName {
  return Object.hasOwn(DEFAULT_ROUTES, name);
}

function checkPath(setting: string, value: unknown): string {
  if (typeof value !== 'string' || !PATH.test(value) || value.includes('//')) {
    throw new ConfigurationError(`${setting}: must be a path relative to the base URL, starting with /`);
  }
  return value;
}

/**
 * The route table with `overrides` applied, each override checked to be a base-URL-relative path.
 * Throws `ConfigurationError` naming the wrong route.
 */
export function resolveRoutes(overrides: Partial<RouteTable> = {}, setting = 'routes'): RouteTable {
  const table: Record<RouteName, string> = { ...DEFAULT_ROUTES };
  for (const [name, path] of Object.entries(overrides)) {
    if (!isRouteName(name)) {
      throw new ConfigurationError(`${setting}: unknown route "${name}" (known: ${ROUTE_NAMES.join(', ')})`);
    }
    if (path === undefined) continue;
    table[name] = checkPath(`${setting}.${name}`, path);
  }
  return table;
}

/**
 * Route overrides from a JSON object text, as held by an environment variable, for example
 * `{"conversions.add":"/advertiser/conversions.create"}`. Empty or absent means no override.
 * Fails fast with a `ConfigurationError` that names `setting` and the wrong route.
 */
export function parseRouteOverrides(
  json: string | undefined,
  setting = 'AFFILIATE_ROUTES',
): Partial<RouteTable> {
  if (json === undefined || json.trim() === '') return {};
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new ConfigurationError(`${setting}: not valid JSON`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigurationError(`${setting}: must be a JSON object of route name to path`);
  }
  const overrides: Partial<Record<RouteName, string>> = {};
  for (const [name, path] of Object.entries(raw)) {
    if (!isRouteName(name)) {
      throw new ConfigurationError(`${setting}: unknown route "${name}" (known: ${ROUTE_NAMES.join(', ')})`);
    }
    overrides[name] = checkPath(`${setting}.${name}`, path);
  }
  return overrides;
}

/** `baseUrl` (which may carry a path prefix such as `/v4`) joined with a route path. */
export function routeUrl(baseUrl: string, path: string): string {
  return baseUrl.replace(/\/+$/, '') + path;
}

import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { safeEqual } from '../../shared/platforms/signature.ts';
import { HttpError } from '../http.ts';
import type { Method } from '../routes.ts';
import { cursor, limit, one, type Query, shopifyPageOf } from './query.ts';
import type { ShopFakeStore } from './store.ts';
import {
  type SubscriptionAnswer,
  type SubscriptionRequest,
  shopifyCreateWebhook,
  shopifyListWebhooks,
  stripeCreateEndpoint,
  stripeListEndpoints,
  stripeUpdateEndpoint,
  wooCreateWebhook,
  wooListWebhooks,
  wooUpdateWebhook,
} from './subscriptions.ts';
import type { ShopFakeCredentials, ShopFakePlatform } from './types.ts';

/**
 * The parts of the shop APIs the connector reads, as the shops document them, under a path prefix
 * per platform on the sandbox's port: `/shopify/admin/api/2025-07/…` (base URL `<sandbox>/shopify`),
 * `/woocommerce/wp-json/wc/v3/…` (`<sandbox>/woocommerce`), `/stripe/v1/…` (`<sandbox>/stripe`).
 */

type Json = Record<string, unknown>;

export interface ShopRequest {
  readonly query: Query;
  readonly params: Record<string, string>;
  /** `http://host:port` the request came to, for the URLs an answer names (Shopify's `Link`). */
  readonly origin: string;
  readonly store: ShopFakeStore;
  readonly now: number;
  /** The raw request body: JSON for Shopify and WooCommerce, form-encoded for Stripe. */
  readonly body: string;
}

export interface ShopAnswer {
  readonly status?: number;
  readonly body: unknown;
  readonly headers?: Record<string, string>;
}

export interface ShopRoute {
  readonly platform: ShopFakePlatform;
  readonly method: Method;
  readonly path: string;
  handle(request: ShopRequest): ShopAnswer;
}

export const SHOPIFY_PREFIX = '/shopify/admin/api/2025-07';
export const WOOCOMMERCE_PREFIX = '/woocommerce/wp-json/wc/v3';
export const STRIPE_PREFIX = '/stripe/v1';

/** Stripe keeps events 30 days; older ones are not listed. */
export const STRIPE_EVENT_RETENTION_MS = 30 * 24 * 3600 * 1000;

function time(query: Query, name: string): number | undefined {
  const raw = one(query, name);
  if (raw === undefined || raw === '') return undefined;
  const at = Date.parse(raw);
  if (Number.isNaN(at)) throw new HttpError(400, `${name}: not an ISO 8601 time`, name);
  return at;
}

function within(at: number, min: number | undefined, max: number | undefined): boolean {
  return (min === undefined || at >= min) && (max === undefined || at <= max);
}

/** WooCommerce writes GMT dates without a zone. */
function gmt(value: unknown): number {
  return Date.parse(`${String(value)}Z`);
}

function shopifyOrders({ query, store, origin }: ShopRequest): ShopAnswer {
  const { size, offset, filters } = shopifyPageOf(query);
  const status = one(filters, 'status') ?? 'open';
  const min = time(filters, 'updated_at_min');
  const max = time(filters, 'updated_at_max');
  const matching = store.shopifyOrders.filter((order) => {
    if (!within(Date.parse(String(order['updated_at'])), min, max)) return false;
    const cancelled = order['cancelled_at'] !== null && order['cancelled_at'] !== undefined;
    const closed = order['closed_at'] !== null && order['closed_at'] !== undefined;
    if (status === 'open') return !cancelled && !closed;
    if (status === 'cancelled') return cancelled;
    if (status === 'closed') return closed;
    return true;
  });
  const page = matching.slice(offset, offset + size);
  const headers: Record<string, string> = {};
  if (offset + size < matching.length) {
    const next = cursor({ offset: offset + size, query: filters });
    headers['link'] = `<${origin}${SHOPIFY_PREFIX}/orders.json?limit=${size}&page_info=${next}>; rel="next"`;
  }
  return { body: { orders: page }, headers };
}

function shopifyRefunds({ params, store }: ShopRequest): ShopAnswer {
  const order = store.shopifyOrders.find((o) => String(o['id']) === params['id']);
  if (!order) throw new HttpError(404, 'Not Found');
  return { body: { refunds: order['refunds'] } };
}

function wooOrders({ query, store }: ShopRequest): ShopAnswer {
  const perPage = limit(query, 'per_page', 10, 100);
  const page = limit(query, 'page', 1, Number.MAX_SAFE_INTEGER);
  const after = time(query, 'modified_after');
  const before = time(query, 'modified_before');
  // Newest first, as WooCommerce lists by date by default.
  const matching = store.wooOrders
    .filter((o) => {
      const at = gmt(o['date_modified_gmt']);
      return (after === undefined || at > after) && (before === undefined || at < before);
    })
    .reverse();
  const total = matching.length;
  const pages = Math.max(1, Math.ceil(total / perPage));
  return {
    body: matching.slice((page - 1) * perPage, page * perPage),
    headers: { 'x-wp-total': String(total), 'x-wp-totalpages': String(pages) },
  };
}

function wooRefunds({ params, store, query }: ShopRequest): ShopAnswer {
  const refunds = store.wooRefunds.get(params['id'] ?? '');
  if (!refunds) throw new HttpError(404, 'Invalid ID.');
  const perPage = limit(query, 'per_page', 10, 100);
  const page = limit(query, 'page', 1, Number.MAX_SAFE_INTEGER);
  const list = [...refunds].reverse();
  return {
    body: list.slice((page - 1) * perPage, page * perPage),
    headers: {
      'x-wp-total': String(list.length),
      'x-wp-totalpages': String(Math.max(1, Math.ceil(list.length / perPage))),
    },
  };
}

function stripeEvents({ query, store, now }: ShopRequest): ShopAnswer {
  const size = limit(query, 'limit', 10, 100);
  const single = one(query, 'type');
  const many = query['types'];
  const types = many === undefined ? undefined : Array.isArray(many) ? many : [many];
  if (single !== undefined && types !== undefined) {
    throw new HttpError(400, 'type and types cannot both be given', 'types');
  }
  const bound = (name: string): number | undefined => {
    const raw = one(query, `created[${name}]`);
    if (raw === undefined) return undefined;
    const value = Number(raw);
    if (!Number.isInteger(value))
      throw new HttpError(400, `created[${name}]: an integer`, `created[${name}]`);
    return value;
  };
  const [gte, gt, lte, lt] = [bound('gte'), bound('gt'), bound('lte'), bound('lt')];
  const oldest = Math.floor((now - STRIPE_EVENT_RETENTION_MS) / 1000);
  // Newest first, as Stripe lists.
  let matching = store.stripeEvents
    .filter((e) => {
      const created = e['created'] as number;
      if (created < oldest) return false;
      if (gte !== undefined && created < gte) return false;
      if (gt !== undefined && created <= gt) return false;
      if (lte !== undefined && created > lte) return false;
      if (lt !== undefined && created >= lt) return false;
      const type = e['type'] as string;
      if (single !== undefined)
        return single.endsWith('.*') ? type.startsWith(single.slice(0, -1)) : type === single;
      return types === undefined || types.includes(type);
    })
    .reverse();
  const after = one(query, 'starting_after');
  if (after !== undefined) {
    const at = matching.findIndex((e) => e['id'] === after);
    if (at < 0) throw new HttpError(400, `starting_after: no such event ${after}`, 'starting_after');
    matching = matching.slice(at + 1);
  }
  return {
    body: {
      object: 'list',
      url: '/v1/events',
      has_more: matching.length > size,
      data: matching.slice(0, size),
    },
  };
}

export const SHOP_ROUTES: readonly ShopRoute[] = [
  { platform: 'shopify', method: 'GET', path: `${SHOPIFY_PREFIX}/orders.json`, handle: shopifyOrders },
  {
    platform: 'shopify',
    method: 'GET',
    path: `${SHOPIFY_PREFIX}/orders/{id}/refunds.json`,
    handle: shopifyRefunds,
  },
  { platform: 'woocommerce', method: 'GET', path: `${WOOCOMMERCE_PREFIX}/orders`, handle: wooOrders },
  {
    platform: 'woocommerce',
    method: 'GET',
    path: `${WOOCOMMERCE_PREFIX}/orders/{id}/refunds`,
    handle: wooRefunds,
  },
  { platform: 'stripe', method: 'GET', path: `${STRIPE_PREFIX}/events`, handle: stripeEvents },
  ...subscriptionRoutes(),
];

/** The webhook subscription routes (subscriptions.ts), over the store's subscriptions. */
function subscriptionRoutes(): ShopRoute[] {
  const on =
    (handle: (r: SubscriptionRequest) => SubscriptionAnswer) =>
    (r: ShopRequest): ShopAnswer =>
      handle({ ...r, subscriptions: r.store.subscriptions });
  const shopify = `${SHOPIFY_PREFIX}/webhooks.json`;
  const woo = `${WOOCOMMERCE_PREFIX}/webhooks`;
  const stripe = `${STRIPE_PREFIX}/webhook_endpoints`;
  return [
    { platform: 'shopify', method: 'GET', path: shopify, handle: on(shopifyListWebhooks) },
    { platform: 'shopify', method: 'POST', path: shopify, handle: on(shopifyCreateWebhook) },
    { platform: 'woocommerce', method: 'GET', path: woo, handle: on(wooListWebhooks) },
    { platform: 'woocommerce', method: 'POST', path: woo, handle: on(wooCreateWebhook) },
    { platform: 'woocommerce', method: 'PUT', path: `${woo}/{id}`, handle: on(wooUpdateWebhook) },
    { platform: 'stripe', method: 'GET', path: stripe, handle: on(stripeListEndpoints) },
    { platform: 'stripe', method: 'POST', path: stripe, handle: on(stripeCreateEndpoint) },
    { platform: 'stripe', method: 'POST', path: `${stripe}/{id}`, handle: on(stripeUpdateEndpoint) },
  ];
}

/** The platform whose prefix a path starts with, if any. */
export function shopPlatformOf(path: string): ShopFakePlatform | undefined {
  if (path.startsWith('/shopify/')) return 'shopify';
  if (path.startsWith('/woocommerce/')) return 'woocommerce';
  if (path.startsWith('/stripe/')) return 'stripe';
  return undefined;
}

// Hashing first gives equal lengths, so the compare takes the same time whatever the length.
function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/** Checks each platform's own auth, in constant time. */
export function shopAuthCheckers(
  credentials: ShopFakeCredentials,
): Record<ShopFakePlatform, (headers: IncomingHttpHeaders) => boolean> {
  const shopify = digest(credentials.shopify.accessToken);
  const woo = digest(`${credentials.woocommerce.consumerKey}:${credentials.woocommerce.consumerSecret}`);
  const stripe = digest(`Bearer ${credentials.stripe.secretKey}`);
  return {
    shopify: (headers) => safeEqual(digest(String(headers['x-shopify-access-token'] ?? '')), shopify),
    woocommerce: (headers) => {
      const match = /^Basic +([A-Za-z0-9+/=]+) *$/i.exec(headers.authorization ?? '');
      const decoded = match?.[1] === undefined ? '' : Buffer.from(match[1], 'base64').toString('utf8');
      return safeEqual(digest(decoded), woo);
    },
    stripe: (headers) => safeEqual(digest(headers.authorization ?? ''), stripe),
  };
}

/** Each platform's own 401 body. */
export function unauthorizedBody(platform: ShopFakePlatform): Json {
  switch (platform) {
    case 'shopify':
      return { errors: '[API] Invalid API key or access token (unrecognized login or wrong password)' };
    case 'woocommerce':
      return {
        code: 'woocommerce_rest_cannot_view',
        message: 'Sorry, you cannot list resources.',
        data: { status: 401 },
      };
    case 'stripe':
      return {
        error: {
          type: 'invalid_request_error',
          message: 'Invalid API Key provided. Send Authorization: Bearer <secret key>.',
        },
      };
  }
}

/** Each platform's own error body for a status and message. */
export function errorBody(platform: ShopFakePlatform, status: number, message: string, field?: string): Json {
  switch (platform) {
    case 'shopify':
      return { errors: field ? { [field]: [message] } : message };
    case 'woocommerce':
      return {
        code: status === 404 ? 'woocommerce_rest_invalid_id' : 'rest_invalid_param',
        message,
        data: { status },
      };
    case 'stripe':
      return { error: { type: 'invalid_request_error', message, ...(field ? { param: field } : {}) } };
  }
}

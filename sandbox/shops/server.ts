import type { IncomingMessage, ServerResponse } from 'node:http';
import * as z from 'zod/mini';
import { LOCAL_SHOP_API_CREDENTIALS } from '../../local/defaults.ts';
import { HttpError, parseJsonBody, parseOr400, parseQuery, readBody, sendJson } from '../http.ts';
import { matchRoute } from '../routes.ts';
import { errorBody, SHOP_ROUTES, shopAuthCheckers, shopPlatformOf, unauthorizedBody } from './routes.ts';
import { ShopFakeStore } from './store.ts';
import {
  SHOP_FAKE_PLATFORMS,
  type ShopFakeCredentials,
  type ShopFakePlatform,
  type ShopFakesControl,
} from './types.ts';

export type * from './types.ts';

/** The credentials the fakes accept unless told others (public: they open nothing real). */
export const DEFAULT_SHOP_FAKE_CREDENTIALS: ShopFakeCredentials = LOCAL_SHOP_API_CREDENTIALS;

export interface ShopFakes {
  readonly control: ShopFakesControl;
  /** Answers the request when it is for a fake (`/shopify/…`, `/woocommerce/…`, `/stripe/…`); false otherwise. */
  handleApi(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean>;
  /** Answers `/_sandbox/shops/…`; false for other control paths. */
  handleControl(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean>;
}

const Platform = z.enum(SHOP_FAKE_PLATFORMS as [ShopFakePlatform, ...ShopFakePlatform[]]);
const OrderBody = z.strictObject({
  clickId: z.optional(z.string().check(z.minLength(1))),
  clickIdAttribute: z.optional(z.string().check(z.minLength(1))),
  ip: z.optional(z.string().check(z.minLength(1))),
  financialStatus: z.optional(z.string().check(z.minLength(1))),
  at: z.optional(z.string()),
});
const RefundBody = z.strictObject({ at: z.optional(z.string()) });
const SeedBody = z.strictObject({
  address: z.url({ protocol: /^https?$/ }),
  topics: z.array(z.string().check(z.minLength(1))).check(z.minLength(1)),
  secret: z.optional(z.string().check(z.minLength(1))),
});
const BreakBody = z.strictObject({
  topic: z.string().check(z.minLength(1)),
  how: z.optional(z.enum(['fail', 'delete'])),
});
const BurstBody = z.strictObject({
  count: z.int().check(z.minimum(0)),
  retryAfterSeconds: z.optional(z.number().check(z.minimum(0))),
});

/**
 * The fakes of the shop APIs (routes.ts) and their control, mounted by the sandbox's server. State
 * is in memory; the clock is the sandbox's.
 */
export function createShopFakes(options: {
  readonly credentials: ShopFakeCredentials;
  readonly now: () => number;
}): ShopFakes {
  const store = new ShopFakeStore(options.now);
  const auth = shopAuthCheckers(options.credentials);
  const bursts: Record<ShopFakePlatform, { count: number; retryAfterSeconds: number }> = {
    shopify: { count: 0, retryAfterSeconds: 0 },
    woocommerce: { count: 0, retryAfterSeconds: 0 },
    stripe: { count: 0, retryAfterSeconds: 0 },
  };
  const counts: Record<ShopFakePlatform, number> = { shopify: 0, woocommerce: 0, stripe: 0 };

  const control: ShopFakesControl = {
    createOrder: (platform, order = {}) => store.createOrder(platform, order),
    createRefund: (platform, orderId, refund = {}) => store.createRefund(platform, orderId, refund),
    cancelOrder: (platform, orderId, cancel = {}) => store.cancelOrder(platform, orderId, cancel),
    burst429(platform, count, retryAfterSeconds = 1) {
      bursts[platform] = { count, retryAfterSeconds };
    },
    seedSubscriptions: (platform, seed) => store.subscriptions.seed(platform, seed),
    breakSubscription: (platform, topic, how) => store.subscriptions.break(platform, topic, how),
    subscriptions: (platform) => structuredClone(store.subscriptions[platform]),
    calls: () => ({ ...counts }),
    reset() {
      store.reset();
      for (const platform of SHOP_FAKE_PLATFORMS) {
        bursts[platform] = { count: 0, retryAfterSeconds: 0 };
        counts[platform] = 0;
      }
    },
  };

  async function handleApi(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> {
    const platform = shopPlatformOf(url.pathname);
    if (platform === undefined) return false;
    const body = await readBody(req);
    counts[platform] += 1;
    const match = matchRoute(SHOP_ROUTES, req.method ?? 'GET', url.pathname);
    if (match.kind !== 'found') {
      const status = match.kind === 'method' ? 405 : 404;
      sendJson(
        res,
        status,
        errorBody(platform, status, `no route ${req.method} ${url.pathname} in the ${platform} fake`),
      );
      return true;
    }
    if (!auth[platform](req.headers)) {
      sendJson(res, 401, unauthorizedBody(platform));
      return true;
    }
    const burst = bursts[platform];
    if (burst.count > 0) {
      burst.count -= 1;
      sendJson(res, 429, errorBody(platform, 429, 'Exceeded the API rate limit (sandbox forced burst)'), {
        'retry-after': String(burst.retryAfterSeconds),
      });
      return true;
    }
    try {
      const answer = match.route.handle({
        query: parseQuery(url.searchParams),
        params: match.params,
        origin: `http://${req.headers.host ?? 'localhost'}`,
        store,
        now: options.now(),
        body,
      });
      sendJson(res, answer.status ?? 200, answer.body, answer.headers);
    } catch (error) {
      if (!(error instanceof HttpError)) throw error;
      sendJson(res, error.status, errorBody(platform, error.status, error.message, error.field));
    }
    return true;
  }

  async function handleControl(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> {
    const parts = url.pathname.split('/').filter((p) => p !== '');
    if (parts[0] !== '_sandbox' || parts[1] !== 'shops') return false;
    try {
      const raw = await readBody(req);
      const method = req.method ?? 'GET';
      const [, , name, resource, id, sub] = parts;
      if (method === 'POST' && name === 'reset' && parts.length === 3) {
        control.reset();
        sendJson(res, 204, undefined);
        return true;
      }
      if (method !== 'POST' || name === undefined)
        throw new HttpError(404, `no control route ${method} ${url.pathname}`);
      const platform = parseOr400(Platform, name);
      const body = raw.trim() === '' ? {} : parseJsonBody(raw);
      if (resource === 'orders' && id === undefined) {
        sendJson(res, 201, control.createOrder(platform, parseOr400(OrderBody, body)));
      } else if (resource === 'orders' && id !== undefined && sub === 'refunds' && parts.length === 6) {
        sendJson(
          res,
          201,
          control.createRefund(platform, decodeURIComponent(id), parseOr400(RefundBody, body)),
        );
      } else if (resource === 'subscriptions' && id === undefined) {
        sendJson(res, 201, { ids: control.seedSubscriptions(platform, parseOr400(SeedBody, body)) });
      } else if (resource === 'subscriptions' && id === 'break' && parts.length === 5) {
        const { topic, how } = parseOr400(BreakBody, body);
        sendJson(res, 200, { broken: control.breakSubscription(platform, topic, how) });
      } else if (resource === 'orders' && id !== undefined && sub === 'cancel' && parts.length === 6) {
        control.cancelOrder(platform, decodeURIComponent(id), parseOr400(RefundBody, body));
        sendJson(res, 204, undefined);
      } else if (resource === 'burst' && parts.length === 4) {
        const { count, retryAfterSeconds } = parseOr400(BurstBody, body);
        control.burst429(platform, count, retryAfterSeconds);
        sendJson(res, 204, undefined);
      } else {
        throw new HttpError(404, `no control route ${method} ${url.pathname}`);
      }
    } catch (error) {
      if (!(error instanceof HttpError)) throw error;
      sendJson(res, error.status, error.body());
    }
    return true;
  }

  return { control, handleApi, handleControl };
}

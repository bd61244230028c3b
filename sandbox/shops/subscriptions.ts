import { randomBytes } from 'node:crypto';
import { HttpError, parseJsonBody } from '../http.ts';
import { cursor, limit, one, type Query, shopifyPageOf } from './query.ts';
import type { ShopFakePlatform, ShopSubscriptionSeed } from './types.ts';

/**
 * The webhook subscriptions of the fake shops and the routes that manage them, as each API
 * documents them: Shopify Admin REST `webhooks.json` (one topic per subscription, no status: Shopify
 * deletes a subscription whose deliveries keep failing), WooCommerce REST v3 `webhooks` (`status`
 * active, paused or disabled: WooCommerce disables one after repeated failures), Stripe
 * `webhook_endpoints` (many `enabled_events`, `status` enabled or disabled, the signing secret shown
 * once, at creation).
 */

type Json = Record<string, unknown>;

/** The Shopify topics the fake accepts (a real shop knows many more; these are the order ones). */
const SHOPIFY_TOPICS = new Set([
  'orders/create',
  'orders/paid',
  'orders/updated',
  'orders/cancelled',
  'orders/fulfilled',
  'orders/partially_fulfilled',
  'orders/edited',
  'orders/delete',
  'refunds/create',
  'app/uninstalled',
]);
const WOO_TOPIC =
  /^(?:(coupon|customer|order|product)\.(created|updated|deleted|restored)|action\.[a-z0-9_]+)$/;
const WOO_STATUSES = new Set(['active', 'paused', 'disabled']);
const STRIPE_EVENT = /^(?:\*|[a-z_]+(?:\.[a-z_]+)+)$/;

/** WooCommerce writes dates without a zone. */
function wooDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19);
}

function httpUrl(value: unknown): value is string {
  if (typeof value !== 'string') return false;
  try {
    return ['http:', 'https:'].includes(new URL(value).protocol);
  } catch {
    return false;
  }
}

export class ShopSubscriptionStore {
  readonly #now: () => number;
  shopify: Json[] = [];
  woocommerce: Json[] = [];
  stripe: Json[] = [];
  #next = 0;

  constructor(now: () => number) {
    this.#now = now;
  }

  reset(): void {
    this.shopify = [];
    this.woocommerce = [];
    this.stripe = [];
    this.#next = 0;
  }

  #seq(): number {
    this.#next += 1;
    return this.#next;
  }

  shopifyCreate(topic: string, address: string, format: string): Json {
    const at = new Date(this.#now()).toISOString();
    const webhook: Json = {
      id: 1_100_000_000 + this.#seq(),
      address,
      topic,
      created_at: at,
      updated_at: at,
      format,
      fields: [],
      metafield_namespaces: [],
      api_version: '2025-07',
      private_metafield_namespaces: [],
    };
    this.shopify.push(webhook);
    return webhook;
  }

  wooCreate(input: {
    topic: string;
    delivery_url: string;
    name?: string;
    status?: string;
    secret?: string;
  }): Json {
    const n = this.#seq();
    const at = wooDate(this.#now());
    const [resource, event] = input.topic.split('.');
    const webhook: Json = {
      id: 100 + n,
      name: input.name ?? `Webhook created on ${at}`,
      status: input.status ?? 'active',
      topic: input.topic,
      resource,
      event,
      hooks:
        resource === 'action'
          ? [event]
          : [
              `woocommerce_${event === 'created' ? 'new' : event === 'updated' ? 'update' : event}_${resource}`,
            ],
      delivery_url: input.delivery_url,
      // Write-only: never in an answer (WooCommerce shows it in the edit context only).
      secret: input.secret ?? randomBytes(16).toString('hex'),
      date_created: at,
      date_created_gmt: at,
      date_modified: at,
      date_modified_gmt: at,
    };
    this.woocommerce.push(webhook);
    return webhook;
  }

  stripeCreate(url: string, events: readonly string[], description: string | null): Json {
    const endpoint: Json = {
      id: `we_fake${String(this.#seq()).padStart(8, '0')}`,
      object: 'webhook_endpoint',
      api_version: null,
      application: null,
      created: Math.floor(this.#now() / 1000),
      description,
      enabled_events: [...events],
      livemode: false,
      metadata: {},
      status: 'enabled',
      url,
      secret: `whsec_${randomBytes(24).toString('hex')}`,
    };
    this.stripe.push(endpoint);
    return endpoint;
  }

  /** A WooCommerce webhook's modification time moves to now. */
  touch(webhook: Json): void {
    webhook['date_modified'] = webhook['date_modified_gmt'] = wooDate(this.#now());
  }

  /** Healthy subscriptions of every topic to `address` (Stripe: one endpoint with them all). */
  seed(platform: ShopFakePlatform, seed: ShopSubscriptionSeed): string[] {
    switch (platform) {
      case 'shopify':
        return seed.topics.map((topic) => String(this.shopifyCreate(topic, seed.address, 'json')['id']));
      case 'woocommerce':
        return seed.topics.map((topic) =>
          String(
            this.wooCreate({
              topic,
              delivery_url: seed.address,
              ...(seed.secret === undefined ? {} : { secret: seed.secret }),
            })['id'],
          ),
        );
      case 'stripe':
        return [String(this.stripeCreate(seed.address, seed.topics, null)['id'])];
    }
  }

  /**
   * What a shop does to a subscription whose deliveries fail: Shopify deletes it, WooCommerce
   * disables it, and (for the tests) a Stripe endpoint loses the event. `delete` removes every
   * subscription of the topic instead (`*`: every one of the platform).
   */
  break(platform: ShopFakePlatform, topic: string, how: 'fail' | 'delete' = 'fail'): number {
    const matches = (s: Json) =>
      topic === '*' ||
      s['topic'] === topic ||
      (Array.isArray(s['enabled_events']) && s['enabled_events'].includes(topic));
    const list = this[platform];
    const hit = list.filter(matches);
    if (how === 'delete' || platform === 'shopify') {
      this[platform] = list.filter((s) => !matches(s));
    } else if (platform === 'woocommerce') {
      for (const s of hit) s['status'] = 'disabled';
    } else {
      for (const s of hit) s['enabled_events'] = (s['enabled_events'] as string[]).filter((e) => e !== topic);
    }
    return hit.length;
  }
}

export interface SubscriptionRequest {
  readonly query: Query;
  readonly params: Record<string, string>;
  readonly origin: string;
  readonly body: string;
  readonly subscriptions: ShopSubscriptionStore;
}

export interface SubscriptionAnswer {
  readonly status?: number;
  readonly body: unknown;
  readonly headers?: Record<string, string>;
}

/** Shopify answers a refused create with 422 and `{ errors: { field: [message] } }`. */
function shopify422(field: string, message: string): HttpError {
  return new HttpError(422, message, field);
}

export function shopifyListWebhooks({
  query,
  subscriptions,
  origin,
}: SubscriptionRequest): SubscriptionAnswer {
  const { size, offset, filters } = shopifyPageOf(query);
  const address = one(filters, 'address');
  const topic = one(filters, 'topic');
  const matching = subscriptions.shopify.filter(
    (w) =>
      (address === undefined || w['address'] === address) && (topic === undefined || w['topic'] === topic),
  );
  const headers: Record<string, string> = {};
  if (offset + size < matching.length) {
    const next = cursor({ offset: offset + size, query: filters });
    headers['link'] =
      `<${origin}/shopify/admin/api/2025-07/webhooks.json?limit=${size}&page_info=${next}>; rel="next"`;
  }
  return { body: { webhooks: matching.slice(offset, offset + size) }, headers };
}

export function shopifyCreateWebhook({ body, subscriptions }: SubscriptionRequest): SubscriptionAnswer {
  const webhook = parseJsonBody(body)['webhook'];
  if (typeof webhook !== 'object' || webhook === null)
    throw shopify422('webhook', 'Required parameter missing or invalid');
  const { topic, address, format = 'json' } = webhook as Json;
  if (typeof topic !== 'string' || !SHOPIFY_TOPICS.has(topic)) {
    throw shopify422('topic', `Invalid topic specified: ${String(topic)}`);
  }
  if (!httpUrl(address)) throw shopify422('address', 'is invalid');
  if (format !== 'json' && format !== 'xml') throw shopify422('format', 'is not included in the list');
  if (subscriptions.shopify.some((w) => w['topic'] === topic && w['address'] === address)) {
    throw shopify422('address', 'for this topic has already been taken');
  }
  return { status: 201, body: { webhook: subscriptions.shopifyCreate(topic, address, format) } };
}

/** A WooCommerce webhook as its API shows it: everything but the secret. */
function wooView(webhook: Json): Json {
  const { secret: _secret, ...view } = webhook;
  return { ...view, _links: { self: [{ href: `/wp-json/wc/v3/webhooks/${String(webhook['id'])}` }] } };
}

export function wooListWebhooks({ query, subscriptions }: SubscriptionRequest): SubscriptionAnswer {
  const perPage = limit(query, 'per_page', 10, 100);
  const page = limit(query, 'page', 1, Number.MAX_SAFE_INTEGER);
  const status = one(query, 'status') ?? 'all';
  if (status !== 'all' && !WOO_STATUSES.has(status)) {
    throw new HttpError(400, 'Invalid parameter(s): status', 'status');
  }
  const matching = subscriptions.woocommerce.filter((w) => status === 'all' || w['status'] === status);
  return {
    body: matching.slice((page - 1) * perPage, page * perPage).map(wooView),
    headers: {
      'x-wp-total': String(matching.length),
      'x-wp-totalpages': String(Math.max(1, Math.ceil(matching.length / perPage))),
    },
  };
}

function wooFields(input: Json): {
  name?: string;
  status?: string;
  topic?: string;
  delivery_url?: string;
  secret?: string;
} {
  const out: { name?: string; status?: string; topic?: string; delivery_url?: string; secret?: string } = {};
  for (const key of ['name', 'status', 'topic', 'delivery_url', 'secret'] as const) {
    const value = input[key];
    if (value === undefined) continue;
    if (typeof value !== 'string') throw new HttpError(400, `Invalid parameter(s): ${key}`, key);
    out[key] = value;
  }
  if (out.status !== undefined && !WOO_STATUSES.has(out.status)) {
    throw new HttpError(400, 'Invalid parameter(s): status', 'status');
  }
  if (out.topic !== undefined && !WOO_TOPIC.test(out.topic)) {
    throw new HttpError(400, 'Invalid parameter(s): topic', 'topic');
  }
  if (out.delivery_url !== undefined && !httpUrl(out.delivery_url)) {
    throw new HttpError(400, 'Invalid parameter(s): delivery_url', 'delivery_url');
  }
  return out;
}

export function wooCreateWebhook({ body, subscriptions }: SubscriptionRequest): SubscriptionAnswer {
  const fields = wooFields(parseJsonBody(body));
  const missing = (['topic', 'delivery_url'] as const).filter((k) => fields[k] === undefined);
  if (missing.length > 0) throw new HttpError(400, `Missing parameter(s): ${missing.join(', ')}`, missing[0]);
  const webhook = subscriptions.wooCreate({
    ...fields,
    topic: fields.topic as string,
    delivery_url: fields.delivery_url as string,
  });
  return { status: 201, body: wooView(webhook) };
}

export function wooUpdateWebhook({ body, params, subscriptions }: SubscriptionRequest): SubscriptionAnswer {
  const webhook = subscriptions.woocommerce.find((w) => String(w['id']) === params['id']);
  if (!webhook) throw new HttpError(404, 'Invalid ID.');
  const fields = wooFields(parseJsonBody(body));
  Object.assign(webhook, fields);
  if (fields.topic !== undefined) [webhook['resource'], webhook['event']] = fields.topic.split('.');
  subscriptions.touch(webhook);
  return { body: wooView(webhook) };
}

/** A Stripe endpoint as listed and updated: the secret only ever comes with the create. */
function stripeView(endpoint: Json): Json {
  const { secret: _secret, ...view } = endpoint;
  return view;
}

/** `enabled_events[]=a&enabled_events[]=b` or `enabled_events[0]=a&enabled_events[1]=b`. */
function stripeEvents(form: URLSearchParams): string[] | undefined {
  const events = [...form].filter(([k]) => k === 'enabled_events[]' || /^enabled_events\[\d+\]$/.test(k));
  if (events.length === 0) return undefined;
  events.forEach(([, event], i) => {
    if (!STRIPE_EVENT.test(event)) {
      throw new HttpError(
        400,
        `Invalid enabled_events[${i}]: ${event} is not an event type`,
        'enabled_events',
      );
    }
  });
  return events.map(([, event]) => event);
}

export function stripeListEndpoints({ query, subscriptions }: SubscriptionRequest): SubscriptionAnswer {
  const size = limit(query, 'limit', 10, 100);
  // Newest first, as Stripe lists.
  let matching = [...subscriptions.stripe].reverse();
  const after = one(query, 'starting_after');
  if (after !== undefined) {
    const at = matching.findIndex((e) => e['id'] === after);
    if (at < 0) throw new HttpError(400, `No such webhook endpoint: '${after}'`, 'starting_after');
    matching = matching.slice(at + 1);
  }
  return {
    body: {
      object: 'list',
      url: '/v1/webhook_endpoints',
      has_more: matching.length > size,
      data: matching.slice(0, size).map(stripeView),
    },
  };
}

export function stripeCreateEndpoint({ body, subscriptions }: SubscriptionRequest): SubscriptionAnswer {
  const form = new URLSearchParams(body);
  const url = form.get('url');
  if (url === null) throw new HttpError(400, 'Missing required param: url.', 'url');
  if (!httpUrl(url)) throw new HttpError(400, 'Invalid URL: url must be an http(s) URL', 'url');
  const events = stripeEvents(form);
  if (events === undefined)
    throw new HttpError(400, 'Missing required param: enabled_events.', 'enabled_events');
  return { body: subscriptions.stripeCreate(url, events, form.get('description')) };
}

export function stripeUpdateEndpoint({
  body,
  params,
  subscriptions,
}: SubscriptionRequest): SubscriptionAnswer {
  const endpoint = subscriptions.stripe.find((e) => e['id'] === params['id']);
  if (!endpoint) throw new HttpError(404, `No such webhook endpoint: '${params['id'] ?? ''}'`, 'id');
  const form = new URLSearchParams(body);
  const events = stripeEvents(form);
  const disabled = form.get('disabled');
  if (disabled !== null && disabled !== 'true' && disabled !== 'false') {
    throw new HttpError(400, 'Invalid boolean: disabled', 'disabled');
  }
  const url = form.get('url');
  if (url !== null && !httpUrl(url))
    throw new HttpError(400, 'Invalid URL: url must be an http(s) URL', 'url');
  if (events !== undefined) endpoint['enabled_events'] = events;
  if (disabled !== null) endpoint['status'] = disabled === 'true' ? 'disabled' : 'enabled';
  if (url !== null) endpoint['url'] = url;
  const description = form.get('description');
  if (description !== null) endpoint['description'] = description;
  return { body: stripeView(endpoint) };
}

import type { SourceConfig } from '../config/sources.ts';
import type { HttpRequest } from '../http/types.ts';
import { STRIPE_EVENT_TYPES } from '../platforms/topics.ts';
import type { ShopCredentials } from '../shops/credentials.ts';
import { SHOP_MAX_ANSWER_BYTES, type ShopHttpOptions } from '../shops/http.ts';
import { ShopifyClient } from '../shops/shopify.ts';
import { StripeClient } from '../shops/stripe.ts';
import { WooCommerceClient } from '../shops/woocommerce.ts';

/**
 * What the backfill reads from a shop's API, turned into what the shop's webhook would have carried
 * (topic header and body), so the platform adapter maps it exactly as it maps a webhook: same event
 * ids where the body decides them (WooCommerce, Stripe, Generic), same order ids and refund ids, so
 * the same ledger rules apply.
 */

export interface Period {
  readonly from: Date;
  readonly to: Date;
}

/**
 * One change found in the shop: an order placed, refunded or cancelled, as its webhook would have
 * carried it, or what no webhook would have delivered, with the reason (`skipped`).
 */
export type Delivery =
  | {
      /** `order 1001`, `refund 5 of order 1001`, `event evt_1 (charge.refunded)`: for the summary. */
      readonly label: string;
      readonly request: HttpRequest;
    }
  | { readonly label: string; readonly skipped: string };

export interface ShopRead {
  /** Things the operator must know about the period (Stripe's 30-day window). */
  readonly notices: readonly string[];
  readonly deliveries: AsyncIterable<Delivery>;
}

type Json = Record<string, unknown>;

/** Stripe keeps events for 30 days; the Events API lists nothing older. */
export const STRIPE_EVENTS_WINDOW_MS = 30 * 24 * 3600 * 1000;

/**
 * Stripe lists events newest first, and a backfill queues them oldest first, so what is read is held
 * and sorted before it is queued. The window is read in this many slices, oldest first, each held on
 * its own: a busy shop's two days in the catch-up function hold a quarter of a day at a time, not
 * the whole (half-open slices: an event on an edge is read once).
 */
const STRIPE_SLICES = 8;

/** WooCommerce's dates are whole seconds; its period bounds are widened by one (see `woocommerce`). */
const WOOCOMMERCE_EDGE_MS = 1000;

/** Shopify's financial statuses of an order that has been paid (for `orderTopic: orders/paid`). */
const SHOPIFY_PAID = new Set(['paid', 'partially_refunded', 'refunded']);

function delivery(label: string, headers: Record<string, string>, body: unknown): Delivery {
  return {
    label,
    request: {
      headers: { 'content-type': 'application/json', ...headers },
      rawBody: Buffer.from(JSON.stringify(body)),
    },
  };
}

/** Reads the period from the source's shop API. */
export function readShop(
  source: SourceConfig,
  credentials: ShopCredentials,
  period: Period,
  options: ShopHttpOptions & { readonly now: Date },
): ShopRead {
  switch (credentials.platform) {
    case 'shopify': {
      const client = new ShopifyClient(credentials, options);
      return {
        notices: [],
        deliveries: shopify(source, client, period, shopifyPageSize(options.maxAnswerBytes)),
      };
    }
    case 'woocommerce':
      return { notices: [], deliveries: woocommerce(new WooCommerceClient(credentials, options), period) };
    case 'stripe': {
      const oldest = new Date(options.now.getTime() - STRIPE_EVENTS_WINDOW_MS);
      const notices =
        period.from < oldest
          ? [
              `Stripe keeps events 30 days: ${period.from.toISOString()} to ${oldest.toISOString()} cannot be read from the Events API (look those orders up in the Stripe dashboard)`,
            ]
          : [];
      const from = period.from < oldest ? oldest : period.from;
      return { notices, deliveries: stripe(new StripeClient(credentials, options), { from, to: period.to }) };
    }
  }
}

/** An order as large as a page is sized for: a big one (many lines, each with its tax and discounts). */
const SHOPIFY_ORDER_BYTES = 64 * 1024;

/**
 * Orders asked for per Shopify page: as many as fit the client's answer cap at 64 KB an order, from
 * 50 to Shopify's 250. A smaller cap (the catch-up function's, sized to its memory) asks for smaller
 * pages instead of failing on a page of large orders; the default cap asks for 250.
 */
export function shopifyPageSize(maxAnswerBytes: number = SHOP_MAX_ANSWER_BYTES): number {
  return Math.max(50, Math.min(250, Math.floor(maxAnswerBytes / SHOPIFY_ORDER_BYTES)));
}

/**
 * Shopify Admin orders updated in the period (any status), each rebuilt as the webhooks it caused:
 * the order topic with the order as it was placed (no cancellation, no refunds yet), then
 * `orders/cancelled` when cancelled, then `refunds/create` per refund (the REST refund is the
 * webhook's body).
 */
async function* shopify(
  source: SourceConfig,
  client: ShopifyClient,
  period: Period,
  pageSize: number,
): AsyncGenerator<Delivery> {
  const query = {
    status: 'any',
    updated_at_min: period.from.toISOString(),
    updated_at_max: period.to.toISOString(),
    limit: String(pageSize),
  };
  for await (const page of client.list('orders.json', 'orders', query)) {
    for (const item of page) {
      const order = item as Json;
      const id = String(order['id']);
      const topic = source.orderTopic;
      const paid =
        typeof order['financial_status'] === 'string' && SHOPIFY_PAID.has(order['financial_status']);
      const placed = delivery(`order ${id}`, shopifyHeaders(topic, id), {
        ...order,
        cancelled_at: null,
        cancel_reason: null,
        refunds: [],
      });
      const cancellation = order['cancelled_at']
        ? delivery(`cancellation of order ${id}`, shopifyHeaders('orders/cancelled', id), order)
        : undefined;
      if (topic === 'orders/create' || paid) {
        yield placed;
        if (cancellation) yield cancellation;
      } else if (cancellation) {
        // Not paid, so no orders/paid webhook; cancelled since. Its cancellation alone would be held
        // for an order that never comes (see `settledCancellation`).
        yield* settledCancellation(cancellation, placed);
      } else {
        const status = String(order['financial_status']);
        yield {
          label: `order ${id}`,
          skipped: `not paid (${status}), and the source's order topic is orders/paid`,
        };
      }
      const refunds = Array.isArray(order['refunds']) ? (order['refunds'] as Json[]) : [];
      for (const refund of refunds) {
        const refundId = String(refund['id']);
        yield delivery(
          `refund ${refundId} of order ${id}`,
          shopifyHeaders('refunds/create', refundId),
          refund,
        );
      }
    }
  }
}

function shopifyHeaders(topic: string, id: string): Record<string, string> {
  // The webhook's event id is not in the REST resource; this one is stable across backfills.
  return { 'x-shopify-topic': topic, 'x-shopify-event-id': `backfill:${topic}:${id}` };
}

/**
 * WooCommerce orders modified in the period: `order.created` with the order (its placement; for an
 * order refunded in full since, as it was sold), then `order.updated` with the order as it is now
 * when it was cancelled or refunded (its `refunds` list carries each refund, as the webhook does).
 */
async function* woocommerce(client: WooCommerceClient, period: Period): AsyncGenerator<Delivery> {
  // WooCommerce compares both bounds exclusively, on whole seconds: widened by a second, an order
  // modified on the very second a period ends or starts is read (by both periods, a no-op the second time).
  const query = {
    modified_after: new Date(period.from.getTime() - WOOCOMMERCE_EDGE_MS).toISOString(),
    modified_before: new Date(period.to.getTime() + WOOCOMMERCE_EDGE_MS).toISOString(),
    dates_are_gmt: 'true',
    per_page: '100',
    orderby: 'id',
    order: 'asc',
  };
  for await (const page of client.list('orders', query)) {
    for (const item of page) {
      const order = item as Json;
      const id = String(order['id']);
      const status = String(order['status']);
      if (status === 'cancelled') {
        // Its order.created, if it was ever sent, carried another status: the body says no more.
        yield* settledCancellation(
          delivery(`cancellation of order ${id}`, { 'x-wc-webhook-topic': 'order.updated' }, order),
          delivery(
            `order ${id}`,
            { 'x-wc-webhook-topic': 'order.created' },
            { ...order, status: 'processing', refunds: [] },
          ),
        );
        continue;
      }
      // A failed order is left to the adapter, which says why it is no sale.
      const placed =
        status === 'refunded' ? { ...order, status: 'processing', refunds: [] } : { ...order, refunds: [] };
      yield delivery(`order ${id}`, { 'x-wc-webhook-topic': 'order.created' }, placed);
      const refunds = Array.isArray(order['refunds']) ? order['refunds'] : [];
      if (status === 'cancelled' || status === 'refunded' || refunds.length > 0) {
        const what = status === 'cancelled' ? 'cancellation' : 'refunds';
        yield delivery(`${what} of order ${id}`, { 'x-wc-webhook-topic': 'order.updated' }, order);
      }
    }
  }
}

/**
 * An order cancelled whose placement no webhook would deliver as it stands now (WooCommerce shows only
 * `cancelled`; Shopify an unpaid order to an `orders/paid` source): the cancellation, then the order.
 * The connector may have added the order before (its cancellation refuses it; the order is then a
 * no-op) or never heard of it: the cancellation alone would be held in the ledger for an order that
 * never comes, waiting for good (status, reconcile, the RefundWaitingForOrder alarm). Coming after
 * it, in the same message group, the order finds it held and is recorded never added: nothing sent.
 */
function* settledCancellation(cancellation: Delivery, placed: Delivery): Generator<Delivery> {
  yield cancellation;
  yield placed;
}

/** Stripe events of the mapped types in the period, oldest first (the API lists newest first). */
async function* stripe(client: StripeClient, period: Period): AsyncGenerator<Delivery> {
  const from = Math.floor(period.from.getTime() / 1000);
  const end = Math.floor(period.to.getTime() / 1000) + 1;
  const step = Math.max(1, Math.ceil((end - from) / STRIPE_SLICES));
  for (let start = from; start < end; start += step) {
    const query: Record<string, string> = {
      'created[gte]': String(start),
      'created[lt]': String(Math.min(start + step, end)),
      limit: '100',
    };
    const events: Json[] = [];
    for (const type of STRIPE_EVENT_TYPES) {
      for await (const page of client.list('events', { ...query, type })) events.push(...(page as Json[]));
    }
    events.sort((a, b) => Number(a['created']) - Number(b['created']));
    for (const event of events)
      yield delivery(`event ${String(event['id'])} (${String(event['type'])})`, {}, event);
  }
}

/** Generic webhook bodies, one JSON object per line (`--file orders.jsonl`); blank lines skipped. */
export function* genericDeliveries(lines: Iterable<string>): Generator<Delivery> {
  let n = 0;
  for (const line of lines) {
    n += 1;
    if (line.trim() === '') continue;
    yield {
      label: `line ${n}`,
      request: { headers: { 'content-type': 'application/json' }, rawBody: Buffer.from(line) },
    };
  }
}

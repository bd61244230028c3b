import { readFileSync } from 'node:fs';
import { HttpError } from '../http.ts';
import { ShopSubscriptionStore } from './subscriptions.ts';
import type {
  CreatedShopOrder,
  CreatedShopRefund,
  NewShopOrder,
  NewShopRefund,
  ShopFakePlatform,
} from './types.ts';

/**
 * The shop fakes' state: orders, refunds and events of one Shopify shop, one WooCommerce site and
 * one Stripe account, in memory, each built from a seed body (seed/, the repository's samples) with
 * fresh ids and times. Ids count up from fixed starts so runs repeat.
 */

type Json = Record<string, unknown>;

/** A documentation address (RFC 5737), as the buyer's. */
const DEFAULT_BUYER_IP = '203.0.113.7';

function seed(name: string): Json {
  return JSON.parse(readFileSync(new URL(`./seed/${name}`, import.meta.url), 'utf8')) as Json;
}

/** Read once: every order is a structured clone of these. */
const SEEDS = {
  shopifyOrder: seed('shopify-order.json'),
  shopifyRefund: seed('shopify-refund.json'),
  wooOrder: seed('woocommerce-order.json'),
  wooRefund: seed('woocommerce-refund.json'),
  stripeSession: seed('stripe-checkout-session-completed.json'),
  stripeChargeRefunded: seed('stripe-charge-refunded.json'),
};

/** WooCommerce writes its dates without a zone: `2017-03-22T19:28:08`. */
function wooDate(iso: string): string {
  return new Date(iso).toISOString().slice(0, 19);
}

function setPair(list: unknown, nameKey: 'name' | 'key', name: string, value: string): unknown[] {
  const entries = Array.isArray(list) ? list.filter((e) => (e as Json)[nameKey] !== name) : [];
  return [...entries, { [nameKey]: name, value }];
}

export class ShopFakeStore {
  readonly #now: () => number;
  shopifyOrders: Json[] = [];
  wooOrders: Json[] = [];
  wooRefunds = new Map<string, Json[]>();
  stripeEvents: Json[] = [];
  #next = 0;
  /** The webhook subscriptions (subscriptions.ts). */
  readonly subscriptions: ShopSubscriptionStore;

  constructor(now: () => number) {
    this.#now = now;
    this.subscriptions = new ShopSubscriptionStore(now);
  }

  reset(): void {
    this.subscriptions.reset();
    this.shopifyOrders = [];
    this.wooOrders = [];
    this.wooRefunds = new Map();
    this.stripeEvents = [];
    // Ids go on counting: a shop never gives an id twice, and the ledger remembers the old ones.
  }

  #seq(): number {
    this.#next += 1;
    return this.#next;
  }

  #at(at: string | undefined, field: string): Date {
    const date = new Date(at ?? this.#now());
    if (Number.isNaN(date.getTime())) throw new HttpError(400, `${field}: not an ISO 8601 time`, field);
    return date;
  }

  createOrder(platform: ShopFakePlatform, input: NewShopOrder): CreatedShopOrder {
    const at = this.#at(input.at, 'at');
    const attribute = input.clickIdAttribute ?? 'aecid';
    const ip = input.ip ?? DEFAULT_BUYER_IP;
    const n = this.#seq();
    switch (platform) {
      case 'shopify': {
        const order = structuredClone(SEEDS.shopifyOrder);
        const id = 7_000_000_000 + n;
        Object.assign(order, {
          id,
          admin_graphql_api_id: `gid://shopify/Order/${id}`,
          name: `#${2000 + n}`,
          order_number: 2000 + n,
          number: 1000 + n,
          created_at: at.toISOString(),
          processed_at: at.toISOString(),
          updated_at: at.toISOString(),
          browser_ip: ip,
          ...(input.financialStatus === undefined ? {} : { financial_status: input.financialStatus }),
          client_details: { ...(order['client_details'] as Json | null), browser_ip: ip },
          refunds: [],
        });
        if (input.clickId !== undefined) {
          order['note_attributes'] = setPair(order['note_attributes'], 'name', attribute, input.clickId);
        }
        this.shopifyOrders.push(order);
        return { platform, orderId: String(id) };
      }
      case 'woocommerce': {
        const order = structuredClone(SEEDS.wooOrder);
        const id = 5000 + n;
        Object.assign(order, {
          id,
          number: String(id),
          date_created: wooDate(at.toISOString()),
          date_created_gmt: wooDate(at.toISOString()),
          date_modified: wooDate(at.toISOString()),
          date_modified_gmt: wooDate(at.toISOString()),
          customer_ip_address: ip,
          refunds: [],
        });
        if (input.clickId !== undefined) {
          order['meta_data'] = setPair(order['meta_data'], 'key', attribute, input.clickId);
        }
        this.wooOrders.push(order);
        this.wooRefunds.set(String(id), []);
        return { platform, orderId: String(id) };
      }
      case 'stripe': {
        const event = structuredClone(SEEDS.stripeSession);
        const session = (event['data'] as Json)['object'] as Json;
        const paymentIntent = `pi_fake${String(n).padStart(8, '0')}`;
        const created = Math.floor(at.getTime() / 1000);
        const metadata: Json = { ...(session['metadata'] as Json | null), buyer_ip: ip };
        if (input.clickId !== undefined) metadata[attribute] = input.clickId;
        Object.assign(session, {
          id: `cs_fake${String(n).padStart(8, '0')}`,
          payment_intent: paymentIntent,
          created,
          metadata,
        });
        Object.assign(event, { id: `evt_fake${String(n).padStart(8, '0')}`, created });
        this.stripeEvents.push(event);
        return { platform, orderId: paymentIntent, eventId: event['id'] as string };
      }
    }
  }

  /** Cancels an order: Shopify `cancelled_at`, WooCommerce status `cancelled`; Stripe has no such thing. */
  cancelOrder(platform: ShopFakePlatform, orderId: string, input: NewShopRefund): void {
    const at = this.#at(input.at, 'at');
    if (platform === 'shopify') {
      const order = this.shopifyOrders.find((o) => String(o['id']) === orderId);
      if (!order) throw new HttpError(404, `no Shopify order ${orderId}`);
      Object.assign(order, {
        cancelled_at: at.toISOString(),
        cancel_reason: 'customer',
        updated_at: at.toISOString(),
      });
      return;
    }
    if (platform === 'woocommerce') {
      const order = this.wooOrders.find((o) => String(o['id']) === orderId);
      if (!order) throw new HttpError(404, `no WooCommerce order ${orderId}`);
      Object.assign(order, {
        status: 'cancelled',
        date_modified: wooDate(at.toISOString()),
        date_modified_gmt: wooDate(at.toISOString()),
      });
      return;
    }
    throw new HttpError(400, 'a Stripe Checkout order is refunded, not cancelled');
  }

  createRefund(platform: ShopFakePlatform, orderId: string, input: NewShopRefund): CreatedShopRefund {
    const at = this.#at(input.at, 'at');
    const n = this.#seq();
    switch (platform) {
      case 'shopify': {
        const order = this.shopifyOrders.find((o) => String(o['id']) === orderId);
        if (!order) throw new HttpError(404, `no Shopify order ${orderId}`);
        const refund = structuredClone(SEEDS.shopifyRefund);
        const id = 8_000_000_000 + n;
        Object.assign(refund, {
          id,
          admin_graphql_api_id: `gid://shopify/Refund/${id}`,
          order_id: order['id'],
          created_at: at.toISOString(),
          processed_at: at.toISOString(),
        });
        for (const t of (refund['transactions'] as Json[] | undefined) ?? []) t['order_id'] = order['id'];
        (order['refunds'] as Json[]).push(refund);
        order['updated_at'] = at.toISOString();
        return { platform, orderId, refundId: String(id) };
      }
      case 'woocommerce': {
        const order = this.wooOrders.find((o) => String(o['id']) === orderId);
        if (!order) throw new HttpError(404, `no WooCommerce order ${orderId}`);
        const refund = structuredClone(SEEDS.wooRefund);
        const id = 9000 + n;
        Object.assign(refund, {
          id,
          date_created: wooDate(at.toISOString()),
          date_created_gmt: wooDate(at.toISOString()),
          _links: {},
        });
        this.wooRefunds.get(orderId)?.push(refund);
        // The order lists its refunds as negative totals, and its modification time moves.
        (order['refunds'] as Json[]).push({
          id,
          reason: refund['reason'],
          total: `-${refund['amount'] as string}`,
        });
        order['date_modified'] = wooDate(at.toISOString());
        order['date_modified_gmt'] = wooDate(at.toISOString());
        return { platform, orderId, refundId: String(id) };
      }
      case 'stripe': {
        const placed = this.stripeEvents.find(
          (e) => e['type'] === 'checkout.session.completed' && sessionOf(e)['payment_intent'] === orderId,
        );
        if (!placed) throw new HttpError(404, `no Stripe checkout with PaymentIntent ${orderId}`);
        const session = sessionOf(placed);
        const event = structuredClone(SEEDS.stripeChargeRefunded);
        const charge = (event['data'] as Json)['object'] as Json;
        const created = Math.floor(at.getTime() / 1000);
        const refundId = `re_fake${String(n).padStart(8, '0')}`;
        Object.assign(charge, {
          id: `ch_fake${String(n).padStart(8, '0')}`,
          payment_intent: orderId,
          amount: session['amount_total'],
          amount_captured: session['amount_total'],
          amount_refunded: session['amount_total'],
          currency: session['currency'],
          refunded: true,
          refunds: {
            object: 'list',
            data: [
              {
                id: refundId,
                object: 'refund',
                amount: session['amount_total'],
                charge: `ch_fake${String(n).padStart(8, '0')}`,
                created,
                currency: session['currency'],
                payment_intent: orderId,
                status: 'succeeded',
                metadata: {},
              },
            ],
            has_more: false,
            total_count: 1,
            url: `/v1/charges/ch_fake${String(n).padStart(8, '0')}/refunds`,
          },
        });
        Object.assign(event, { id: `evt_fake${String(n).padStart(8, '0')}`, created });
        this.stripeEvents.push(event);
        return { platform, orderId, refundId, eventId: event['id'] as string };
      }
    }
  }
}

function sessionOf(event: Json): Json {
  return ((event['data'] as Json | undefined)?.['object'] as Json | undefined) ?? {};
}

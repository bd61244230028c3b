/** The public types of the shop API fakes (a leaf but for the platform list: sandbox/types.ts imports it). */

import { SHOP_API_PLATFORMS, type ShopApiPlatform } from '../../shared/domain/platforms.ts';

/** A fake per platform whose shop API the connector reads. */
export type ShopFakePlatform = ShopApiPlatform;
export const SHOP_FAKE_PLATFORMS: readonly ShopFakePlatform[] = SHOP_API_PLATFORMS;

/** What a control call may set on a new order; everything else comes from the seed. */
export interface NewShopOrder {
  /** Written where the source reads its click id (`aecid` by default). */
  readonly clickId?: string;
  /** @default 'aecid' */
  readonly clickIdAttribute?: string;
  /** Shopify: the order's `financial_status`. @default the seed's (`partially_refunded`) */
  readonly financialStatus?: string;
  /** The buyer's IP, where the platform carries it (tracking mode needs one). @default '203.0.113.7' */
  readonly ip?: string;
  /** ISO time of creation (and last change). @default the sandbox's clock */
  readonly at?: string;
}

export interface NewShopRefund {
  /** ISO time of the refund (the order's last change too). @default the sandbox's clock */
  readonly at?: string;
}

/** What a control call answers: the ids the connector will see. */
export interface CreatedShopOrder {
  readonly platform: ShopFakePlatform;
  /** The shop's order id (Shopify, WooCommerce) or the PaymentIntent (Stripe): the externalId. */
  readonly orderId: string;
  /** Stripe: the event id. */
  readonly eventId?: string;
}

export interface CreatedShopRefund {
  readonly platform: ShopFakePlatform;
  readonly orderId: string;
  readonly refundId: string;
  readonly eventId?: string;
}

/** The credentials each fake accepts. */
export interface ShopFakeCredentials {
  readonly shopify: { readonly accessToken: string };
  readonly woocommerce: { readonly consumerKey: string; readonly consumerSecret: string };
  readonly stripe: { readonly secretKey: string };
}

/** Subscriptions placed by the control (the local stack's healthy start, tests). */
export interface ShopSubscriptionSeed {
  /** The delivery URL: `<connector>/webhooks/<source id>`. */
  readonly address: string;
  /** Shopify and WooCommerce: one subscription each; Stripe: one endpoint with them all. */
  readonly topics: readonly string[];
  /** WooCommerce: what the webhooks sign with. @default a random one */
  readonly secret?: string;
}

/** In-process mirror of the `/_sandbox/shops/` control routes. */
export interface ShopFakesControl {
  /** An order placed in the fake shop (Stripe: a `checkout.session.completed` event). */
  createOrder(platform: ShopFakePlatform, order?: NewShopOrder): CreatedShopOrder;
  /** A refund of an order (Stripe: a full refund, a `charge.refunded` event); throws when unknown. */
  createRefund(platform: ShopFakePlatform, orderId: string, refund?: NewShopRefund): CreatedShopRefund;
  /** Cancels an order (Shopify `cancelled_at`, WooCommerce status `cancelled`); Stripe: throws. */
  cancelOrder(platform: ShopFakePlatform, orderId: string, cancel?: NewShopRefund): void;
  /** The next `count` API requests to the platform's fake are answered 429 with `Retry-After`. */
  burst429(platform: ShopFakePlatform, count: number, retryAfterSeconds?: number): void;
  /** API requests served, per platform (429s and 401s included). */
  calls(): Record<ShopFakePlatform, number>;
  /** Healthy webhook subscriptions of these topics to `address`; answers their ids. */
  seedSubscriptions(platform: ShopFakePlatform, seed: ShopSubscriptionSeed): string[];
  /**
   * Breaks the subscriptions of a topic as the shop does after failed deliveries: Shopify deletes
   * them, WooCommerce disables them, a Stripe endpoint loses the event. `delete` removes them on
   * every platform (topic `*`: all of the platform's). Answers how many were hit.
   */
  breakSubscription(platform: ShopFakePlatform, topic: string, how?: 'fail' | 'delete'): number;
  /** The stored subscriptions, as the shop holds them (WooCommerce and Stripe secrets included). */
  subscriptions(platform: ShopFakePlatform): Record<string, unknown>[];
  /** Forgets every order, refund, event and subscription, the bursts and the counts. */
  reset(): void;
}

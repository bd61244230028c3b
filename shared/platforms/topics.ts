import type { SourceConfig } from '../config/sources.ts';

/**
 * The webhook topics (Stripe: event types) each platform's adapter acts on, apart from the adapters:
 * `connector doctor`, `connector subscribe` and the local stack read them without loading an
 * adapter's schemas, and the adapters read them from here, so the two cannot drift.
 */

/** The Shopify topics besides the source's order topic that the adapter acts on. */
export const SHOPIFY_OTHER_TOPICS = ['refunds/create', 'orders/cancelled'] as const;

/** The topics a Shopify source must be subscribed to: its order topic, refunds and cancellations. */
export function shopifyTopics(source: Pick<SourceConfig, 'orderTopic'>): readonly string[] {
  return [source.orderTopic, ...SHOPIFY_OTHER_TOPICS];
}

/** The topics a WooCommerce source must be subscribed to (refunds arrive as `order.updated`). */
export const WOOCOMMERCE_TOPICS = ['order.created', 'order.updated'] as const;

/** The event types a Stripe endpoint must send to a Stripe source: every type the adapter handles. */
export const STRIPE_EVENT_TYPES = [
  'checkout.session.completed',
  'checkout.session.async_payment_succeeded',
  'refund.created',
  'charge.refunded',
] as const;

export type StripeEventType = (typeof STRIPE_EVENT_TYPES)[number];

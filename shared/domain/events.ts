import * as z from 'zod';

/**
 * The normalized events that travel through the queue. Platform adapters produce them from webhooks,
 * the finance API produces refunds, and the worker consumes them. Money is integer minor units
 * ("cents") of `currency`; ids from shops stay strings.
 */

export const PLATFORMS = ['shopify', 'woocommerce', 'stripe', 'generic', 'finance'] as const;
export const Platform = z.enum(PLATFORMS);
export type Platform = z.infer<typeof Platform>;

const cents = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const currency = z.string().regex(/^[A-Z]{3}$/, 'ISO 4217 code in upper case');
const nonEmpty = z.string().min(1);

const eventBase = {
  /** The delivery's dedup key: the platform's event id, or a content hash when it has none. */
  eventId: nonEmpty,
  /** The configured source (shop) the webhook came in on. */
  source: nonEmpty,
  platform: Platform,
  /** The shop's order id, as a string: the idempotency key on the platform. */
  externalId: nonEmpty.max(256),
  /** When the connector accepted the delivery (ISO 8601). */
  receivedAt: z.iso.datetime(),
};

export const OrderPlaced = z.object({
  type: z.literal('OrderPlaced'),
  ...eventBase,
  /** Excluding tax and shipping, after discounts, in minor units. */
  amount: cents,
  currency,
  customerId: nonEmpty.optional(),
  vouchers: z.array(nonEmpty).default([]),
  clickIds: z.array(nonEmpty).default([]),
  buyerIp: z.union([z.ipv4(), z.ipv6()]).optional(),
  productIds: z.array(nonEmpty).default([]),
  paymentMethod: nonEmpty.optional(),
  /** When the order was placed (ISO 8601). */
  orderDate: z.iso.datetime({ offset: true }).optional(),
  /** The integer that follows the prefix of an affiliate's tracking code: selects manual mode. */
  affiliateTrackingId: z.number().int().positive().optional(),
  subId: z.string().optional(),
});
export type OrderPlaced = z.infer<typeof OrderPlaced>;

/**
 * Refund ids the connector makes itself (a cancellation, a Woo status change, a Stripe full refund)
 * start with this; ids from finance and the generic webhook may not, so none can be taken for them.
 */
export const CONNECTOR_REFUND_ID_PREFIX = 'connector:';

/** A refund id of the connector's own: `connector:<name>`. */
export function connectorRefundId(name: string): string {
  return `${CONNECTOR_REFUND_ID_PREFIX}${name}`;
}

/** For ids that come from outside (finance, generic shops): the reserved prefix is refused. */
export const ExternalRefundId = z
  .string()
  .min(1)
  .max(256)
  .refine((id) => !id.startsWith(CONNECTOR_REFUND_ID_PREFIX), {
    message: `must not start with "${CONNECTOR_REFUND_ID_PREFIX}" (reserved for the connector's own refund ids)`,
  });

export const OrderRefunded = z.object({
  type: z.literal('OrderRefunded'),
  ...eventBase,
  /** Unique per refund; the same refund seen twice (shop webhook and finance) counts once. */
  refundId: nonEmpty.max(256),
  /** Refunded amount excluding tax and shipping, minor units. Absent when `full` is true. */
  amount: cents.optional(),
  full: z.boolean().default(false),
  /** Currency of `amount`; checked against the order's. */
  currency: currency.optional(),
  reason: z.string().max(500).optional(),
  /** Who asked: a shop webhook or finance staff. */
  origin: z.enum(['shop', 'finance']).default('shop'),
});
export type OrderRefunded = z.infer<typeof OrderRefunded>;

export const OrderCancelled = z.object({
  type: z.literal('OrderCancelled'),
  ...eventBase,
  reason: z.string().max(500).optional(),
});
export type OrderCancelled = z.infer<typeof OrderCancelled>;

export const ConnectorEvent = z.discriminatedUnion('type', [OrderPlaced, OrderRefunded, OrderCancelled]);
export type ConnectorEvent = z.infer<typeof ConnectorEvent>;
/** What adapters build before zod fills defaults. */
export type ConnectorEventInput = z.input<typeof ConnectorEvent>;
export type EventType = ConnectorEvent['type'];

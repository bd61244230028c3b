import * as z from 'zod/mini';
import { freeText, idText, isCurrency } from './limits.ts';

/**
 * The normalized events that travel through the queue. Platform adapters produce them from webhooks,
 * the finance API produces refunds, and the worker consumes them. Money is integer minor units
 * ("cents") of `currency`; ids from shops stay strings.
 */

export const PLATFORMS = ['shopify', 'woocommerce', 'stripe', 'generic', 'finance'] as const;
export const Platform = z.enum(PLATFORMS);
export type Platform = z.infer<typeof Platform>;

const cents = z.int().check(z.nonnegative(), z.maximum(Number.MAX_SAFE_INTEGER));
// A string (not the enum type) so adapters and the ledger keep plain strings; checked all the same.
const currency = z.string().check(z.refine(isCurrency, 'must be an ISO 4217 currency code in upper case'));
/** Ids and codes: the platform's length limit, no control characters, valid Unicode. */
const id = idText();
/** A reason: trimmed, and absent when blank (the platform refuses an empty reason). */
const reason = z.optional(
  z.pipe(
    freeText(500),
    z.transform((v) => v.trim() || undefined),
  ),
);

/**
 * An instant the platform's date format (`YYYY-MM-DDTHH:mm:ss.sssZ`, UTC) can carry: an offset can
 * push `9999-12-31T23:00:00-05:00` into year 10000.
 */
const sendableDate = z.iso.datetime({ offset: true }).check(
  z.refine((v) => {
    const time = Date.parse(v);
    return Number.isFinite(time) && /^\d{4}-/.test(new Date(time).toISOString());
  }, 'must be a date between the years 0000 and 9999 in UTC'),
);

const eventBase = {
  /** The delivery's dedup key: the platform's event id, or a content hash when it has none. */
  eventId: idText(512),
  /** The configured source (shop) the webhook came in on. */
  source: id,
  platform: Platform,
  /** The shop's order id, as a string: the idempotency key on the platform. */
  externalId: id,
  /** When the connector accepted the delivery (ISO 8601). */
  receivedAt: z.iso.datetime(),
};

export const OrderPlaced = z.object({
  type: z.literal('OrderPlaced'),
  ...eventBase,
  /** Excluding tax and shipping, after discounts, in minor units. */
  amount: cents,
  currency,
  customerId: z.optional(id),
  vouchers: z._default(z.array(id), []),
  clickIds: z._default(z.array(id), []),
  buyerIp: z.optional(z.union([z.ipv4(), z.ipv6()])),
  productIds: z._default(z.array(id), []),
  paymentMethod: z.optional(id),
  /** When the order was placed (ISO 8601). */
  orderDate: z.optional(sendableDate),
  /** The integer that follows the prefix of an affiliate's tracking code: selects manual mode. */
  affiliateTrackingId: z.optional(z.int().check(z.positive())),
  /** The platform's default is the empty string, which the worker does not send. */
  subId: z.optional(z.union([id, z.literal('')])),
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
export const ExternalRefundId = idText().check(
  z.refine((id) => !id.startsWith(CONNECTOR_REFUND_ID_PREFIX), {
    message: `must not start with "${CONNECTOR_REFUND_ID_PREFIX}" (reserved for the connector's own refund ids)`,
  }),
);

export const OrderRefunded = z.object({
  type: z.literal('OrderRefunded'),
  ...eventBase,
  /** Unique per refund; the same refund seen twice (shop webhook and finance) counts once. */
  refundId: id,
  /** Refunded amount excluding tax and shipping, minor units. Absent when `full` is true. */
  amount: z.optional(cents),
  full: z._default(z.boolean(), false),
  /** Currency of `amount`; checked against the order's. */
  currency: z.optional(currency),
  reason,
  /** Who asked: a shop webhook or finance staff. */
  origin: z._default(z.enum(['shop', 'finance']), 'shop'),
});
export type OrderRefunded = z.infer<typeof OrderRefunded>;

export const OrderCancelled = z.object({
  type: z.literal('OrderCancelled'),
  ...eventBase,
  reason,
});
export type OrderCancelled = z.infer<typeof OrderCancelled>;

export const ConnectorEvent = z.discriminatedUnion('type', [OrderPlaced, OrderRefunded, OrderCancelled]);
export type ConnectorEvent = z.infer<typeof ConnectorEvent>;
/** What adapters build before zod fills defaults. */
export type ConnectorEventInput = z.input<typeof ConnectorEvent>;
export type EventType = ConnectorEvent['type'];

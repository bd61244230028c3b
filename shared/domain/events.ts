import * as z from 'zod/mini';
import { freeText, idText, isCurrency } from './limits.ts';
import { SOURCE_PLATFORMS } from './platforms.ts';

/**
 * The normalized events that travel through the queue. Platform adapters produce them from webhooks,
 * the finance API produces refunds, and the worker consumes them. Money is integer minor units
 * ("cents") of `currency`; ids from shops stay strings.
 */

/** The shop platforms, and `finance` for the refunds that come through `POST /refunds`. */
export const PLATFORMS = [...SOURCE_PLATFORMS, 'finance'] as const;
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

/**
 * Most order lines kept for refunds: a record stays far below DynamoDB's 400 KB item limit (and an
 * event below SQS's 256 KB) with ids at their length limit. Past it the lines are dropped, the
 * totals and tax mode kept (`RefundBasis.truncated`).
 */
export const MAX_BASIS_LINES = 200;

const quantity = z.int().check(z.positive(), z.maximum(Number.MAX_SAFE_INTEGER));

/** One order line as the conversion amount was built from it. */
export const BasisLine = z.object({
  /** The shop's line id, which its refunds name. */
  id,
  /** Net of tax and after discounts, minor units: this line's part of the conversion amount. */
  net: cents,
  tax: cents,
  quantity,
});
export type BasisLine = z.infer<typeof BasisLine>;

/**
 * What the order said that a refund needs to be turned net later (issue 19): kept in the ledger with
 * the order, because a refund's own payload does not say it (Shopify's does not carry
 * `taxes_included`; WooCommerce's and Stripe's carry only a gross total).
 */
export const RefundBasis = z.object({
  /** The platform's line money (a Shopify refund line's `subtotal`) includes tax. */
  taxesIncluded: z.boolean(),
  /** Σ net and Σ tax of every line, also those past the cap: `net` is the conversion amount. */
  net: cents,
  tax: cents,
  /** Shipping left out of the amount (net of tax), for the record. */
  shipping: z._default(cents, 0),
  lines: z.array(BasisLine).check(z.maxLength(MAX_BASIS_LINES)),
  /** The order had more than `MAX_BASIS_LINES` lines: only the first are in `lines`. */
  truncated: z._default(z.boolean(), false),
});
export type RefundBasis = z.infer<typeof RefundBasis>;

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
  /** Absent when the adapter could not tie the amount to lines (the worker then keeps today's rules). */
  basis: z.optional(RefundBasis),
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

/**
 * A line of a refund as its payload states it, passed through for the worker to turn net against
 * the order's `RefundBasis` (see shared/worker/refund-net.ts).
 */
export const RefundLine = z.object({
  /** The order line refunded (Shopify `line_item_id`, WooCommerce `_refunded_item_id`). */
  id: z.optional(id),
  quantity: z.int().check(z.nonnegative(), z.maximum(Number.MAX_SAFE_INTEGER)),
  /** The net the refund itself states for the line (WooCommerce line totals): taken as is. */
  net: z.optional(cents),
  /** The line's money in the order's pricing (Shopify `subtotal`) and its tax: the fallback. */
  amount: z.optional(cents),
  tax: z.optional(cents),
});
export type RefundLine = z.infer<typeof RefundLine>;

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
  /**
   * The refund's own lines, when its payload lists them. With them (or `gross`) `amount` is only
   * the fallback, by the adapter's rules, for an order the ledger holds no lines of.
   */
  lines: z.optional(z.array(RefundLine).check(z.maxLength(MAX_BASIS_LINES))),
  /** The money paid back, tax (and maybe shipping) included, when that is all the payload says. */
  gross: z.optional(cents),
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

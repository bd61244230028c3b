import * as z from 'zod';
import { type ConnectorEventInput, connectorRefundId } from '../domain/events.ts';
import { BadInputError } from '../errors.ts';
import type { HttpRequest } from '../http/types.ts';
import { parseJsonBody } from '../json.ts';
import { prorateMinor, sumMinor } from '../money.ts';
import { extractAttribution, keyValueEntries } from './attribution.ts';
import {
  bodySha256,
  CurrencyCode,
  firstIp,
  IdString,
  isoDate,
  MoneyText,
  mapped,
  money,
  parsePayload,
  requiredHeader,
  unique,
} from './mapping.ts';
import { verifyBase64HmacHeader } from './signature.ts';
import type { AdapterContext, AdapterResult, PlatformAdapter } from './types.ts';

/**
 * WooCommerce webhooks (REST API v3 resources as bodies).
 *
 * Amount of an order: Σ `line_items[].total`, which WooCommerce stores after coupons and without
 * tax in both tax modes (`prices_include_tax` only changes what the shop displays), so
 * `total_tax`, shipping and fee lines stay out. When `prices_include_tax` is true and the order's
 * own total shows that the line totals carried their tax (a plugin writing gross line totals), the
 * line taxes are subtracted.
 *
 * Refunds arrive inside `order.updated` as `refunds[]` entries whose `total` is negative and
 * includes tax and shipping; each is turned net with the order's net/gross ratio
 * (`|refund total| × amount / total`, integer arithmetic, half away from zero).
 */

const Order = z.looseObject({
  id: IdString,
  status: z.string(),
  currency: CurrencyCode,
  date_created_gmt: z.string().nullish(),
  date_modified_gmt: z.string().nullish(),
  total: MoneyText,
  total_tax: MoneyText.nullish(),
  shipping_total: MoneyText.nullish(),
  prices_include_tax: z.boolean().nullish(),
  customer_id: IdString.nullish(),
  customer_ip_address: z.string().nullish(),
  payment_method: z.string().nullish(),
  meta_data: z.array(z.unknown()).nullish(),
  line_items: z.array(
    z.looseObject({ product_id: IdString.nullish(), total: MoneyText, total_tax: MoneyText.nullish() }),
  ),
  fee_lines: z.array(z.looseObject({ total: MoneyText })).nullish(),
  coupon_lines: z.array(z.looseObject({ code: z.string() })).nullish(),
  refunds: z.array(z.looseObject({ id: IdString, total: MoneyText, refund: z.string().nullish() })).nullish(),
});
type Order = z.infer<typeof Order>;

/** A refund resource (`/orders/<id>/refunds/<id>`), as some plugins and custom topics deliver it. */
const RefundResource = z.looseObject({
  id: IdString,
  amount: MoneyText,
  reason: z.string().nullish(),
  currency: z.nullish(CurrencyCode),
  order_id: IdString.nullish(),
  parent_id: IdString.nullish(),
  line_items: z.array(z.looseObject({ total: MoneyText })).nullish(),
  _links: z.looseObject({ up: z.array(z.looseObject({ href: z.string() })).nullish() }).nullish(),
});

function sum(values: readonly string[], currency: string, path: (i: number) => string): number {
  return sumMinor(values.map((v, i) => money(v, currency, path(i), { allowNegative: true })));
}

/** Net amount and the gross `total` it is part of, in minor units. */
export function wooOrderAmounts(order: Order): { net: number; gross: number } {
  const c = order.currency;
  const lines = sum(
    order.line_items.map((l) => l.total),
    c,
    (i) => `line_items.${i}.total`,
  );
  const gross = money(order.total, c, 'total');
  let net = lines;
  if (order.prices_include_tax === true) {
    const lineTax = sum(
      order.line_items.map((l) => l.total_tax ?? '0'),
      c,
      (i) => `line_items.${i}.total_tax`,
    );
    const others =
      (order.shipping_total ? money(order.shipping_total, c, 'shipping_total') : 0) +
      sum(
        (order.fee_lines ?? []).map((f) => f.total),
        c,
        (i) => `fee_lines.${i}.total`,
      ) +
      (order.total_tax ? money(order.total_tax, c, 'total_tax') : 0);
    const netIdentity = lines + others === gross;
    if (!netIdentity && lines - lineTax + others === gross) net = lines - lineTax;
  }
  if (net < 0) throw new BadInputError('line_items: negative order amount', { field: 'line_items' });
  return { net, gross };
}

function placed(order: Order, eventId: string, context: AdapterContext): ConnectorEventInput {
  const attribution = extractAttribution(keyValueEntries(order.meta_data, 'meta_data'), context.source);
  return {
    type: 'OrderPlaced',
    eventId,
    source: context.source.id,
    platform: 'woocommerce',
    externalId: order.id,
    receivedAt: context.now.toISOString(),
    amount: wooOrderAmounts(order).net,
    currency: order.currency,
    // Guest checkouts have customer_id 0.
    customerId: order.customer_id && order.customer_id !== '0' ? order.customer_id : undefined,
    vouchers: unique((order.coupon_lines ?? []).map((c) => c.code)),
    ...attribution,
    buyerIp: firstIp(order.customer_ip_address),
    productIds: unique(
      order.line_items.flatMap((l) => (l.product_id && l.product_id !== '0' ? [l.product_id] : [])),
    ),
    paymentMethod: order.payment_method || undefined,
    orderDate: isoDate(order.date_created_gmt, true),
  };
}

/** `order.updated`: a cancellation, a full refund by status, or the partial refunds it lists. */
function updated(order: Order, eventId: string, context: AdapterContext): AdapterResult {
  const base = {
    source: context.source.id,
    platform: 'woocommerce',
    externalId: order.id,
    receivedAt: context.now.toISOString(),
  } as const;
  if (order.status === 'cancelled') {
    return mapped([{ type: 'OrderCancelled', ...base, eventId }]);
  }
  if (order.status === 'refunded') {
    const event: ConnectorEventInput = {
      type: 'OrderRefunded',
      ...base,
      eventId: `${eventId}:status-refunded`,
      refundId: connectorRefundId('status-refunded'),
      full: true,
      origin: 'shop',
    };
    return mapped([event]);
  }
  const refunds = order.refunds ?? [];
  if (refunds.length === 0) {
    return { kind: 'ignored', reason: `order.updated with status ${order.status} and no refunds` };
  }
  const { net, gross } = wooOrderAmounts(order);
  const events = refunds.map((refund, i): ConnectorEventInput => {
    const refunded = Math.abs(
      money(refund.total, order.currency, `refunds.${i}.total`, { allowNegative: true }),
    );
    return {
      type: 'OrderRefunded',
      ...base,
      eventId: `${eventId}:refund:${refund.id}`,
      refundId: refund.id,
      amount: Math.min(net, prorateMinor(refunded, net, gross)),
      currency: order.currency,
      reason: refund.refund?.slice(0, 500) || undefined,
      origin: 'shop',
    };
  });
  return mapped(events);
}

function orderIdOfRefund(refund: z.infer<typeof RefundResource>): string {
  const fromLink = refund._links?.up?.[0]?.href.match(/\/orders\/([0-9]+)\/?$/)?.[1];
  const id = refund.order_id ?? refund.parent_id ?? fromLink;
  if (!id) throw new BadInputError('_links.up: the refund names no order', { field: '_links.up' });
  return id;
}

/**
 * A refund resource body. Its line totals are net of tax and shipping, so they are used when
 * present; without lines only the gross `amount` is known and is taken as given. WooCommerce's
 * refund resource carries no currency: without one (a plugin may add `currency`) the amount's
 * minor unit is unknown and the delivery is ignored; the `order.updated` that WooCommerce sends for
 * the same refund carries it.
 */
function refundResource(body: unknown, context: AdapterContext): AdapterResult {
  const refund = parsePayload(RefundResource, body);
  const externalId = orderIdOfRefund(refund);
  const currency = refund.currency;
  if (!currency) {
    return { kind: 'ignored', reason: `refund ${refund.id} has no currency: counted from its order.updated` };
  }
  const lines = refund.line_items ?? [];
  const amount =
    lines.length > 0
      ? Math.abs(
          sum(
            lines.map((l) => l.total),
            currency,
            (i) => `line_items.${i}.total`,
          ),
        )
      : Math.abs(money(refund.amount, currency, 'amount', { allowNegative: true }));
  const event: ConnectorEventInput = {
    type: 'OrderRefunded',
    eventId: `refund:${externalId}:${refund.id}`,
    source: context.source.id,
    platform: 'woocommerce',
    externalId,
    receivedAt: context.now.toISOString(),
    refundId: refund.id,
    amount,
    currency,
    reason: refund.reason?.slice(0, 500) || undefined,
    origin: 'shop',
  };
  return mapped([event]);
}

function looksLikeRefundResource(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  return 'amount' in body && 'refunded_by' in body && !('status' in body);
}

function refundBodyOf(rawBody: Buffer): unknown {
  try {
    const body = parseJsonBody(rawBody);
    return looksLikeRefundResource(body) ? body : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Statuses of an order that is no sale. The topic header is not signed, so an `order.updated`
 * body can arrive as `order.created`; WooCommerce also builds a payload when it sends it (often
 * from a queue), so a genuine `order.created` may already show a later status. Either way the body
 * is the order's state, and such an order is ignored (200: WooCommerce does not retry, and counts
 * failures towards disabling the webhook) rather than placed.
 */
const NOT_A_SALE = new Set(['cancelled', 'refunded', 'failed', 'trash']);

/** The unsigned form-encoded handshake WooCommerce posts when a webhook is saved. */
function isPing(rawBody: Buffer): boolean {
  return rawBody.length < 64 && /^webhook_id=[0-9]+$/.test(rawBody.toString('latin1').trim());
}

/**
 * WooCommerce: `x-wc-webhook-signature` (base64 HMAC-SHA256 of the raw body). The creation ping
 * (`webhook_id=<n>`, unsigned) is answered before any signature check. Topics: `order.created` →
 * OrderPlaced unless the body's status is no sale (`NOT_A_SALE`); `order.updated` → OrderCancelled (status `cancelled`), a full OrderRefunded (status
 * `refunded`) or one OrderRefunded per `refunds[]` entry. A refund resource body (told apart by
 * `amount` + `refunded_by` and no `status`), on any topic, → OrderRefunded. Other topics are
 * ignored. Dedup key: `<topic>:<order id>:<date_modified_gmt>` (the delivery id changes on every
 * send), suffixed per refund when one delivery yields several; `refund:<order id>:<refund id>` for
 * a refund resource.
 */
export const woocommerceAdapter: PlatformAdapter = {
  platform: 'woocommerce',
  handle(request: HttpRequest, context: AdapterContext): AdapterResult {
    if (isPing(request.rawBody)) return { kind: 'ping' };
    verifyBase64HmacHeader(request, context.secrets, 'x-wc-webhook-signature');
    return mapWooCommerce(request, context);
  },
  map: mapWooCommerce,
};

function mapWooCommerce(request: HttpRequest, context: AdapterContext): AdapterResult {
  const topic = requiredHeader(request.headers, 'x-wc-webhook-topic');
  if (topic !== 'order.created' && topic !== 'order.updated') {
    // Custom topics may deliver a refund resource; anything else they carry is not ours.
    const refund = refundBodyOf(request.rawBody);
    return refund === undefined
      ? { kind: 'ignored', reason: `topic ${topic} is not handled` }
      : refundResource(refund, context);
  }
  const body = parseJsonBody(request.rawBody);
  if (looksLikeRefundResource(body)) return refundResource(body, context);
  const order = parsePayload(Order, body);
  const modified = order.date_modified_gmt;
  const eventId = modified ? `${topic}:${order.id}:${modified}` : bodySha256(request.rawBody);
  if (topic === 'order.updated') return updated(order, eventId, context);
  if (order.status === 'checkout-draft') {
    return { kind: 'ignored', reason: 'order is a checkout draft, not a placed order' };
  }
  if (NOT_A_SALE.has(order.status)) {
    return {
      kind: 'ignored',
      reason: `order.created body with status ${order.status}: not a sale (an order.updated body, or an order changed before the webhook went out)`,
    };
  }
  return mapped([placed(order, eventId, context)]);
}

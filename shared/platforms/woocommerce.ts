import * as z from 'zod/mini';
import {
  type BasisLine,
  type ConnectorEventInput,
  connectorRefundId,
  type RefundBasis,
  type RefundLine,
} from '../domain/events.ts';
import { quoted } from '../domain/text.ts';
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
  optionalBasis,
  parsePayload,
  refundBasis,
  refundLines,
  requiredHeader,
  shopReason,
  unique,
} from './mapping.ts';
import { verifyBase64HmacHeader } from './signature.ts';
import { WOOCOMMERCE_TOPICS } from './topics.ts';
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
 * includes tax and shipping. Each passes its own `line_items` (when a plugin adds them) or its
 * gross to the worker, which turns it net against the order's lines kept in the ledger
 * (shared/worker/refund-net.ts); the event's `amount`, the order's net/gross ratio
 * (`|refund total| × amount / total`, integer arithmetic, half away from zero), is the fallback
 * for an order the ledger holds no lines of.
 */

/**
 * A refund's line (the refund resource's `line_items`, and a `refunds[]` entry's when a plugin adds
 * them): negative quantity and totals, net of tax; the order line in `_refunded_item_id`.
 */
const RefundItem = z.looseObject({
  quantity: z.nullish(z.number().check(z.int())),
  total: MoneyText,
  total_tax: z.nullish(MoneyText),
  meta_data: z.nullish(z.array(z.unknown())),
});
/** Read only for refunds, and leniently: a body accepted before must not become a 400 for them. */
const RefundItems = z.nullish(z.array(RefundItem));
type RefundItem = z.infer<typeof RefundItem>;

const Order = z.looseObject({
  id: IdString,
  status: z.string(),
  currency: CurrencyCode,
  date_created_gmt: z.nullish(z.string()),
  date_modified_gmt: z.nullish(z.string()),
  total: MoneyText,
  total_tax: z.nullish(MoneyText),
  shipping_total: z.nullish(MoneyText),
  prices_include_tax: z.nullish(z.boolean()),
  customer_id: z.nullish(IdString),
  customer_ip_address: z.nullish(z.string()),
  payment_method: z.nullish(z.string()),
  meta_data: z.nullish(z.array(z.unknown())),
  line_items: z.array(
    z.looseObject({
      // Read for the refund basis only, leniently (see `RefundItems`).
      id: z.optional(z.unknown()),
      product_id: z.nullish(IdString),
      quantity: z.optional(z.unknown()),
      total: MoneyText,
      total_tax: z.nullish(MoneyText),
    }),
  ),
  fee_lines: z.nullish(z.array(z.looseObject({ total: MoneyText }))),
  coupon_lines: z.nullish(z.array(z.looseObject({ code: z.string() }))),
  refunds: z.nullish(
    z.array(
      z.looseObject({
        id: IdString,
        total: MoneyText,
        // WooCommerce's order controller writes the reason as `reason`; the REST documentation's
        // example names it `refund`, which is kept as a fallback. Read leniently: a body accepted
        // before must not become a 400 for a key it was never judged by (any value but text is no
        // reason). Not `z.catch`: zod/mini reaches its helpers through a nested namespace there,
        // which puts all of zod's util module (7 KiB) in the bundle.
        reason: z.optional(z.unknown()),
        refund: z.nullish(z.string()),
        line_items: z.optional(z.unknown()),
      }),
    ),
  ),
});
type Order = z.infer<typeof Order>;

/** A refund resource (`/orders/<id>/refunds/<id>`), as some plugins and custom topics deliver it. */
const RefundResource = z.looseObject({
  id: IdString,
  amount: MoneyText,
  reason: z.nullish(z.string()),
  currency: z.nullish(CurrencyCode),
  order_id: z.nullish(IdString),
  parent_id: z.nullish(IdString),
  line_items: z.nullish(z.array(z.looseObject({ total: MoneyText }))),
  _links: z.nullish(z.looseObject({ up: z.nullish(z.array(z.looseObject({ href: z.string() }))) })),
});

/**
 * Σ of the amounts of a list's entries (`<list>.<i>.<key>`); an overflow is a 400 naming the list,
 * a bad amount one naming the entry's field.
 */
function sum(values: readonly string[], currency: string, list: string, key: string): number {
  return sumMinor(
    values.map((v, i) => money(v, currency, `${list}.${i}.${key}`, { allowNegative: true })),
    list,
  );
}

/**
 * Net amount and the gross `total` it is part of, in minor units; `grossLines` when the line totals
 * carried their tax (see the top of this file).
 */
export function wooOrderAmounts(order: Order): { net: number; gross: number; grossLines: boolean } {
  const c = order.currency;
  const lines = sum(
    order.line_items.map((l) => l.total),
    c,
    'line_items',
    'total',
  );
  const gross = money(order.total, c, 'total');
  let net = lines;
  if (order.prices_include_tax === true) {
    const lineTax = sum(
      order.line_items.map((l) => l.total_tax ?? '0'),
      c,
      'line_items',
      'total_tax',
    );
    const others =
      (order.shipping_total ? money(order.shipping_total, c, 'shipping_total') : 0) +
      sum(
        (order.fee_lines ?? []).map((f) => f.total),
        c,
        'fee_lines',
        'total',
      ) +
      (order.total_tax ? money(order.total_tax, c, 'total_tax') : 0);
    const netIdentity = lines + others === gross;
    if (!netIdentity && lines - lineTax + others === gross) net = lines - lineTax;
  }
  if (net < 0) throw new BadInputError('line_items: negative order amount', { field: 'line_items' });
  return { net, gross, grossLines: net !== lines };
}

/**
 * What a refund of this order needs later (shared/worker/refund-net.ts): each line's net (its
 * `total`, less its tax when the totals carried it) and tax, and the shipping. None when a line has
 * no id or quantity, or when the lines do not add up to the amount (negative totals of edited orders).
 */
export function wooRefundBasis(order: Order): RefundBasis | undefined {
  const c = order.currency;
  const { net, grossLines } = wooOrderAmounts(order);
  const lines: BasisLine[] = [];
  for (const [i, line] of order.line_items.entries()) {
    const total = money(line.total, c, `line_items.${i}.total`, { allowNegative: true });
    const tax = line.total_tax
      ? money(line.total_tax, c, `line_items.${i}.total_tax`, { allowNegative: true })
      : 0;
    const lineNet = grossLines ? total - tax : total;
    const id = IdString.safeParse(line.id);
    const quantity = line.quantity;
    if (!id.success || typeof quantity !== 'number' || !Number.isSafeInteger(quantity) || quantity <= 0) {
      return undefined;
    }
    if (lineNet < 0 || tax < 0) return undefined;
    lines.push({ id: id.data, net: lineNet, tax, quantity });
  }
  const basis = refundBasis(lines, {
    taxesIncluded: grossLines,
    shipping: order.shipping_total ? money(order.shipping_total, c, 'shipping_total') : 0,
  });
  return basis.net === net ? basis : undefined;
}

/** `_refunded_item_id` of a refund line: the order line it refunds. */
function refundedItemId(item: RefundItem): string | undefined {
  for (const entry of item.meta_data ?? []) {
    if (typeof entry !== 'object' || entry === null) continue;
    const { key, value } = entry as { key?: unknown; value?: unknown };
    if (key !== '_refunded_item_id') continue;
    if (typeof value === 'string' && value.trim()) return value.trim();
    if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  }
  return undefined;
}

/**
 * A refund's own lines: WooCommerce writes them negative and net of tax (with the tax inside when the
 * order's line totals carried it, `grossLines`), so each states its net.
 */
function wooRefundLines(items: unknown, currency: string, grossLines: boolean, path: string): RefundLine[] {
  const parsed = RefundItems.safeParse(items);
  if (!parsed.success) return [];
  try {
    return readRefundLines(parsed.data ?? [], currency, grossLines, path);
  } catch (error) {
    if (error instanceof BadInputError) return [];
    throw error;
  }
}

function readRefundLines(
  items: readonly RefundItem[],
  currency: string,
  grossLines: boolean,
  path: string,
): RefundLine[] {
  return items.map((item, i) => {
    const at = `${path}.${i}`;
    const total = Math.abs(money(item.total, currency, `${at}.total`, { allowNegative: true }));
    const tax = item.total_tax
      ? Math.abs(money(item.total_tax, currency, `${at}.total_tax`, { allowNegative: true }))
      : 0;
    const id = refundedItemId(item);
    return {
      ...(id ? { id } : {}),
      quantity: Math.abs(item.quantity ?? 0),
      net: grossLines ? Math.max(0, total - tax) : total,
    };
  });
}

function placed(order: Order, eventId: string, context: AdapterContext): AdapterResult {
  // Plugins copy the landing URL's aecid or a cookie, both the buyer's, into order meta unchecked.
  const { attribution, skippedFields } = extractAttribution(
    keyValueEntries(order.meta_data, 'meta_data'),
    context.source,
    'skip',
  );
  const event: ConnectorEventInput = {
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
    basis: optionalBasis(() => wooRefundBasis(order)),
  };
  return mapped([event], skippedFields);
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
    return { kind: 'ignored', reason: `order.updated with status ${quoted(order.status)} and no refunds` };
  }
  const { net, gross, grossLines } = wooOrderAmounts(order);
  const events = refunds.map((refund, i): ConnectorEventInput => {
    const refunded = Math.abs(
      money(refund.total, order.currency, `refunds.${i}.total`, { allowNegative: true }),
    );
    const lines = wooRefundLines(
      refund.line_items ?? [],
      order.currency,
      grossLines,
      `refunds.${i}.line_items`,
    );
    return {
      type: 'OrderRefunded',
      ...base,
      eventId: `${eventId}:refund:${refund.id}`,
      refundId: refund.id,
      // The fallback, for an order the ledger holds no lines of: the worker computes the net from
      // the refund's lines when it lists them, else from its gross and the order's lines.
      amount: Math.min(net, prorateMinor(refunded, net, gross)),
      currency: order.currency,
      reason: shopReason((typeof refund.reason === 'string' && refund.reason) || refund.refund),
      origin: 'shop',
      ...(lines.length > 0 ? refundLines(lines) : { gross: refunded }),
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
    return {
      kind: 'ignored',
      reason: `refund ${quoted(refund.id)} has no currency: counted from its order.updated`,
    };
  }
  const lines = refund.line_items ?? [];
  const gross = Math.abs(money(refund.amount, currency, 'amount', { allowNegative: true }));
  const amount =
    lines.length > 0
      ? Math.abs(
          sum(
            lines.map((l) => l.total),
            currency,
            'line_items',
            'total',
          ),
        )
      : gross;
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
    reason: shopReason(refund.reason),
    origin: 'shop',
    ...(lines.length > 0 ? refundLines(wooRefundLines(lines, currency, false, 'line_items')) : { gross }),
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
  if (!(WOOCOMMERCE_TOPICS as readonly string[]).includes(topic)) {
    // Custom topics may deliver a refund resource; anything else they carry is not ours.
    const refund = refundBodyOf(request.rawBody);
    return refund === undefined
      ? { kind: 'ignored', reason: `topic ${quoted(topic)} is not handled` }
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
  return placed(order, eventId, context);
}

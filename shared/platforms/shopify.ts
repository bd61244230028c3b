import * as z from 'zod/mini';
import type { BasisLine, ConnectorEventInput, RefundBasis, RefundLine } from '../domain/events.ts';
import { quoted } from '../domain/text.ts';
import { BadInputError } from '../errors.ts';
import type { HttpRequest } from '../http/types.ts';
import { parseJsonBody } from '../json.ts';
import { multiplyMinor, prorateMinor, sumMinor } from '../money.ts';
import { extractAttribution, nameValueEntries, urlQueryEntries } from './attribution.ts';
import {
  absentField,
  bodySha256,
  CurrencyCode,
  firstIp,
  header,
  IdString,
  idString,
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
  topicMark,
  unique,
} from './mapping.ts';
import { verifyBase64HmacHeader } from './signature.ts';
import { SHOPIFY_OTHER_TOPICS } from './topics.ts';
import type { AdapterContext, AdapterResult, PlatformAdapter } from './types.ts';

/**
 * Shopify webhooks (REST payloads, API 2024-01 and later; older shapes where noted).
 *
 * Amount of an order: Σ over `line_items` of `price × quantity − Σ discount_allocations`, in the
 * shop currency (`*_set.shop_money` when present), minus the line items' `tax_lines` when
 * `taxes_included`. Shipping lines, shipping taxes, tips and duties never enter it. This is
 * computed from the lines rather than read from `subtotal_price` because the lines are what
 * refunds reference, and because Shopify's own documentation example has a `subtotal_price` that
 * ignores its discount (597.00 where its lines and `total_price` say 587.00). Payloads older than
 * `discount_allocations` fall back to `subtotal_price` (after discounts, before shipping).
 */

const Money = z.looseObject({ amount: MoneyText, currency_code: z.nullish(z.string()) });
/** `*_set`: the shop currency (the commission's) and the presentment currency the buyer paid in. */
const MoneySet = z.nullish(z.looseObject({ shop_money: Money, presentment_money: z.nullish(Money) }));

const TaxLine = z.looseObject({ price: MoneyText, price_set: MoneySet });
const DiscountAllocation = z.looseObject({ amount: MoneyText, amount_set: MoneySet });
/**
 * The fields read only for the refund basis (`id`, `line_item_id`, `shipping_lines`) are `unknown`
 * here and read leniently there: an order or refund accepted before must not become a 400 for them.
 */
const LineItem = z.looseObject({
  id: z.optional(z.unknown()),
  price: MoneyText,
  price_set: MoneySet,
  quantity: z.number().check(z.int(), z.nonnegative()),
  product_id: z.nullish(IdString),
  tax_lines: z.nullish(z.array(TaxLine)),
  discount_allocations: z.optional(z.array(DiscountAllocation)),
});
type LineItem = z.infer<typeof LineItem>;

/** What tells a refund apart from an order: an order is never "of" an order. */
const NOT_A_REFUND = absentField("a refund's field, not an order's: this body was not sent for this topic");

const Order = z.looseObject({
  id: IdString,
  order_id: NOT_A_REFUND,
  cancelled_at: absentField('set: a cancelled order, not a new one; this body was not sent for this topic'),
  currency: CurrencyCode,
  taxes_included: z.nullish(z.boolean()),
  subtotal_price: z.nullish(MoneyText),
  subtotal_price_set: MoneySet,
  line_items: z.array(LineItem),
  shipping_lines: z.optional(z.unknown()),
  discount_codes: z.nullish(z.array(z.looseObject({ code: z.string() }))),
  note_attributes: z.nullish(z.array(z.unknown())),
  landing_site: z.nullish(z.string()),
  browser_ip: z.nullish(z.string()),
  client_details: z.nullish(z.looseObject({ browser_ip: z.nullish(z.string()) })),
  customer: z.nullish(z.looseObject({ id: z.nullish(IdString) })),
  payment_gateway_names: z.nullish(z.array(z.string())),
  gateway: z.nullish(z.string()),
  processed_at: z.nullish(z.string()),
  created_at: z.nullish(z.string()),
});
type Order = z.infer<typeof Order>;

const CancelledOrder = z.looseObject({
  id: IdString,
  order_id: NOT_A_REFUND,
  cancelled_at: z
    .string({ error: topicMark('an orders/cancelled payload has cancelled_at') })
    .check(z.minLength(1)),
  cancel_reason: z.nullish(z.string()),
});

const RefundLineItem = z.looseObject({
  line_item_id: z.optional(z.unknown()),
  quantity: z.number().check(z.int(), z.nonnegative()),
  subtotal: z.nullish(MoneyText),
  subtotal_set: MoneySet,
  total_tax: z.nullish(MoneyText),
  total_tax_set: MoneySet,
  line_item: z.nullish(z.partial(LineItem)),
});
type RefundLineItem = z.infer<typeof RefundLineItem>;

const Refund = z.looseObject({
  id: IdString,
  order_id: idString({ error: topicMark('a refund has the order_id of its order') }),
  note: z.nullish(z.string()),
  refund_line_items: z.array(RefundLineItem, {
    error: topicMark('a refunds/create payload lists its refund_line_items (empty for shipping only)'),
  }),
  transactions: z.nullish(
    z.array(
      z.looseObject({
        kind: z.nullish(z.string()),
        status: z.nullish(z.string()),
        amount: MoneyText,
        currency: z.nullish(z.string()),
      }),
    ),
  ),
});
type Refund = z.infer<typeof Refund>;

/** A money value in shop currency: `<name>_set.shop_money.amount` when present, else the plain field. */
function shopMoney(
  plain: string | null | undefined,
  set: z.infer<typeof MoneySet>,
  field: string,
): { text: string; field: string } | undefined {
  if (set) return { text: set.shop_money.amount, field: `${field}_set.shop_money.amount` };
  if (plain !== null && plain !== undefined) return { text: plain, field };
  return undefined;
}

function read(value: { text: string; field: string }, currency: string): number {
  return money(value.text, currency, value.field);
}

function lineTaxes(line: Partial<LineItem>, currency: string, path: string): number {
  return sumMinor(
    (line.tax_lines ?? []).map((t, j) =>
      read(shopMoney(t.price, t.price_set, `${path}.tax_lines.${j}.price`)!, currency),
    ),
    `${path}.tax_lines`,
  );
}

function lineNet(line: LineItem, currency: string, path: string, taxesIncluded: boolean): number {
  const price = shopMoney(line.price, line.price_set, `${path}.price`)!;
  const discounts = sumMinor(
    (line.discount_allocations ?? []).map((d, j) =>
      read(shopMoney(d.amount, d.amount_set, `${path}.discount_allocations.${j}.amount`)!, currency),
    ),
    `${path}.discount_allocations`,
  );
  const taxes = taxesIncluded ? lineTaxes(line, currency, path) : 0;
  return sumMinor(
    [multiplyMinor(read(price, currency), line.quantity, price.field), -discounts, -taxes],
    path,
  );
}

/** The order amount rule described at the top of this file. */
export function shopifyOrderAmount(order: Order): number {
  const currency = order.currency;
  const taxesIncluded = order.taxes_included === true;
  const hasAllocations = order.line_items.some((l) => l.discount_allocations !== undefined);
  const subtotal = shopMoney(order.subtotal_price, order.subtotal_price_set, 'subtotal_price');
  let amount: number;
  if (!hasAllocations && subtotal) {
    const taxes = taxesIncluded
      ? sumMinor(
          order.line_items.map((l, i) => lineTaxes(l, currency, `line_items.${i}`)),
          'line_items',
        )
      : 0;
    amount = read(subtotal, currency) - taxes;
  } else {
    amount = sumMinor(
      order.line_items.map((l, i) => lineNet(l, currency, `line_items.${i}`, taxesIncluded)),
      'line_items',
    );
  }
  if (amount < 0)
    throw new BadInputError('line_items: discounts and taxes exceed the line prices', {
      field: 'line_items',
    });
  return amount;
}

/**
 * What a refund of this order needs later (see shared/worker/refund-net.ts): the tax mode and each
 * line's net as `shopifyOrderAmount` counted it. None for payloads too old for
 * `discount_allocations` (their amount is not the lines') or with a line that has no id.
 */
const ShippingLines = z.nullish(
  z.array(z.looseObject({ price: MoneyText, price_set: MoneySet, tax_lines: z.nullish(z.array(TaxLine)) })),
);

/** An id read leniently (see `LineItem`): undefined when it is not one. */
function idOf(value: unknown): string | undefined {
  const parsed = IdString.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

export function shopifyRefundBasis(order: Order): RefundBasis | undefined {
  const currency = order.currency;
  const taxesIncluded = order.taxes_included === true;
  if (!order.line_items.some((l) => l.discount_allocations !== undefined)) return undefined;
  const lines: BasisLine[] = [];
  for (const [i, line] of order.line_items.entries()) {
    if (line.quantity === 0) continue;
    const id = idOf(line.id);
    if (!id) return undefined;
    const path = `line_items.${i}`;
    lines.push({
      id,
      net: lineNet(line, currency, path, taxesIncluded),
      tax: lineTaxes(line, currency, path),
      quantity: line.quantity,
    });
  }
  const shipping = sumMinor(
    (parsePayload(ShippingLines, order.shipping_lines, 'shipping_lines') ?? []).map((l, i) => {
      const price = read(shopMoney(l.price, l.price_set, `shipping_lines.${i}.price`)!, currency);
      return taxesIncluded ? price - lineTaxes(l, currency, `shipping_lines.${i}`) : price;
    }),
    'shipping_lines',
  );
  return refundBasis(lines, { taxesIncluded, shipping });
}

function placed(order: Order, eventId: string, context: AdapterContext): AdapterResult {
  const entries = [
    ...nameValueEntries(order.note_attributes, 'note_attributes'),
    ...urlQueryEntries(order.landing_site, 'landing_site'),
  ];
  // Cart attributes are the buyer's to write (the storefront's /cart/update.js), the landing URL too.
  const { attribution, skippedFields } = extractAttribution(entries, context.source, 'skip');
  const event: ConnectorEventInput = {
    type: 'OrderPlaced',
    eventId,
    source: context.source.id,
    platform: 'shopify',
    externalId: order.id,
    receivedAt: context.now.toISOString(),
    amount: shopifyOrderAmount(order),
    currency: order.currency,
    customerId: order.customer?.id ?? undefined,
    vouchers: unique((order.discount_codes ?? []).map((d) => d.code)),
    ...attribution,
    buyerIp: firstIp(order.browser_ip, order.client_details?.browser_ip),
    productIds: unique(order.line_items.flatMap((l) => (l.product_id ? [l.product_id] : []))),
    paymentMethod: order.payment_gateway_names?.[0] || order.gateway || undefined,
    orderDate: isoDate(order.processed_at) ?? isoDate(order.created_at),
    basis: optionalBasis(() => shopifyRefundBasis(order)),
  };
  return mapped([event], skippedFields);
}

function refundCurrency(refund: Refund, lines: readonly RefundLineItem[]): string {
  for (const line of lines) {
    const code =
      line.subtotal_set?.shop_money.currency_code ??
      line.total_tax_set?.shop_money.currency_code ??
      line.line_item?.price_set?.shop_money.currency_code;
    if (code) return parsePayload(CurrencyCode, code, 'refund_line_items');
  }
  // Transactions are in the presentment currency: only a last resort, for payloads without *_set.
  const code = refund.transactions?.find((t) => t.currency)?.currency;
  if (code) return parsePayload(CurrencyCode, code, 'transactions.0.currency');
  throw new BadInputError('refund_line_items.0.subtotal_set: the refund names no currency', {
    field: 'refund_line_items.0.subtotal_set',
  });
}

/** Subtotal and tax of one refund line; derived from its `line_item` on payloads that predate `subtotal`. */
function refundLine(line: RefundLineItem, currency: string, path: string): { subtotal: number; tax: number } {
  const subtotal = shopMoney(line.subtotal, line.subtotal_set, `${path}.subtotal`);
  const tax = shopMoney(line.total_tax, line.total_tax_set, `${path}.total_tax`);
  if (subtotal) return { subtotal: read(subtotal, currency), tax: tax ? read(tax, currency) : 0 };
  const item = line.line_item;
  const unitText = item && shopMoney(item.price, item.price_set, `${path}.line_item.price`);
  if (!item || !unitText) {
    throw new BadInputError(`${path}.subtotal_set: missing`, { field: `${path}.subtotal_set` });
  }
  const ordered = item.quantity ?? line.quantity;
  const discounts = sumMinor(
    (item.discount_allocations ?? []).map((d, j) =>
      read(
        shopMoney(d.amount, d.amount_set, `${path}.line_item.discount_allocations.${j}.amount`)!,
        currency,
      ),
    ),
    `${path}.line_item.discount_allocations`,
  );
  const share = (whole: number) => prorateMinor(whole, line.quantity, ordered, `${path}.quantity`);
  return {
    subtotal: multiplyMinor(read(unitText, currency), line.quantity, unitText.field) - share(discounts),
    tax: share(lineTaxes(item, currency, `${path}.line_item`)),
  };
}

/**
 * Σ presentment subtotal and tax of the refund lines, when every line states them in `currency`:
 * the figures a refund transaction (always in the presentment currency) can be compared with.
 */
function presentmentTotals(
  lines: readonly RefundLineItem[],
  currency: string,
): { subtotal: number; tax: number } | undefined {
  const subtotals: number[] = [];
  const taxes: number[] = [];
  for (const [i, line] of lines.entries()) {
    const subtotal = line.subtotal_set?.presentment_money;
    const tax = line.total_tax_set?.presentment_money;
    if (subtotal?.currency_code?.toUpperCase() !== currency) return undefined;
    if (tax && tax.currency_code?.toUpperCase() !== currency) return undefined;
    const path = `refund_line_items.${i}`;
    subtotals.push(money(subtotal.amount, currency, `${path}.subtotal_set.presentment_money.amount`));
    taxes.push(tax ? money(tax.amount, currency, `${path}.total_tax_set.presentment_money.amount`) : 0);
  }
  return { subtotal: sumMinor(subtotals, 'refund_line_items'), tax: sumMinor(taxes, 'refund_line_items') };
}

/**
 * The fallback refund amount excluding tax, with the refund's lines passed through: the worker
 * computes the net from those against the order's lines kept in the ledger, and uses this amount
 * only for an order the ledger holds no lines of (placed before the connector; issue 19).
 * `subtotal` of a refund line is `price × quantity − discounts` in
 * the order's pricing, so it holds the tax when the order's prices included it, and Shopify's
 * refund payload does not say whether they did. We decide from the refund's own money: when its
 * successful refund transactions add up to exactly Σ subtotal (not Σ subtotal + Σ total_tax), the
 * tax was inside the subtotals and the shop-money Σ total_tax is subtracted. Transactions are in the
 * presentment currency, so on a multi-currency order they are compared with the lines'
 * `presentment_money`, on a single-currency one (or without a currency) with the shop money. In
 * every other case (tax on top, shipping or an arbitrary amount refunded alongside, no transaction,
 * transactions in several currencies) the subtotals are taken as net, which is exact for
 * tax-exclusive shops and, for tax-inclusive ones, errs by the refunded lines' tax.
 */
export function shopifyRefundAmount(
  refund: Refund,
): { amount: number; currency: string; lines: RefundLine[] } | undefined {
  const lines = refund.refund_line_items;
  if (lines.length === 0) return undefined;
  const currency = refundCurrency(refund, lines);
  const parts = lines.map((l, i) => refundLine(l, currency, `refund_line_items.${i}`));
  const subtotal = sumMinor(
    parts.map((p) => p.subtotal),
    'refund_line_items',
  );
  const tax = sumMinor(
    parts.map((p) => p.tax),
    'refund_line_items',
  );
  const paid = (refund.transactions ?? []).flatMap((t, i) =>
    (t.kind ?? 'refund') === 'refund' && (t.status ?? 'success') === 'success'
      ? [
          {
            amount: t.amount,
            currency: t.currency?.toUpperCase() ?? currency,
            field: `transactions.${i}.amount`,
          },
        ]
      : [],
  );
  const paidIn = new Set(paid.map((t) => t.currency));
  let taxesIncluded = false;
  if (tax > 0 && paid.length > 0 && paidIn.size === 1) {
    const [paidCurrency = currency] = paidIn;
    const gross = paidCurrency === currency ? { subtotal, tax } : presentmentTotals(lines, paidCurrency);
    if (gross) {
      const refunded = sumMinor(
        paid.map((t) => money(t.amount, paidCurrency, t.field)),
        'transactions',
      );
      taxesIncluded = refunded === gross.subtotal && refunded !== gross.subtotal + gross.tax;
    }
  }
  const amount = taxesIncluded ? subtotal - tax : subtotal;
  if (amount < 0) {
    throw new BadInputError('refund_line_items: taxes exceed the refunded subtotal', {
      field: 'refund_line_items',
    });
  }
  const refundLines = lines.map((line, i): RefundLine => {
    const id = idOf(line.line_item_id) ?? idOf(line.line_item?.id);
    return {
      ...(id ? { id } : {}),
      quantity: line.quantity,
      amount: Math.max(0, parts[i]!.subtotal),
      tax: Math.max(0, parts[i]!.tax),
    };
  });
  return { amount, currency, lines: refundLines };
}

/**
 * `x-shopify-event-id` is shared by every webhook one shop event triggers (a cancellation with a
 * refund sends orders/cancelled and refunds/create with the same id): the queue's deduplication id
 * adds the event type and refund id to it, so those do not collapse.
 */
function eventIdOf(request: HttpRequest): string {
  return (
    header(request.headers, 'x-shopify-event-id') ??
    header(request.headers, 'x-shopify-webhook-id') ??
    bodySha256(request.rawBody)
  );
}

const ORDER_TOPICS = new Set(['orders/create', 'orders/paid']);
/**
 * Shopify: `x-shopify-hmac-sha256` (base64 HMAC-SHA256 of the raw body), dedup key
 * `x-shopify-event-id` (else `x-shopify-webhook-id`, else a hash of the body). Topics: the
 * configured order topic (`orders/create` by default, or `orders/paid`) → OrderPlaced,
 * `refunds/create` → OrderRefunded, `orders/cancelled` → OrderCancelled; everything else is ignored.
 * The HMAC covers the body, not the topic header, so each topic's schema asks for what only its own
 * payload has (an order: no `order_id`, no `cancelled_at`; a cancellation: `cancelled_at`; a refund:
 * `order_id` and `refund_line_items`): signed bytes resent under another topic are a 400.
 */
export const shopifyAdapter: PlatformAdapter = {
  platform: 'shopify',
  handle(request: HttpRequest, context: AdapterContext): AdapterResult {
    verifyBase64HmacHeader(request, context.secrets, 'x-shopify-hmac-sha256');
    return mapShopify(request, context);
  },
  map: mapShopify,
};

function mapShopify(request: HttpRequest, context: AdapterContext): AdapterResult {
  const topic = requiredHeader(request.headers, 'x-shopify-topic');
  const isOrderTopic = ORDER_TOPICS.has(topic);
  if (isOrderTopic && topic !== context.source.orderTopic) {
    return {
      kind: 'ignored',
      reason: `${topic} is not the configured order topic (${context.source.orderTopic})`,
    };
  }
  if (!isOrderTopic && !(SHOPIFY_OTHER_TOPICS as readonly string[]).includes(topic)) {
    return { kind: 'ignored', reason: `topic ${quoted(topic)} is not handled` };
  }
  const body = parseJsonBody(request.rawBody);
  const eventId = eventIdOf(request);
  const base = {
    eventId,
    source: context.source.id,
    platform: 'shopify',
    receivedAt: context.now.toISOString(),
  } as const;

  if (isOrderTopic) return placed(parsePayload(Order, body), eventId, context);

  if (topic === 'orders/cancelled') {
    const order = parsePayload(CancelledOrder, body);
    const event: ConnectorEventInput = {
      type: 'OrderCancelled',
      ...base,
      externalId: order.id,
      reason: shopReason(order.cancel_reason),
    };
    return mapped([event]);
  }

  const refund = parsePayload(Refund, body);
  const net = shopifyRefundAmount(refund);
  if (!net) {
    return {
      kind: 'ignored',
      reason: `refund ${quoted(refund.id)} refunds no line items (shipping or amount only): the commission base is unchanged`,
    };
  }
  const event: ConnectorEventInput = {
    type: 'OrderRefunded',
    ...base,
    externalId: refund.order_id,
    refundId: refund.id,
    amount: net.amount,
    currency: net.currency,
    reason: shopReason(refund.note),
    origin: 'shop',
    ...refundLines(net.lines),
  };
  return mapped([event]);
}

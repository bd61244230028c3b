import * as z from 'zod/mini';
import {
  type BasisLine,
  type ConnectorEventInput,
  connectorRefundId,
  type RefundBasis,
} from '../domain/events.ts';
import { quoted } from '../domain/text.ts';
import { BadInputError } from '../errors.ts';
import type { HttpRequest } from '../http/types.ts';
import { parseJsonBody } from '../json.ts';
import { currencyExponent, multiplyMinor, prorateMinor } from '../money.ts';
import { attributeIp, extractAttribution, recordEntries } from './attribution.ts';
import {
  CurrencyCode,
  mapped,
  optionalBasis,
  parsePayload,
  refundBasis,
  unique,
  unixToIso,
} from './mapping.ts';
import { verifyStripeSignature } from './signature.ts';
import type { StripeEventType } from './topics.ts';
import type { AdapterContext, AdapterResult, PlatformAdapter } from './types.ts';

/**
 * Stripe webhooks: the event envelope (`id`, `type`, `data.object`), signed with
 * `Stripe-Signature`. Amounts are integers of Stripe's smallest unit, which is the ISO 4217 minor
 * unit for every currency but the few in `STRIPE_EXPONENT`; those are converted.
 *
 * The order key (externalId) must be the same on the checkout and on its refunds, and a refund
 * only carries the PaymentIntent: so it is `metadata.order_id` when set (on the session, and then
 * on the refund or its charge), else the PaymentIntent id, else (sessions with no PaymentIntent)
 * the session id.
 */

const Metadata = z.nullish(z.record(z.string(), z.unknown()));
/** An id field that Stripe may expand into an object. */
const Ref = z.pipe(
  z.nullish(
    z.union([z.string().check(z.minLength(1)), z.looseObject({ id: z.string().check(z.minLength(1)) })]),
  ),
  z.transform((v) => (typeof v === 'string' ? v : v?.id)),
);

const Envelope = z.looseObject({
  id: z.string().check(z.minLength(1)),
  type: z.string().check(z.minLength(1)),
  data: z.looseObject({ object: z.looseObject({}) }),
});

const Session = z.looseObject({
  id: z.string().check(z.minLength(1)),
  mode: z.nullish(z.string()),
  payment_status: z.string(),
  amount_total: z.number().check(z.int(), z.nonnegative()),
  currency: CurrencyCode,
  total_details: z.nullish(
    z.looseObject({
      amount_tax: z.nullish(z.number().check(z.int(), z.nonnegative())),
      amount_shipping: z.nullish(z.number().check(z.int(), z.nonnegative())),
    }),
  ),
  metadata: Metadata,
  payment_intent: Ref,
  customer: Ref,
  payment_method_types: z.nullish(z.array(z.string())),
  created: z.nullish(z.number().check(z.int())),
  /** Only when the sender expanded it (Stripe's own webhooks never do): read for refunds only, leniently. */
  line_items: z.optional(z.unknown()),
});
type Session = z.infer<typeof Session>;

const Refund = z.looseObject({
  id: z.string().check(z.minLength(1)),
  amount: z.number().check(z.int(), z.nonnegative()),
  currency: CurrencyCode,
  status: z.nullish(z.string()),
  reason: z.nullish(z.string()),
  metadata: Metadata,
  payment_intent: Ref,
});

const Charge = z.looseObject({
  id: z.string().check(z.minLength(1)),
  currency: CurrencyCode,
  refunded: z.boolean(),
  metadata: Metadata,
  payment_intent: Ref,
  refunds: z.nullish(z.looseObject({ data: z.array(z.partial(Refund, { currency: true })) })),
});

/**
 * Decimals of Stripe's unit where they differ from ISO 4217 (`currencyExponent`), per Stripe's
 * currency guide. ISK has none in ISO 4217, but Stripe keeps it two-decimal for backwards
 * compatibility and requires multiples of 100 (5 ISK is 500). MGA is zero-decimal at Stripe but has
 * 2 decimals in ISO 4217. UGX is zero-decimal in both (Stripe's zero-decimal list), so it is not
 * here. (HUF and TWD are special at Stripe for payouts only.)
 */
const STRIPE_EXPONENT: Readonly<Record<string, number>> = { ISK: 2, MGA: 0 };

/**
 * A Stripe amount in ISO 4217 minor units of `currency`. A division rounds half away from zero,
 * which only matters for fractional ISK charged before Stripe required whole krónur.
 */
function fromStripeUnits(amount: number, currency: string, field: string): number {
  const shift = (STRIPE_EXPONENT[currency] ?? currencyExponent(currency)) - currencyExponent(currency);
  if (shift > 0) return prorateMinor(amount, 1, 10 ** shift, field);
  if (shift < 0) return multiplyMinor(amount, 10 ** -shift, field);
  return amount;
}

/** Metadata keys read as voucher codes (Checkout's own discounts are ids, not codes). */
const VOUCHER_KEYS = ['voucher', 'coupon', 'promotion_code'];

function orderIdOf(metadata: Readonly<Record<string, unknown>> | null | undefined): string | undefined {
  const value = metadata?.['order_id'];
  return typeof value === 'string' && value.trim() ? value.trim() : undefined;
}

/**
 * What a partial refund needs to be turned net (shared/worker/refund-net.ts): the session's line items
 * with their tax, when it lists them all and they carry tax; without tax a refund is taken as given.
 * Each line's net is `amount_total − amount_tax` (after discounts, in both tax behaviours).
 */
const LineItems = z.nullish(
  z.looseObject({
    has_more: z.nullish(z.boolean()),
    data: z.array(
      z.looseObject({
        id: z.string().check(z.minLength(1)),
        quantity: z.nullish(z.number().check(z.int())),
        amount_total: z.number().check(z.int()),
        amount_tax: z.nullish(z.number().check(z.int())),
      }),
    ),
  }),
);

function stripeRefundBasis(session: Session, amount: number): RefundBasis | undefined {
  const items = parsePayload(LineItems, session.line_items, 'data.object.line_items');
  if (!items || items.has_more || items.data.length === 0) return undefined;
  const c = session.currency;
  const lines: BasisLine[] = [];
  for (const [i, item] of items.data.entries()) {
    const tax = item.amount_tax ?? 0;
    if (!item.quantity || item.quantity < 0 || tax < 0 || item.amount_total < tax) return undefined;
    const field = `data.object.line_items.data.${i}.amount_total`;
    lines.push({
      id: item.id,
      net: fromStripeUnits(item.amount_total - tax, c, field),
      tax: fromStripeUnits(tax, c, field),
      quantity: item.quantity,
    });
  }
  const basis = refundBasis(lines, {
    taxesIncluded: false,
    shipping: fromStripeUnits(session.total_details?.amount_shipping ?? 0, c, 'data.object.total_details'),
  });
  return basis.tax > 0 && basis.net === amount ? basis : undefined;
}

function sessionPlaced(object: unknown, eventId: string, context: AdapterContext): AdapterResult {
  const session = parsePayload(Session, object, 'data.object');
  const tax = session.total_details?.amount_tax ?? 0;
  const shipping = session.total_details?.amount_shipping ?? 0;
  const amount = session.amount_total - tax - shipping;
  if (amount < 0) {
    throw new BadInputError('data.object.amount_total: smaller than its tax and shipping', {
      field: 'data.object.amount_total',
    });
  }
  const entries = recordEntries(session.metadata, 'data.object.metadata');
  // Shops copy the landing URL's aecid or a cookie, both the buyer's, into the metadata unchecked.
  const { attribution, skippedFields } = extractAttribution(entries, context.source, 'skip');
  const vouchers = entries
    .filter((e) => VOUCHER_KEYS.includes(e.name.toLowerCase()) && typeof e.value === 'string')
    .map((e) => e.value as string);
  const event: ConnectorEventInput = {
    type: 'OrderPlaced',
    eventId,
    source: context.source.id,
    platform: 'stripe',
    externalId: orderIdOf(session.metadata) ?? session.payment_intent ?? session.id,
    receivedAt: context.now.toISOString(),
    amount: fromStripeUnits(amount, session.currency, 'data.object.amount_total'),
    currency: session.currency,
    basis: optionalBasis(() =>
      stripeRefundBasis(session, fromStripeUnits(amount, session.currency, 'data.object.amount_total')),
    ),
    customerId: session.customer,
    vouchers: unique(vouchers),
    ...attribution,
    buyerIp: attributeIp(entries),
    paymentMethod: session.payment_method_types?.[0] || undefined,
    orderDate: unixToIso(session.created),
  };
  return mapped([event], skippedFields);
}

/** The fields of a refund read here, whether from refund.created or a charge's `refunds.data`. */
interface RefundFields {
  readonly id: string;
  readonly amount: number;
  readonly currency?: string | undefined;
  readonly reason?: string | null | undefined;
  readonly metadata?: Readonly<Record<string, unknown>> | null | undefined;
  readonly payment_intent?: string | undefined;
}

/** What the refunded charge adds when the refund comes listed in charge.refunded. */
interface ChargeFields {
  readonly currency: string;
  readonly orderId?: string | undefined;
  readonly paymentIntent?: string | undefined;
}

/**
 * The refund's own `metadata.order_id`, then its charge's, then the PaymentIntent: the order id
 * comes first wherever it is set, or a listed refund would be keyed apart from the full refund of
 * the same charge (every real refund carries its PaymentIntent).
 */
function refunded(
  refund: RefundFields,
  charge: ChargeFields,
  eventId: string,
  amountField: string,
  context: AdapterContext,
): ConnectorEventInput | undefined {
  const externalId =
    orderIdOf(refund.metadata) ?? charge.orderId ?? refund.payment_intent ?? charge.paymentIntent;
  if (!externalId) return undefined;
  const currency = refund.currency ?? charge.currency;
  return {
    type: 'OrderRefunded',
    eventId,
    source: context.source.id,
    platform: 'stripe',
    externalId,
    receivedAt: context.now.toISOString(),
    refundId: refund.id,
    // Stripe refunds include tax and name no line: taken as given, unless the worker holds the
    // session's lines with tax (then turned net against them, shared/worker/refund-net.ts).
    amount: fromStripeUnits(refund.amount, currency, amountField),
    gross: fromStripeUnits(refund.amount, currency, amountField),
    currency,
    reason: refund.reason ?? undefined,
    origin: 'shop',
  };
}

const FAILED_REFUND = new Set(['failed', 'canceled']);

function refundCreated(object: unknown, eventId: string, context: AdapterContext): AdapterResult {
  const refund = parsePayload(Refund, object, 'data.object');
  if (refund.status && FAILED_REFUND.has(refund.status)) {
    return { kind: 'ignored', reason: `refund ${quoted(refund.id)} is ${refund.status}` };
  }
  const event = refunded(refund, { currency: refund.currency }, eventId, 'data.object.amount', context);
  if (!event) {
    return {
      kind: 'ignored',
      reason: `refund ${quoted(refund.id)} has neither metadata.order_id nor a payment_intent: not from a Checkout order`,
    };
  }
  return mapped([event]);
}

function chargeRefunded(object: unknown, eventId: string, context: AdapterContext): AdapterResult {
  const charge = parsePayload(Charge, object, 'data.object');
  const orderId = orderIdOf(charge.metadata);
  const externalId = orderId ?? charge.payment_intent;
  if (!externalId) {
    return {
      kind: 'ignored',
      reason: `charge ${quoted(charge.id)} has neither metadata.order_id nor a payment_intent`,
    };
  }
  const base = {
    source: context.source.id,
    platform: 'stripe',
    externalId,
    receivedAt: context.now.toISOString(),
  } as const;
  if (charge.refunded) {
    const event: ConnectorEventInput = {
      type: 'OrderRefunded',
      ...base,
      eventId,
      refundId: connectorRefundId(`full:${charge.id}`),
      full: true,
      currency: charge.currency,
      origin: 'shop',
    };
    return mapped([event]);
  }
  const list = (charge.refunds?.data ?? []).flatMap((refund, i) =>
    refund.status && FAILED_REFUND.has(refund.status) ? [] : [{ refund, i }],
  );
  if (list.length === 0) {
    return {
      kind: 'ignored',
      reason: `charge ${quoted(charge.id)} is partly refunded but lists no refunds: each is counted from its refund.created`,
    };
  }
  const events = list.flatMap(({ refund, i }) => {
    const event = refunded(
      refund,
      { currency: charge.currency, orderId, paymentIntent: charge.payment_intent },
      `${eventId}:${refund.id}`,
      `data.object.refunds.data.${i}.amount`,
      context,
    );
    return event ? [event] : [];
  });
  return mapped(events);
}

/**
 * The Stripe object each handled event type carries (`data.object.object`). The adapter reads only
 * the fields it needs, and a charge has every field a refund is read by: without this check a
 * charge sent as `refund.created` would refund the whole charge.
 */
const OBJECT_OF: Readonly<Record<StripeEventType, string>> = {
  'checkout.session.completed': 'checkout.session',
  'checkout.session.async_payment_succeeded': 'checkout.session',
  'refund.created': 'refund',
  'charge.refunded': 'charge',
};

/** @throws BadInputError naming `data.object.object` when the object is not the one `type` carries */
function checkObjectType(type: string, object: Readonly<Record<string, unknown>>): void {
  // Own keys only: a type such as `constructor` would otherwise find Object's members and be refused.
  if (!Object.hasOwn(OBJECT_OF, type)) return;
  const expected = OBJECT_OF[type as StripeEventType];
  if (object['object'] === expected) return;
  const actual = typeof object['object'] === 'string' ? quoted(object['object'], 40) : 'missing';
  throw new BadInputError(`data.object.object: a ${type} event carries a ${expected}, this one a ${actual}`, {
    field: 'data.object.object',
  });
}

/** Checkout payment states that mean the money is there (or none was due). */
const PAID = new Set(['paid', 'no_payment_required']);

/**
 * Stripe: `Stripe-Signature` (`t=…,v1=…`, tolerance `SourceConfig.toleranceSeconds`), dedup key
 * the event id (suffixed with the refund id when one charge.refunded yields several events).
 * `checkout.session.completed` (when paid) and `checkout.session.async_payment_succeeded` →
 * OrderPlaced; `refund.created` → OrderRefunded; `charge.refunded` → a full OrderRefunded when the
 * charge is wholly refunded, else one per listed refund (their ids match refund.created's). The
 * object must be the one the type carries (`OBJECT_OF`).
 */
export const stripeAdapter: PlatformAdapter = {
  platform: 'stripe',
  handle(request: HttpRequest, context: AdapterContext): AdapterResult {
    verifyStripeSignature(request.rawBody, request.headers['stripe-signature'], context.secrets, {
      now: context.now,
      toleranceSeconds: context.source.toleranceSeconds,
    });
    return mapStripe(request, context);
  },
  map: mapStripe,
};

function mapStripe(request: HttpRequest, context: AdapterContext): AdapterResult {
  const envelope = parsePayload(Envelope, parseJsonBody(request.rawBody));
  const object = envelope.data.object;
  checkObjectType(envelope.type, object);
  switch (envelope.type) {
    case 'checkout.session.completed': {
      if (object['mode'] === 'setup')
        return { kind: 'ignored', reason: 'setup-mode checkout session: no sale' };
      const status = object['payment_status'];
      if (typeof status === 'string' && !PAID.has(status)) {
        return {
          kind: 'ignored',
          reason: `checkout session payment_status ${quoted(status)}: checkout.session.async_payment_succeeded follows`,
        };
      }
      return sessionPlaced(object, envelope.id, context);
    }
    case 'checkout.session.async_payment_succeeded':
      return sessionPlaced(object, envelope.id, context);
    case 'refund.created':
      return refundCreated(object, envelope.id, context);
    case 'charge.refunded':
      return chargeRefunded(object, envelope.id, context);
    default:
      return { kind: 'ignored', reason: `event type ${quoted(envelope.type)} is not handled` };
  }
}

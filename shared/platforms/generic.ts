import * as z from 'zod/mini';
import { type ConnectorEventInput, ExternalRefundId } from '../domain/events.ts';
import { BadInputError } from '../errors.ts';
import type { HttpRequest } from '../http/types.ts';
import { parseJsonBody } from '../json.ts';
import { extractAttribution, nameValueEntries } from './attribution.ts';
import {
  absentField,
  bodySha256,
  CurrencyCode,
  IdString,
  mapped,
  money,
  parsePayload,
  unique,
} from './mapping.ts';
import { verifyGenericSignature } from './signature.ts';
import type { AdapterContext, AdapterResult, PlatformAdapter } from './types.ts';

/**
 * The Generic platform: a small JSON schema that any shop module (PrestaShop, Magento, a custom
 * shop) can post, documented in the README. The module computes the amount (excluding tax and
 * shipping, after discounts) and sends it as a decimal string in the order currency; ids are
 * strings (or integers). Unknown keys are ignored so a newer module can talk to an older connector.
 */

const Amount = z.string().check(z.minLength(1, 'must be a decimal string such as "49.90"'));
const TrackingId = z.optional(z.union([z.number(), z.string()]));
/**
 * ISO 8601 with its offset: a date without one (`2026-05-01T10:00:00`) would be read in the zone
 * the connector runs in, moving the accept date and the date sent to the platform by hours. The
 * event's own check (`mapped`) then bounds the year.
 */
const OrderDate = z.iso.datetime({
  offset: true,
  error: 'must be an ISO 8601 date and time with an offset such as Z or +02:00',
});

const common = {
  eventId: z.optional(z.string().check(z.trim(), z.minLength(1), z.maxLength(256))),
  orderId: IdString,
};

/**
 * `type` is signed with the body, but a module that sets the wrong one (a partial refund sent as
 * `cancel`) would refuse the whole conversion: a field of another type is a 400 naming it.
 */
const REFUND_ONLY = absentField('a refund field: send it with type "refund"');
const NO_AMOUNT = absentField('a cancellation has no amount: send a refund with type "refund"');

const OrderBody = z.looseObject({
  type: z.literal('order'),
  ...common,
  refundId: REFUND_ONLY,
  amount: Amount,
  currency: CurrencyCode,
  orderDate: z.optional(OrderDate),
  customerId: z.optional(IdString),
  vouchers: z.optional(z.array(z.string())),
  clickIds: z.optional(z.array(z.string())),
  buyerIp: z.optional(z.string()),
  productIds: z.optional(z.array(IdString)),
  paymentMethod: z.optional(z.string()),
  affiliateTrackingId: TrackingId,
  subId: z.optional(z.string()),
  attributes: z.optional(z.array(z.unknown())),
});
type OrderBody = z.infer<typeof OrderBody>;

const RefundBody = z.looseObject({
  type: z.literal('refund'),
  ...common,
  refundId: z.pipe(IdString, ExternalRefundId),
  amount: z.optional(Amount),
  currency: z.optional(CurrencyCode),
  full: z.optional(z.boolean()),
  reason: z.optional(z.string().check(z.maxLength(500))),
});

const CancelBody = z.looseObject({
  type: z.literal('cancel'),
  ...common,
  refundId: REFUND_ONLY,
  full: REFUND_ONLY,
  amount: NO_AMOUNT,
  reason: z.optional(z.string().check(z.maxLength(500))),
});

const Body = z.discriminatedUnion('type', [OrderBody, RefundBody, CancelBody]);

function trackingIdOf(value: OrderBody['affiliateTrackingId']): number | undefined {
  if (value === undefined || value === '') return undefined;
  const id =
    typeof value === 'number' ? value : /^[0-9]{1,16}$/.test(value) ? Number.parseInt(value, 10) : Number.NaN;
  if (!Number.isSafeInteger(id) || id <= 0) {
    throw new BadInputError('affiliateTrackingId: must be a positive integer', {
      field: 'affiliateTrackingId',
    });
  }
  return id;
}

function orderEvent(body: OrderBody, eventId: string, context: AdapterContext): ConnectorEventInput {
  // The module's own code writes these and sees the 400 when it posts: an invalid value is its to fix.
  const { attribution: fromAttributes } = extractAttribution(
    nameValueEntries(body.attributes, 'attributes'),
    context.source,
    'reject',
  );
  const affiliateTrackingId = trackingIdOf(body.affiliateTrackingId) ?? fromAttributes.affiliateTrackingId;
  return {
    type: 'OrderPlaced',
    eventId,
    source: context.source.id,
    platform: 'generic',
    externalId: body.orderId,
    receivedAt: context.now.toISOString(),
    amount: money(body.amount, body.currency, 'amount'),
    currency: body.currency,
    customerId: body.customerId,
    vouchers: unique(body.vouchers ?? []),
    clickIds: unique([...(body.clickIds ?? []), ...fromAttributes.clickIds]),
    buyerIp: body.buyerIp?.trim() || undefined,
    productIds: unique(body.productIds ?? []),
    paymentMethod: body.paymentMethod || undefined,
    orderDate: body.orderDate,
    affiliateTrackingId,
    subId: body.subId ?? fromAttributes.subId,
  };
}

/**
 * Generic: `x-connector-signature: sha256=<hex>` over `<x-connector-timestamp>.<raw body>`
 * (tolerance `SourceConfig.toleranceSeconds`, 300 s by default). `type` `order` → OrderPlaced,
 * `refund` → OrderRefunded, `cancel` → OrderCancelled. Dedup key: the body's `eventId`, else a
 * sha256 of the raw body.
 */
export const genericAdapter: PlatformAdapter = {
  platform: 'generic',
  handle(request: HttpRequest, context: AdapterContext): AdapterResult {
    verifyGenericSignature(request.rawBody, request.headers, context.secrets, {
      now: context.now,
      toleranceSeconds: context.source.toleranceSeconds,
    });
    return mapGeneric(request, context);
  },
  map: mapGeneric,
};

function mapGeneric(request: HttpRequest, context: AdapterContext): AdapterResult {
  const body = parsePayload(Body, parseJsonBody(request.rawBody));
  const eventId = body.eventId ?? bodySha256(request.rawBody);
  const base = {
    eventId,
    source: context.source.id,
    platform: 'generic',
    externalId: body.orderId,
    receivedAt: context.now.toISOString(),
  } as const;
  let event: ConnectorEventInput;
  switch (body.type) {
    case 'order':
      event = orderEvent(body, eventId, context);
      break;
    case 'cancel':
      event = { type: 'OrderCancelled', ...base, reason: body.reason };
      break;
    case 'refund': {
      const full = body.full === true;
      if (!full && body.amount === undefined) {
        throw new BadInputError('amount: required unless full is true', { field: 'amount' });
      }
      if (!full && body.currency === undefined) {
        throw new BadInputError('currency: required with amount', { field: 'currency' });
      }
      event = {
        type: 'OrderRefunded',
        ...base,
        refundId: body.refundId,
        full,
        // A full refund needs no amount: the worker takes the conversion's whole amount.
        ...(full ? {} : { amount: money(body.amount!, body.currency!, 'amount'), currency: body.currency }),
        reason: body.reason,
        origin: 'shop',
      };
      break;
    }
  }
  return mapped([event]);
}

import * as z from 'zod/mini';
import { HexId } from '../domain/ids.ts';
import { Currency, idText } from '../domain/limits.ts';

/**
 * Request rules of the platform's current API (4.93), written once and used by both the client
 * (validated before anything leaves the process) and the sandbox (which answers 400 naming the
 * field). Field names follow the spec's tables.
 */

/**
 * The spec's `Currency` list is out of date (no VES, SLE, ZWG, MRU…): the connector uses the ISO
 * 4217 list of `shared/domain/limits.ts`, the same one the events are checked against at the door.
 */
export { CURRENCIES, Currency } from '../domain/limits.ts';

export const Cents = z
  .number()
  .check(
    z.multipleOf(1, 'must be an integer count of cents'),
    z.nonnegative(),
    z.maximum(Number.MAX_SAFE_INTEGER),
  );
/** Datetime values sent: UTC, `YYYY-MM-DDTHH:mm:ss.sssZ`. */
export const ApiDate = z
  .string()
  .check(z.regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'must be YYYY-MM-DDTHH:mm:ss.sssZ (UTC)'));
export const Ip = z.union([z.ipv4(), z.ipv6()], { error: 'must be an IPv4 or IPv6 address' });
const Reason = z.string().check(z.trim(), z.minLength(1, 'must not be empty'), z.maxLength(1000));

const conversionCommon = {
  program: HexId,
  rule: HexId,
  externalId: idText(),
  amount: z.optional(Cents),
  paymentMethod: z.optional(idText()),
  customerId: z.optional(idText()),
  date: z.optional(ApiDate),
  subId: z.optional(z.union([idText(), z.literal('')])),
  voucher: z.optional(z.union([idText(), z.literal('')])),
  currency: z.optional(Currency),
  product: z.optional(z.array(idText())),
  notify: z.optional(z.boolean()),
};

/** Conversion Add in tracking mode: `cids` and `ip` are required, and only allowed here. */
export const TrackingConversion = z.strictObject({
  kind: z.literal('tracking'),
  ...conversionCommon,
  cids: z.array(HexId).check(z.minLength(1, 'at least one click id is required in tracking mode')),
  ip: Ip,
});
/** Conversion Add in bonus mode (deprecated by the platform in favour of commission adjustments). */
export const BonusConversion = z.strictObject({
  kind: z.literal('bonus'),
  ...conversionCommon,
  partnership: HexId,
  bonus: Cents,
});
/** Conversion Add in manual mode: the affiliate is named by its tracking id. */
export const ManualConversion = z.strictObject({
  kind: z.literal('manual'),
  ...conversionCommon,
  affiliateTrackingId: z.int().check(z.positive()),
});
export const ConversionAddBody = z.discriminatedUnion('kind', [
  TrackingConversion,
  BonusConversion,
  ManualConversion,
]);
export type ConversionAddBody = z.infer<typeof ConversionAddBody>;

export const ConversionRefuseBody = z.strictObject({
  program: HexId,
  id: HexId,
  reason: Reason,
  notify: z.optional(z.boolean()),
});
export type ConversionRefuseBody = z.infer<typeof ConversionRefuseBody>;

export const ConversionAcceptBody = z.strictObject({ program: HexId, id: HexId });
export type ConversionAcceptBody = z.infer<typeof ConversionAcceptBody>;

/** Update conversion amount: the spec lists no `program`, only the conversion id. */
export const ConversionUpdateBody = z.strictObject({ id: HexId, amount: Cents, reason: Reason });
export type ConversionUpdateBody = z.infer<typeof ConversionUpdateBody>;

export const ConversionInfoQuery = z
  .strictObject({
    program: HexId,
    externalId: z.optional(z.string().check(z.minLength(1))),
    customerId: z.optional(z.string().check(z.minLength(1))),
  })
  .check(
    z.refine((q) => q.externalId !== undefined || q.customerId !== undefined, {
      message: 'externalId or customerId is required',
      path: ['externalId'],
    }),
  );
export type ConversionInfoQuery = z.infer<typeof ConversionInfoQuery>;

export const ConversionStatus = z.enum(['pending', 'accepted', 'refused']);
export type ConversionStatus = z.infer<typeof ConversionStatus>;

const boolParam = z.union([
  z.boolean(),
  z.pipe(
    z.enum(['true', 'false']),
    z.transform((v) => v === 'true'),
  ),
]);
const intParam = (max: number) => z.pipe(z.coerce.number(), z.int().check(z.minimum(0), z.maximum(max)));

export const ConversionsListQuery = z.strictObject({
  orderBy: z.optional(z.enum(['externalId', 'createdAt', 'amount', 'commissions'])),
  sort: z.optional(z.enum(['asc', 'desc'])),
  limit: z.optional(intParam(10_000)),
  offset: z.optional(intParam(Number.MAX_SAFE_INTEGER)),
  from: z.optional(z.string().check(z.minLength(1))),
  to: z.optional(z.string().check(z.minLength(1))),
  program: z.optional(HexId),
  rule: z.optional(HexId),
  partnership: z.optional(HexId),
  status: z.optional(ConversionStatus),
  locked: z.optional(boolParam),
  externalId: z.optional(z.string().check(z.minLength(1))),
  customerId: z.optional(z.string().check(z.minLength(1))),
  subId: z.optional(z.string()),
});
export type ConversionsListQuery = z.input<typeof ConversionsListQuery>;

export const CommissionAdjustmentAddBody = z.strictObject({
  type: z.enum(['bonus', 'fixed_fees']),
  program: HexId,
  partnership: HexId,
  identifier: z.string().check(z.minLength(1), z.maxLength(256)),
  commission: Cents,
  comment: z.optional(z.string().check(z.maxLength(1000))),
  currency: z.optional(Currency),
  date: z.optional(ApiDate),
  status: z.optional(z.enum(['accepted', 'pending'])),
});
export type CommissionAdjustmentAddBody = z.infer<typeof CommissionAdjustmentAddBody>;

/** A conversion as the platform returns it (fields from NOTES.md; everything else passes through). */
export const Conversion = z.looseObject({
  id: HexId,
  program: z.optional(z.string()),
  rule: z.optional(z.string()),
  externalId: z.string(),
  amount: z.optional(z.number()),
  currency: z.optional(z.string()),
  status: z.union([ConversionStatus, z.string()]),
  refuseReason: z.nullish(z.string()),
  isLocked: z.optional(z.boolean()),
  lockedAt: z.nullish(z.string()),
  /**
   * The conversion's commission in cents. The field is not documented (the list orders by
   * `commissions`); the sandbox answers `commission`. Read only for late refunds.
   */
  commission: z.optional(z.number()),
  customerId: z.nullish(z.string()),
  subId: z.nullish(z.string()),
  createdAt: z.optional(z.string()),
});
export type Conversion = z.infer<typeof Conversion>;

export const AdvertiserInfo = z.looseObject({
  id: z.string(),
  programs: z._default(
    z.array(
      z.looseObject({ id: z.string(), rules: z._default(z.array(z.looseObject({ id: z.string() })), []) }),
    ),
    [],
  ),
});
export type AdvertiserInfo = z.infer<typeof AdvertiserInfo>;

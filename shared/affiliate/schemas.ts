import * as z from 'zod';
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
  .int('must be an integer count of cents')
  .nonnegative()
  .max(Number.MAX_SAFE_INTEGER);
/** Datetime values sent: UTC, `YYYY-MM-DDTHH:mm:ss.sssZ`. */
export const ApiDate = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'must be YYYY-MM-DDTHH:mm:ss.sssZ (UTC)');
export const Ip = z.union([z.ipv4(), z.ipv6()], { error: 'must be an IPv4 or IPv6 address' });
const Reason = z.string().trim().min(1, 'must not be empty').max(1000);

const conversionCommon = {
  program: HexId,
  rule: HexId,
  externalId: idText(),
  amount: Cents.optional(),
  paymentMethod: idText().optional(),
  customerId: idText().optional(),
  date: ApiDate.optional(),
  subId: idText().or(z.literal('')).optional(),
  voucher: idText().or(z.literal('')).optional(),
  currency: Currency.optional(),
  product: z.array(idText()).optional(),
  notify: z.boolean().optional(),
};

/** Conversion Add in tracking mode: `cids` and `ip` are required, and only allowed here. */
export const TrackingConversion = z.strictObject({
  kind: z.literal('tracking'),
  ...conversionCommon,
  cids: z.array(HexId).min(1, 'at least one click id is required in tracking mode'),
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
  affiliateTrackingId: z.number().int().positive(),
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
  notify: z.boolean().optional(),
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
    externalId: z.string().min(1).optional(),
    customerId: z.string().min(1).optional(),
  })
  .refine((q) => q.externalId !== undefined || q.customerId !== undefined, {
    message: 'externalId or customerId is required',
    path: ['externalId'],
  });
export type ConversionInfoQuery = z.infer<typeof ConversionInfoQuery>;

export const ConversionStatus = z.enum(['pending', 'accepted', 'refused']);
export type ConversionStatus = z.infer<typeof ConversionStatus>;

const boolParam = z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]);
const intParam = (max: number) => z.coerce.number().int().min(0).max(max);

export const ConversionsListQuery = z.strictObject({
  orderBy: z.enum(['externalId', 'createdAt', 'amount', 'commissions']).optional(),
  sort: z.enum(['asc', 'desc']).optional(),
  limit: intParam(10_000).optional(),
  offset: intParam(Number.MAX_SAFE_INTEGER).optional(),
  from: z.string().min(1).optional(),
  to: z.string().min(1).optional(),
  program: HexId.optional(),
  rule: HexId.optional(),
  partnership: HexId.optional(),
  status: ConversionStatus.optional(),
  locked: boolParam.optional(),
  externalId: z.string().min(1).optional(),
  customerId: z.string().min(1).optional(),
  subId: z.string().optional(),
});
export type ConversionsListQuery = z.input<typeof ConversionsListQuery>;

export const CommissionAdjustmentAddBody = z.strictObject({
  type: z.enum(['bonus', 'fixed_fees']),
  program: HexId,
  partnership: HexId,
  identifier: z.string().min(1).max(256),
  commission: Cents,
  comment: z.string().max(1000).optional(),
  currency: Currency.optional(),
  date: ApiDate.optional(),
  status: z.enum(['accepted', 'pending']).optional(),
});
export type CommissionAdjustmentAddBody = z.infer<typeof CommissionAdjustmentAddBody>;

/** A conversion as the platform returns it (fields from NOTES.md; everything else passes through). */
export const Conversion = z.looseObject({
  id: HexId,
  program: z.string().optional(),
  rule: z.string().optional(),
  externalId: z.string(),
  amount: z.number().optional(),
  currency: z.string().optional(),
  status: ConversionStatus.or(z.string()),
  refuseReason: z.string().nullish(),
  isLocked: z.boolean().optional(),
  lockedAt: z.string().nullish(),
  customerId: z.string().nullish(),
  subId: z.string().nullish(),
  createdAt: z.string().optional(),
});
export type Conversion = z.infer<typeof Conversion>;

export const AdvertiserInfo = z.looseObject({
  id: z.string(),
  programs: z
    .array(z.looseObject({ id: z.string(), rules: z.array(z.looseObject({ id: z.string() })).default([]) }))
    .default([]),
});
export type AdvertiserInfo = z.infer<typeof AdvertiserInfo>;

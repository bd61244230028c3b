import * as z from 'zod/mini';

/**
 * Zod rules of the legacy 2.0 interface (`/2.0/…`, HTTP Basic), shared by `LegacyClient` (checks
 * what it sends, reads what it gets) and the sandbox (checks what it receives). Amounts on this
 * interface are floats of major units; the connector converts at `LegacyBackend` only.
 *
 * Queries arrive at the sandbox as strings and leave the client as numbers: the integer and 0|1
 * rules below accept both, and give numbers.
 */

/** An integer in [min, max] given as a number or as the digits of a query string. */
function intParam(min: number, max: number) {
  return z.pipe(
    z.union([
      z.number(),
      z.pipe(z.string().check(z.regex(/^-?\d+$/, 'must be an integer')), z.transform(Number)),
    ]),
    z
      .int('must be an integer')
      .check(z.minimum(min, `must be at least ${min}`), z.maximum(max, `must be at most ${max}`)),
  );
}

/** 0 or 1 (the interface's booleans), as a number or a query string. */
const Flag = intParam(0, 1);
/** Timestamps: the interface does not document their format; anything `Date.parse` reads. */
const Timestamp = z.string().check(z.refine((s) => !Number.isNaN(Date.parse(s)), 'must be a date'));

/** Largest `limit` of a list route. */
export const LEGACY_MAX_LIMIT = 100;
/** Largest partnership `weight` (split commission sharing). */
export const LEGACY_MAX_WEIGHT = 12;

/** Paging of every list route: `skip`, `limit` 0..100 (default 20), `orderBy` asc|desc, `count` 0|1. */
export const LegacyPaging = {
  skip: z.optional(intParam(0, Number.MAX_SAFE_INTEGER)),
  limit: z.optional(intParam(0, LEGACY_MAX_LIMIT)),
  orderBy: z.optional(z.enum(['asc', 'desc'])),
  count: z.optional(Flag),
};

/** Query of `GET /2.0/advertiser/{programId}/conversions`. */
export const LegacyConversionsQuery = z.strictObject({
  ...LegacyPaging,
  identifier: z.optional(z.string().check(z.minLength(1))),
  partnershipId: z.optional(z.string().check(z.minLength(1))),
  isPending: z.optional(Flag),
  isLocked: z.optional(Flag),
  isRefused: z.optional(Flag),
  dateFrom: z.optional(Timestamp),
  dateTo: z.optional(Timestamp),
});
export type LegacyConversionsQuery = z.input<typeof LegacyConversionsQuery>;

/** Query of `GET /2.0/advertiser/{programId}/partnerships`. */
export const LegacyPartnershipsQuery = z.strictObject({
  ...LegacyPaging,
  partnershipId: z.optional(z.string().check(z.minLength(1))),
  trackingId: z.optional(intParam(0, Number.MAX_SAFE_INTEGER)),
});
export type LegacyPartnershipsQuery = z.input<typeof LegacyPartnershipsQuery>;

/** A float of major units, finite (zod numbers are) and not negative (`amount` may be `0`). */
const Float = z.number().check(z.nonnegative('must not be negative'));

/** Body of `POST /2.0/advertiser/{programId}/conversions/add`. */
export const LegacyConversionAddBody = z.strictObject({
  identifier: z.string().check(z.minLength(1), z.maxLength(256)),
  partnership_id: z.string().check(z.minLength(1)),
  amount: Float,
  commission: Float,
  rule_id: z.string().check(z.minLength(1)),
  custom_var: z.optional(z.nullable(z.string())),
});
export type LegacyConversionAddBody = z.infer<typeof LegacyConversionAddBody>;

/** Body of `POST /2.0/advertiser/{programId}/conversions/{conversionId}/refuse`. */
export const LegacyRefuseBody = z.strictObject({
  refuse_reason: z.string().check(z.minLength(1), z.maxLength(500)),
});
export type LegacyRefuseBody = z.infer<typeof LegacyRefuseBody>;

/** Answer of the action routes (accept, refuse, add): `code` only on add routes. */
export const LegacyActionResult = z.looseObject({
  status: z.enum(['done', 'aborted', 'failed']),
  message: z._default(z.string(), ''),
  code: z.optional(z.int()),
});
export type LegacyActionResult = z.infer<typeof LegacyActionResult>;

const Nullable = <T extends z.ZodMiniType>(schema: T) => z.optional(z.nullable(schema));

/** Item of the conversion list. Fields the connector does not read are kept but not checked. */
export const LegacyConversion = z.looseObject({
  id: z.string().check(z.minLength(1)),
  identifier: z.string(),
  amount: z.number(),
  currency: z.optional(z.string()),
  is_pending: Flag,
  locked_at: Nullable(z.string()),
  refused_at: Nullable(z.string()),
  custom_var: Nullable(z.string()),
  created_at: z.optional(z.string()),
});
export type LegacyConversion = z.infer<typeof LegacyConversion>;

/** Conversion detail (`GET …/conversions/{conversionId}`). */
export const LegacyConversionDetail = z.extend(LegacyConversion, {
  commission_paid: z.optional(z.number()),
  refuse_reason: Nullable(z.string()),
  rule: Nullable(z.looseObject({ id: z.string(), title: z.optional(z.string()) })),
  commissions: z._default(z.array(z.looseObject({ id: z.string(), commission: z.number() })), []),
});
export type LegacyConversionDetail = z.infer<typeof LegacyConversionDetail>;

/** Partnership as the advertiser sees it. */
export const LegacyPartnership = z.looseObject({
  id: z.string().check(z.minLength(1)),
  tracking_id: z.int(),
  status: z.union([z.literal(0), z.literal(1), z.literal(9)]),
  weight: z.int().check(z.minimum(0), z.maximum(LEGACY_MAX_WEIGHT)),
  affiliateProfile: z.optional(z.looseObject({ id: z.string(), title: z.string() })),
});
export type LegacyPartnership = z.infer<typeof LegacyPartnership>;

/** Program detail (`GET /2.0/advertiser/{programId}`): the fields the connector reads. */
export const LegacyProgramDetail = z.looseObject({
  id: z.string().check(z.minLength(1)),
  title: z.string(),
  mode: z.optional(z.enum(['first', 'last', 'share'])),
  rules: z._default(z.array(z.looseObject({ id: z.string(), title: z.string() })), []),
});
export type LegacyProgramDetail = z.infer<typeof LegacyProgramDetail>;

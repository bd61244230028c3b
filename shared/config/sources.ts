import * as z from 'zod/mini';
import { HexId } from '../domain/ids.ts';
import { hasShopApi, SOURCE_PLATFORMS } from '../domain/platforms.ts';
import { ConfigurationError } from '../errors.ts';
import { parsePercent } from '../money.ts';
import { firstIssue } from '../validation.ts';

/**
 * A *source* is one shop posting webhooks to `POST /webhooks/{source}`: its platform, where its
 * signing secrets live, and the program and rule its conversions go to. Sources are data (a JSON
 * file, env or CDK context), never code.
 */

/** What happens to an order with neither click ids nor an affiliate tracking id. */
export const UnattributedPolicy = z.discriminatedUnion('mode', [
  /** Default. The spec has no mode for an unattributed sale (tracking needs cids, manual a tracking id). */
  z.strictObject({ mode: z.literal('skip') }),
  /** Credit a house affiliate (for example your own newsletter partnership) in manual mode. */
  z.strictObject({ mode: z.literal('manual'), affiliateTrackingId: z.int().check(z.positive()) }),
]);
export type UnattributedPolicy = z.infer<typeof UnattributedPolicy>;

/**
 * Where a shop's API is and where its read-only credentials live. `url` is the shop's base URL
 * (Shopify `https://{shop}.myshopify.com`, WooCommerce the site URL, Stripe `https://api.stripe.com`);
 * `credentialsRef` names an env variable locally, a Secrets Manager secret in AWS, whose value is a
 * JSON object: Shopify `{"accessToken"}`, WooCommerce `{"consumerKey","consumerSecret"}`, Stripe
 * `{"secretKey"}` (see shared/shops/credentials.ts).
 */
export const ShopApiConfig = z.strictObject({
  url: z.url({ protocol: /^https?$/, error: 'an http(s) URL' }),
  credentialsRef: z.string().check(z.minLength(1)),
});
export type ShopApiConfig = z.infer<typeof ShopApiConfig>;

/**
 * The `commission` a legacy 2.0 add sends. The legacy document lists it as a plain field ("total amount
 * excluding tax of the commission") and never says that 0 lets the rule compute it, so the choice is the
 * deployer's: `{ percent: "8.5" }` sends that percentage of the conversion's amount (excluding tax, as
 * sent), computed exactly and rounded half up to a minor unit; `{ rule: true }`, like leaving the
 * setting out, sends 0 for the program's rule to compute (docs/legacy.md: check it after the first order).
 */
export const LegacyCommission = z
  .strictObject(
    {
      percent: z.optional(
        z.string({ error: 'a percentage as a decimal string, such as "8.5"' }).check(
          z.refine((text) => {
            try {
              return parsePercent(text).numerator > 0;
            } catch {
              return false;
            }
          }, 'a percentage above 0 and at most 100, as a decimal string with at most 4 decimals, such as "8.5"'),
        ),
      ),
      rule: z.optional(
        z.literal(true, { error: 'only true (the add sends commission 0, for the program rule to compute)' }),
      ),
    },
    { error: 'an object: { "percent": "8.5" } or { "rule": true }' },
  )
  .check(
    z.refine(
      (c) => (c.percent === undefined) !== (c.rule === undefined),
      'either "percent" (a decimal string such as "8.5") or "rule": true, not both',
    ),
  );
export type LegacyCommission = z.infer<typeof LegacyCommission>;

/** Longest return window `acceptAfterDays` takes: a year, past any shop's return policy. */
export const MAX_ACCEPT_AFTER_DAYS = 365;

export const SourceConfig = z.strictObject({
  /** URL path segment: `POST /webhooks/{id}`. */
  id: z.string().check(z.regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'lower-case letters, digits, - and _')),
  /** Its shop platform (`SOURCE_PLATFORMS`, shared/domain/platforms.ts). */
  platform: z.enum(SOURCE_PLATFORMS),
  program: HexId,
  rule: HexId,
  /**
   * Where the webhook signing secret comes from: the name of an env variable locally, a Secrets
   * Manager secret name or ARN in AWS. The value is one secret, never split; while rotating, the
   * previous value is accepted too (`<NAME>_PREVIOUS` locally, the AWSPREVIOUS version in AWS).
   */
  secretRef: z.string().check(z.minLength(1)),
  /** Order/note attribute names that carry the platform's click id. */
  clickIdAttributes: z._default(z.array(z.string().check(z.minLength(1))).check(z.minLength(1)), ['aecid']),
  /** Attribute names that carry an affiliate tracking id (selects manual mode). */
  trackingIdAttributes: z._default(z.array(z.string().check(z.minLength(1))), ['affiliate_tracking_id']),
  /** Attribute names that carry a subId. */
  subIdAttributes: z._default(z.array(z.string().check(z.minLength(1))), ['subid']),
  /** Shopify: the order topic that creates conversions. */
  orderTopic: z._default(z.enum(['orders/create', 'orders/paid']), 'orders/create'),
  unattributed: z._default(UnattributedPolicy, { mode: 'skip' }),
  /** Which platform interface the program lives on (legacy 2.0 accounts: see README). */
  backend: z._default(z.enum(['current', 'legacy']), 'current'),
  /**
   * Legacy backend only: the commission its add sends (`LegacyCommission`). @default the add sends 0
   * for the program's rule to compute, which the legacy document does not promise
   */
  legacyCommission: z.optional(LegacyCommission),
  /**
   * Put before every order id of this source, on the platform and in the ledger (`shopA-1001`). Set
   * it when two sources of one program may use the same order ids (two shops both with order 1001):
   * otherwise the second source's order is parked. Finance refunds name the prefixed id. Changing it
   * later splits the ledger: orders already added keep the old id. @default none
   */
  externalIdPrefix: z.optional(
    z
      .string()
      .check(
        z.regex(
          /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,31}$/,
          'up to 32 letters, digits, _ . : - starting with a letter or digit',
        ),
      ),
  ),
  /**
   * `shadow`: orders go through ingest, the queue, mapping, attribution and the ledger as usual, but
   * the worker changes nothing on the platform (no add, update or refusal): the ledger records what it
   * would have sent (state `shadowed`), for `connector shadow-report` to compare with the platform's
   * browser pixel before the switch. Switch to `live` once the report is convincing. @default 'live'
   */
  mode: z._default(z.enum(['live', 'shadow']), 'live'),
  /**
   * Look every new order up on the platform (Conversion info by externalId) before adding it, and
   * adopt the conversion found instead of adding a second. For the days after switching a source from
   * shadow to live: an order the pixel recorded whose webhook comes only after the switch (a shop's
   * retries, a queue backlog) is then not counted twice. One more read per order. @default false
   */
  lookupBeforeAdd: z._default(z.boolean(), false),
  /**
   * Accept the source's conversions on the platform once the order is this many days old (the shop's
   * return window), unless a refund is pending or the conversion was refused. The due date is set
   * when the conversion is added: changing this later moves only new orders. @default off
   */
  acceptAfterDays: z.optional(z.int().check(z.gte(1), z.lte(MAX_ACCEPT_AFTER_DAYS))),
  /** Stripe: signature timestamp tolerance. */
  toleranceSeconds: z._default(z.int().check(z.positive()), 300),
  /**
   * The shop's own API, read by `connector backfill` and the scheduled catch-up (docs/backfill.md).
   * Not for a platform without one (`hasShopApi`: `generic`): it has no API to read. @default none
   */
  shopApi: z.optional(ShopApiConfig),
});
export type SourceConfig = z.infer<typeof SourceConfig>;
export type SourceConfigInput = z.input<typeof SourceConfig>;

export const SourcesFile = z.array(SourceConfig).check(
  z.superRefine((sources, ctx) => {
    const seen = new Set<string>();
    sources.forEach((s, i) => {
      if (seen.has(s.id))
        ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `duplicate source id ${s.id}` });
      seen.add(s.id);
      if (s.backend !== 'legacy' && s.legacyCommission !== undefined) {
        const message =
          'only for a source with "backend": "legacy" (the current API\'s Conversion Add takes no commission)';
        ctx.addIssue({ code: 'custom', path: [i, 'legacyCommission'], message });
      }
      if (!hasShopApi(s.platform) && s.shopApi !== undefined) {
        const message = `a ${s.platform} source has no shop API to read: backfill it with --file`;
        ctx.addIssue({ code: 'custom', path: [i, 'shopApi'], message });
      }
    });
  }),
);

/** Parses sources from JSON text, failing fast with the path of the first wrong setting. */
export function parseSources(json: string, origin: string): SourceConfig[] {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new ConfigurationError(`${origin}: not valid JSON`);
  }
  const result = SourcesFile.safeParse(raw);
  if (!result.success) {
    const { field, message } = firstIssue(result.error);
    throw new ConfigurationError(`${origin}: ${field}: ${message}`);
  }
  return result.data;
}

import * as z from 'zod';
import { HexId } from '../domain/ids.ts';
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
  z.strictObject({ mode: z.literal('manual'), affiliateTrackingId: z.number().int().positive() }),
]);
export type UnattributedPolicy = z.infer<typeof UnattributedPolicy>;

export const SourceConfig = z.strictObject({
  /** URL path segment: `POST /webhooks/{id}`. */
  id: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'lower-case letters, digits, - and _'),
  platform: z.enum(['shopify', 'woocommerce', 'stripe', 'generic']),
  program: HexId,
  rule: HexId,
  /**
   * Where the webhook signing secret comes from: the name of an env variable locally, a Secrets
   * Manager secret name or ARN in AWS. The value is one secret, never split; while rotating, the
   * previous value is accepted too (`<NAME>_PREVIOUS` locally, the AWSPREVIOUS version in AWS).
   */
  secretRef: z.string().min(1),
  /** Order/note attribute names that carry the platform's click id. */
  clickIdAttributes: z.array(z.string().min(1)).min(1).default(['aecid']),
  /** Attribute names that carry an affiliate tracking id (selects manual mode). */
  trackingIdAttributes: z.array(z.string().min(1)).default(['affiliate_tracking_id']),
  /** Attribute names that carry a subId. */
  subIdAttributes: z.array(z.string().min(1)).default(['subid']),
  /** Shopify: the order topic that creates conversions. */
  orderTopic: z.enum(['orders/create', 'orders/paid']).default('orders/create'),
  unattributed: UnattributedPolicy.default({ mode: 'skip' }),
  /** Which platform interface the program lives on (legacy 2.0 accounts: see README). */
  backend: z.enum(['current', 'legacy']).default('current'),
  /**
   * Put before every order id of this source, on the platform and in the ledger (`shopA-1001`). Set
   * it when two sources of one program may use the same order ids (two shops both with order 1001):
   * otherwise the second source's order is parked. Finance refunds name the prefixed id. Changing it
   * later splits the ledger: orders already added keep the old id. @default none
   */
  externalIdPrefix: z
    .string()
    .regex(
      /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,31}$/,
      'up to 32 letters, digits, _ . : - starting with a letter or digit',
    )
    .optional(),
  /** Stripe: signature timestamp tolerance. */
  toleranceSeconds: z.number().int().positive().default(300),
});
export type SourceConfig = z.infer<typeof SourceConfig>;
export type SourceConfigInput = z.input<typeof SourceConfig>;

export const SourcesFile = z.array(SourceConfig).superRefine((sources, ctx) => {
  const seen = new Set<string>();
  sources.forEach((s, i) => {
    if (seen.has(s.id))
      ctx.addIssue({ code: 'custom', path: [i, 'id'], message: `duplicate source id ${s.id}` });
    seen.add(s.id);
  });
});

/** Parses sources from JSON text, failing fast with the path of the first wrong setting. */
export function parseSources(json: string, origin: string): SourceConfig[] {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new Error(`${origin}: not valid JSON`);
  }
  const result = SourcesFile.safeParse(raw);
  if (!result.success) {
    const { field, message } = firstIssue(result.error);
    throw new Error(`${origin}: ${field}: ${message}`);
  }
  return result.data;
}

import * as z from 'zod/mini';
import type { SourceConfig } from '../config/sources.ts';
import { hasShopApi, type ShopApiPlatform } from '../domain/platforms.ts';
import { ConfigurationError } from '../errors.ts';
import type { SecretStore } from '../ports.ts';
import { firstIssue } from '../validation.ts';

/**
 * A source's shop API credentials: the JSON object stored under `shopApi.credentialsRef` (an env
 * variable locally, a Secrets Manager secret in AWS), read-only keys only (docs/backfill.md).
 */

const Key = z.string().check(z.minLength(1));

const SHAPES = {
  /** A custom app's Admin API access token (`shpat_…`), scope `read_orders`. */
  shopify: z.object({ accessToken: Key }),
  /** A REST API key with Read permission. */
  woocommerce: z.object({ consumerKey: Key, consumerSecret: Key }),
  /** A restricted key (`rk_…`) with read access to Events. */
  stripe: z.object({ secretKey: Key }),
} as const satisfies Record<ShopApiPlatform, z.ZodMiniType>;

const EXAMPLES: Record<ShopPlatform, string> = {
  shopify: '{"accessToken": "…"}',
  woocommerce: '{"consumerKey": "…", "consumerSecret": "…"}',
  stripe: '{"secretKey": "…"}',
};

export type ShopPlatform = ShopApiPlatform;

export interface ShopifyCredentials {
  readonly platform: 'shopify';
  readonly url: string;
  readonly accessToken: string;
}
export interface WooCommerceCredentials {
  readonly platform: 'woocommerce';
  readonly url: string;
  readonly consumerKey: string;
  readonly consumerSecret: string;
}
export interface StripeCredentials {
  readonly platform: 'stripe';
  readonly url: string;
  readonly secretKey: string;
}
export type ShopCredentials = ShopifyCredentials | WooCommerceCredentials | StripeCredentials;

/**
 * Reads and checks a source's shop API credentials. Throws `ConfigurationError` naming the source,
 * the reference and the wrong field; the value is never part of a message.
 */
export async function shopCredentials(
  secrets: SecretStore,
  source: SourceConfig,
  options: { readonly fresh?: boolean } = {},
): Promise<ShopCredentials> {
  const api = source.shopApi;
  if (api === undefined || !hasShopApi(source.platform)) {
    throw new ConfigurationError(
      `source ${source.id} has no shopApi (url and credentialsRef): see docs/backfill.md`,
    );
  }
  const platform = source.platform;
  const where = `shop API credentials ${api.credentialsRef} of source ${source.id}`;
  const text = await secrets.get(api.credentialsRef, options);
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    raw = undefined;
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new ConfigurationError(`${where}: not a JSON object (${EXAMPLES[platform]})`);
  }
  const parsed = z.safeParse(SHAPES[platform], raw);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error);
    throw new ConfigurationError(`${where}: ${field}: ${message}`);
  }
  return { platform, url: api.url, ...parsed.data } as ShopCredentials;
}

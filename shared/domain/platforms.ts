/**
 * The shop platforms a source may be of: the one list the others are derived from (the sources'
 * schema, the events' `platform`, the adapter registry, `connector send`'s samples, the local
 * stack's sources and the tests' platform contract, test/unit/platforms/contract.test.ts). It
 * imports nothing, so the sandbox and the CLI can read it without loading zod or its locale.
 * Adding a platform: docs/shop-platforms.md#adding-a-shop-platform.
 */
export const SOURCE_PLATFORMS = ['shopify', 'woocommerce', 'stripe', 'generic'] as const;
export type SourcePlatform = (typeof SOURCE_PLATFORMS)[number];

/**
 * Whether the connector reads the platform's own API (`connector backfill`, `doctor`, `subscribe`,
 * the daily catch-up and the sandbox's shop fakes). A new platform must say: `satisfies` refuses a
 * missing or unknown platform.
 */
const HAS_SHOP_API = {
  shopify: true,
  woocommerce: true,
  stripe: true,
  generic: false,
} as const satisfies Record<SourcePlatform, boolean>;

/** A platform whose shop API the connector reads. */
export type ShopApiPlatform = {
  [P in SourcePlatform]: (typeof HAS_SHOP_API)[P] extends true ? P : never;
}[SourcePlatform];

/** Whether the connector reads this platform's shop API (narrows to `ShopApiPlatform`). */
export function hasShopApi(platform: SourcePlatform): platform is ShopApiPlatform {
  // `=== true`: a name from outside the type (`constructor`) finds Object's members, not a platform.
  return HAS_SHOP_API[platform] === true;
}

/** The platforms whose shop API the connector reads, in `SOURCE_PLATFORMS` order. */
export const SHOP_API_PLATFORMS: readonly ShopApiPlatform[] = SOURCE_PLATFORMS.filter(hasShopApi);

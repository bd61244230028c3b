import type { SourceConfig } from '../config/sources.ts';
import { genericAdapter } from './generic.ts';
import { shopifyAdapter } from './shopify.ts';
import { stripeAdapter } from './stripe.ts';
import type { PlatformAdapter } from './types.ts';
import { woocommerceAdapter } from './woocommerce.ts';

const ADAPTERS: Readonly<Record<SourceConfig['platform'], PlatformAdapter>> = {
  shopify: shopifyAdapter,
  woocommerce: woocommerceAdapter,
  stripe: stripeAdapter,
  generic: genericAdapter,
};

/** The adapter of a source's platform. */
export function adapterFor(platform: SourceConfig['platform']): PlatformAdapter {
  const adapter = ADAPTERS[platform];
  // Sources are validated at start; this guards a platform name that came from elsewhere.
  if (!adapter) throw new Error(`no adapter for platform ${String(platform)}`);
  return adapter;
}

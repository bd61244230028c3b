import type { SourceConfig } from '../config/sources.ts';
import { genericAdapter } from './generic.ts';
import { shopifyAdapter, shopifyTopics } from './shopify.ts';
import { STRIPE_EVENT_TYPES, stripeAdapter } from './stripe.ts';
import type { PlatformAdapter } from './types.ts';
import { WOOCOMMERCE_TOPICS, woocommerceAdapter } from './woocommerce.ts';

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

/**
 * The webhook topics (Stripe: event types) a source's shop must send for the connector to miss
 * nothing: exactly what its platform's adapter acts on, so the subscriptions checked by `connector
 * doctor` and made by `connector subscribe` cannot drift from the ingest. None for `generic`.
 */
export function subscriptionTopics(source: SourceConfig): readonly string[] {
  switch (source.platform) {
    case 'shopify':
      return shopifyTopics(source);
    case 'woocommerce':
      return WOOCOMMERCE_TOPICS;
    case 'stripe':
      return STRIPE_EVENT_TYPES;
    case 'generic':
      return [];
  }
}

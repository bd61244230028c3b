import type { SourceConfig } from '../config/sources.ts';
import { STRIPE_EVENT_TYPES, shopifyTopics, WOOCOMMERCE_TOPICS } from './topics.ts';
import type { AdapterLoader, PlatformAdapter } from './types.ts';

/**
 * Each adapter is loaded when a source of its platform first needs it: building a platform's
 * schemas costs a function's cold start a few milliseconds, and a deployment mostly serves one
 * platform. In a bundle the dynamic import stays in the file (esbuild wraps the module in a lazy
 * initialiser); its top level runs on the first call only.
 */
const LOADERS: Readonly<Record<SourceConfig['platform'], () => Promise<PlatformAdapter>>> = {
  shopify: async () => (await import('./shopify.ts')).shopifyAdapter,
  woocommerce: async () => (await import('./woocommerce.ts')).woocommerceAdapter,
  stripe: async () => (await import('./stripe.ts')).stripeAdapter,
  generic: async () => (await import('./generic.ts')).genericAdapter,
};

/** Each platform's adapter once asked for: every later request awaits a settled promise. */
const loaded = new Map<SourceConfig['platform'], Promise<PlatformAdapter>>();

/** The adapter of a source's platform, loaded on first use. */
export const adapterFor: AdapterLoader = (platform) => {
  let adapter = loaded.get(platform);
  if (adapter === undefined) {
    const load = Object.hasOwn(LOADERS, platform) ? LOADERS[platform] : undefined;
    // Sources are validated at start; this guards a platform name that came from elsewhere.
    if (load === undefined) return Promise.reject(new Error(`no adapter for platform ${String(platform)}`));
    adapter = load();
    loaded.set(platform, adapter);
  }
  return adapter;
};

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

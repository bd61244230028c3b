import type { SourceConfig } from '../config/sources.ts';
import { shopifyTopics } from '../platforms/shopify.ts';
import { STRIPE_EVENT_TYPES } from '../platforms/stripe.ts';
import { WOOCOMMERCE_TOPICS } from '../platforms/woocommerce.ts';

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

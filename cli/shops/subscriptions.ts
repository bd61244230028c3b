import { PermanentError } from '../../shared/errors.ts';
import type { ShopPlatform } from '../../shared/shops/credentials.ts';
import { stringAt } from '../../shared/shops/http.ts';
import type { ShopifyClient } from '../../shared/shops/shopify.ts';
import type { StripeClient } from '../../shared/shops/stripe.ts';
import type { WooCommerceClient } from '../../shared/shops/woocommerce.ts';

/**
 * The shop side of the webhooks: which subscriptions the shop has (Shopify `webhooks.json`,
 * WooCommerce `webhooks`, Stripe `webhook_endpoints`), what is wrong with them for one source
 * (`diagnose`), and the changes that put it right (`planFixes`, `applyFix`). Fixes only create,
 * re-enable or add events: a subscription someone else made is never deleted or pointed elsewhere.
 */

/** One subscription as the shop lists it, reduced to what the checks read. */
export interface ShopSubscription {
  readonly id: string;
  readonly address: string;
  /** Shopify and WooCommerce: one topic; Stripe: the endpoint's `enabled_events` (`*` = all). */
  readonly topics: readonly string[];
  /** Shopify has no status (a failing subscription is deleted); WooCommerce and Stripe do. */
  readonly status: 'active' | 'paused' | 'disabled' | 'enabled';
}

/** What one source needs: every topic, delivered to `address`, active. */
export interface WantedSubscriptions {
  readonly platform: ShopPlatform;
  /** `<connector URL>/webhooks/<source id>`. */
  readonly address: string;
  readonly topics: readonly string[];
}

export type SubscriptionProblem =
  /** No subscription of this topic delivers to the address; `elsewhere` lists where it goes instead. */
  | { readonly kind: 'missing'; readonly topic: string; readonly elsewhere: readonly string[] }
  /** The topic's subscriptions to the address are all switched off. */
  | { readonly kind: 'inactive'; readonly topic: string; readonly id: string; readonly status: string };

export type SubscriptionFix =
  /** Shopify, WooCommerce: one new subscription per topic; Stripe: one endpoint with every event. */
  | { readonly kind: 'create'; readonly topics: readonly string[] }
  | { readonly kind: 'enable'; readonly id: string; readonly topics: readonly string[] }
  /** Stripe: `events` added to those the endpoint already has (`all`: the endpoint's list after). */
  | {
      readonly kind: 'add-events';
      readonly id: string;
      readonly events: readonly string[];
      readonly all: readonly string[];
    };

const ACTIVE = new Set(['active', 'enabled']);

/** The address without a trailing slash: `…/webhooks/shop-a/` delivers to the same route. */
function sameAddress(a: string, b: string): boolean {
  return a.replace(/\/+$/, '') === b.replace(/\/+$/, '');
}

function covers(subscription: ShopSubscription, topic: string): boolean {
  return subscription.topics.includes(topic) || subscription.topics.includes('*');
}

/** Every problem of the shop's subscriptions for one source, in the order of `wanted.topics`. */
export function diagnose(
  wanted: WantedSubscriptions,
  subscriptions: readonly ShopSubscription[],
): SubscriptionProblem[] {
  const ours = subscriptions.filter((s) => sameAddress(s.address, wanted.address));
  const problems: SubscriptionProblem[] = [];
  for (const topic of wanted.topics) {
    const matching = ours.filter((s) => covers(s, topic));
    const active = matching.find((s) => ACTIVE.has(s.status));
    if (active) continue;
    const off = matching[0];
    if (off) {
      problems.push({ kind: 'inactive', topic, id: off.id, status: off.status });
      continue;
    }
    const elsewhere = subscriptions
      .filter((s) => covers(s, topic) && !sameAddress(s.address, wanted.address))
      .map((s) => s.address);
    problems.push({ kind: 'missing', topic, elsewhere: [...new Set(elsewhere)] });
  }
  return problems;
}

/**
 * The fewest changes that clear `diagnose`'s problems. Stripe keeps one endpoint per address: a
 * disabled one is enabled (and given the missing events) rather than a second one created.
 */
export function planFixes(
  wanted: WantedSubscriptions,
  subscriptions: readonly ShopSubscription[],
): SubscriptionFix[] {
  const problems = diagnose(wanted, subscriptions);
  if (problems.length === 0) return [];
  if (wanted.platform !== 'stripe') {
    const fixes: SubscriptionFix[] = [];
    const missing = problems.filter((p) => p.kind === 'missing').map((p) => p.topic);
    for (const p of problems) {
      if (p.kind === 'inactive') fixes.push({ kind: 'enable', id: p.id, topics: [p.topic] });
    }
    if (missing.length > 0) fixes.push({ kind: 'create', topics: missing });
    return fixes;
  }
  const ours = subscriptions.filter((s) => sameAddress(s.address, wanted.address));
  // The endpoint to complete: an enabled one first, else the one covering the most topics.
  const endpoint = [...ours].sort(
    (a, b) =>
      Number(ACTIVE.has(b.status)) - Number(ACTIVE.has(a.status)) ||
      wanted.topics.filter((t) => covers(b, t)).length - wanted.topics.filter((t) => covers(a, t)).length,
  )[0];
  if (!endpoint) return [{ kind: 'create', topics: wanted.topics }];
  const fixes: SubscriptionFix[] = [];
  if (!ACTIVE.has(endpoint.status)) fixes.push({ kind: 'enable', id: endpoint.id, topics: endpoint.topics });
  const events = wanted.topics.filter((t) => !covers(endpoint, t));
  if (events.length > 0) {
    fixes.push({ kind: 'add-events', id: endpoint.id, events, all: [...endpoint.topics, ...events] });
  }
  return fixes;
}

/** What a fix did at the shop: the subscriptions it touched, and a Stripe endpoint's new secret. */
export interface FixResult {
  readonly ids: readonly string[];
  /** Stripe returns an endpoint's signing secret once, when it is created. */
  readonly signingSecret?: string;
}

/** The subscription API of one shop, over its client. */
export interface SubscriptionApi {
  list(): Promise<ShopSubscription[]>;
  /**
   * Applies one fix. `secret`: what WooCommerce signs new webhooks with (the source's own secret);
   * Shopify signs with the app's secret, Stripe makes one per endpoint.
   */
  apply(fix: SubscriptionFix, wanted: WantedSubscriptions, secret?: string): Promise<FixResult>;
}

/** A name for subscriptions the connector creates, so a person in the shop's admin knows them. */
const CREATED_NAME = 'affiliate conversion connector';

type Json = Record<string, unknown>;

function idOf(value: unknown, what: string): string {
  const id = (value as Json | undefined)?.['id'];
  if (typeof id === 'string' || typeof id === 'number') return String(id);
  throw new PermanentError(`${what} answered without an id`);
}

function topicsOf(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((t): t is string => typeof t === 'string') : [];
}

/**
 * Shopify Admin REST `webhooks.json`: one subscription per topic; no status. `writer` sends the
 * changes (a client without retries: a create is not idempotent), `client` the reads.
 */
export function shopifySubscriptions(client: ShopifyClient, writer: ShopifyClient = client): SubscriptionApi {
  return {
    async list() {
      const out: ShopSubscription[] = [];
      for await (const page of client.list('webhooks.json', 'webhooks', { limit: '250' })) {
        for (const w of page) {
          out.push({
            id: idOf(w, 'Shopify webhooks.json'),
            address: stringAt(w, 'address') ?? '',
            topics: [stringAt(w, 'topic') ?? ''],
            status: 'active',
          });
        }
      }
      return out;
    },
    async apply(fix, wanted) {
      if (fix.kind !== 'create') throw new PermanentError(`Shopify webhooks have no ${fix.kind}`);
      const ids: string[] = [];
      for (const topic of fix.topics) {
        const answer = await writer.post('webhooks.json', {
          webhook: { topic, address: wanted.address, format: 'json' },
        });
        ids.push(idOf((answer.json as Json)['webhook'], 'Shopify POST webhooks.json'));
      }
      return { ids };
    },
  };
}

const WOO_STATUS = new Set(['active', 'paused', 'disabled']);

/** WooCommerce REST v3 `webhooks`: one webhook per topic, `status` active, paused or disabled. */
export function wooCommerceSubscriptions(
  client: WooCommerceClient,
  writer: WooCommerceClient = client,
): SubscriptionApi {
  return {
    async list() {
      const out: ShopSubscription[] = [];
      for await (const page of client.list('webhooks', { status: 'all', per_page: '100' })) {
        for (const w of page) {
          const status = stringAt(w, 'status') ?? '';
          out.push({
            id: idOf(w, 'WooCommerce webhooks'),
            address: stringAt(w, 'delivery_url') ?? '',
            topics: [stringAt(w, 'topic') ?? ''],
            status: WOO_STATUS.has(status) ? (status as ShopSubscription['status']) : 'disabled',
          });
        }
      }
      return out;
    },
    async apply(fix, wanted, secret) {
      if (fix.kind === 'enable') {
        await writer.send('PUT', `webhooks/${encodeURIComponent(fix.id)}`, { status: 'active' });
        return { ids: [fix.id] };
      }
      if (fix.kind !== 'create') throw new PermanentError(`WooCommerce webhooks have no ${fix.kind}`);
      const ids: string[] = [];
      for (const topic of fix.topics) {
        const answer = await writer.send('POST', 'webhooks', {
          name: `${CREATED_NAME}: ${topic}`,
          topic,
          delivery_url: wanted.address,
          status: 'active',
          ...(secret === undefined ? {} : { secret }),
        });
        ids.push(idOf(answer.json, 'WooCommerce POST webhooks'));
      }
      return { ids };
    },
  };
}

/** Stripe `webhook_endpoints`: one endpoint, many `enabled_events`, `status` enabled or disabled. */
export function stripeSubscriptions(client: StripeClient, writer: StripeClient = client): SubscriptionApi {
  return {
    async list() {
      const out: ShopSubscription[] = [];
      for await (const page of client.list('webhook_endpoints', { limit: '100' })) {
        for (const e of page) {
          out.push({
            id: idOf(e, 'Stripe webhook_endpoints'),
            address: stringAt(e, 'url') ?? '',
            topics: topicsOf((e as Json)['enabled_events']),
            status: stringAt(e, 'status') === 'enabled' ? 'enabled' : 'disabled',
          });
        }
      }
      return out;
    },
    async apply(fix, wanted) {
      const form = new URLSearchParams();
      if (fix.kind === 'create') {
        form.append('url', wanted.address);
        for (const event of fix.topics) form.append('enabled_events[]', event);
        form.append('description', CREATED_NAME);
        const answer = await writer.post('webhook_endpoints', form);
        const signingSecret = stringAt(answer.json, 'secret');
        const id = idOf(answer.json, 'Stripe POST webhook_endpoints');
        return signingSecret === undefined ? { ids: [id] } : { ids: [id], signingSecret };
      }
      if (fix.kind === 'enable') form.append('disabled', 'false');
      // enabled_events replaces the endpoint's list: the whole list is sent, the old events kept.
      else for (const event of fix.all) form.append('enabled_events[]', event);
      await writer.post(`webhook_endpoints/${encodeURIComponent(fix.id)}`, form);
      return { ids: [fix.id] };
    },
  };
}

/** One line per problem, for `connector doctor`. */
export function describeProblem(problem: SubscriptionProblem, wanted: WantedSubscriptions): string {
  const noun = wanted.platform === 'stripe' ? 'event' : 'topic';
  if (problem.kind === 'inactive') {
    const what = wanted.platform === 'stripe' ? 'endpoint' : 'webhook';
    return `${noun} ${problem.topic}: the ${what} ${problem.id} to ${wanted.address} is ${problem.status}`;
  }
  const where = problem.elsewhere.length > 0 ? ` (it goes to ${problem.elsewhere.join(', ')} only)` : '';
  const none =
    wanted.platform === 'stripe'
      ? `no endpoint to ${wanted.address} sends it`
      : `no subscription delivers it to ${wanted.address}`;
  return `${noun} ${problem.topic}: ${none}${where}`;
}

/** One line per fix, for `connector subscribe`: what it did, or with `dryRun` what it would do. */
export function describeFix(fix: SubscriptionFix, wanted: WantedSubscriptions, dryRun: boolean): string {
  const verb = (done: string, would: string) => (dryRun ? `would ${would}` : done);
  switch (fix.kind) {
    case 'create':
      return wanted.platform === 'stripe'
        ? `${verb('created', 'create')} an endpoint for ${wanted.address} with ${fix.topics.join(', ')}`
        : `${verb('created', 'create')} ${fix.topics.join(', ')} → ${wanted.address}`;
    case 'enable':
      return `${verb('re-enabled', 're-enable')} ${fix.id} (${fix.topics.join(', ')})`;
    case 'add-events':
      return `${verb('added', 'add')} ${fix.events.join(', ')} to endpoint ${fix.id}`;
  }
}

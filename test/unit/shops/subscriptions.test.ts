import { describe, expect, it } from 'vitest';
import {
  diagnose,
  planFixes,
  type ShopSubscription,
  type WantedSubscriptions,
} from '../../../cli/shops/subscriptions.ts';
import { SourceConfig } from '../../../shared/config/sources.ts';
import { subscriptionTopics } from '../../../shared/platforms/registry.ts';

const ADDRESS = 'https://abc.execute-api.eu-west-1.amazonaws.com/webhooks/shop-a';
const source = (platform: 'shopify' | 'woocommerce' | 'stripe' | 'generic', extra: object = {}) =>
  SourceConfig.parse({
    id: 'shop-a',
    platform,
    program: '5ad000000000000000000101',
    rule: '5ad000000000000000000201',
    secretRef: 'SECRET',
    ...extra,
  });

describe('subscriptionTopics', () => {
  it('follows the Shopify source’s order topic, and names every event the Stripe adapter handles', () => {
    expect(subscriptionTopics(source('shopify'))).toEqual([
      'orders/create',
      'refunds/create',
      'orders/cancelled',
    ]);
    expect(subscriptionTopics(source('shopify', { orderTopic: 'orders/paid' }))).toEqual([
      'orders/paid',
      'refunds/create',
      'orders/cancelled',
    ]);
    expect(subscriptionTopics(source('woocommerce'))).toEqual(['order.created', 'order.updated']);
    expect(subscriptionTopics(source('stripe'))).toEqual(
      expect.arrayContaining(['checkout.session.completed', 'charge.refunded', 'refund.created']),
    );
    expect(subscriptionTopics(source('generic'))).toEqual([]);
  });
});

describe('diagnose and planFixes', () => {
  const woo: WantedSubscriptions = {
    platform: 'woocommerce',
    address: ADDRESS,
    topics: ['order.created', 'order.updated'],
  };
  const stripe: WantedSubscriptions = {
    platform: 'stripe',
    address: ADDRESS,
    topics: ['checkout.session.completed', 'charge.refunded', 'refund.created'],
  };

  it('takes an address with a trailing slash as the same, and an active duplicate over a disabled one', () => {
    // Prepare
    const subs: ShopSubscription[] = [
      { id: '1', address: `${ADDRESS}/`, topics: ['order.created'], status: 'active' },
      { id: '2', address: ADDRESS, topics: ['order.updated'], status: 'disabled' },
      { id: '3', address: ADDRESS, topics: ['order.updated'], status: 'active' },
    ];
    // Act / Assess
    expect(diagnose(woo, subs)).toEqual([]);
    expect(planFixes(woo, subs)).toEqual([]);
  });

  it('re-enables a paused WooCommerce webhook and creates the missing one, naming where the topic goes instead', () => {
    // Prepare
    const subs: ShopSubscription[] = [
      { id: '7', address: ADDRESS, topics: ['order.updated'], status: 'paused' },
      { id: '8', address: 'https://old.example/hook', topics: ['order.created'], status: 'active' },
    ];
    // Act
    const problems = diagnose(woo, subs);
    const fixes = planFixes(woo, subs);
    // Assess
    expect(problems).toEqual([
      { kind: 'missing', topic: 'order.created', elsewhere: ['https://old.example/hook'] },
      { kind: 'inactive', topic: 'order.updated', id: '7', status: 'paused' },
    ]);
    expect(fixes).toEqual([
      { kind: 'enable', id: '7', topics: ['order.updated'] },
      { kind: 'create', topics: ['order.created'] },
    ]);
  });

  it('counts a Stripe endpoint with every event (*) as covering all', () => {
    const subs: ShopSubscription[] = [{ id: 'we_1', address: ADDRESS, topics: ['*'], status: 'enabled' }];
    expect(planFixes(stripe, subs)).toEqual([]);
  });

  it('enables a disabled Stripe endpoint and adds its missing events, keeping the others, instead of a second endpoint', () => {
    // Prepare
    const subs: ShopSubscription[] = [
      {
        id: 'we_1',
        address: ADDRESS,
        topics: ['checkout.session.completed', 'invoice.paid'],
        status: 'disabled',
      },
    ];
    // Act
    const fixes = planFixes(stripe, subs);
    // Assess
    expect(fixes).toEqual([
      { kind: 'enable', id: 'we_1', topics: ['checkout.session.completed', 'invoice.paid'] },
      {
        kind: 'add-events',
        id: 'we_1',
        events: ['charge.refunded', 'refund.created'],
        all: ['checkout.session.completed', 'invoice.paid', 'charge.refunded', 'refund.created'],
      },
    ]);
  });

  it('completes the enabled one of two Stripe endpoints to the address', () => {
    const subs: ShopSubscription[] = [
      { id: 'we_off', address: ADDRESS, topics: [...stripe.topics], status: 'disabled' },
      { id: 'we_on', address: ADDRESS, topics: ['refund.created'], status: 'enabled' },
    ];
    expect(planFixes(stripe, subs)).toEqual([
      {
        kind: 'add-events',
        id: 'we_on',
        events: ['checkout.session.completed', 'charge.refunded'],
        all: ['refund.created', 'checkout.session.completed', 'charge.refunded'],
      },
    ]);
  });

  it('creates one Stripe endpoint with every event when none delivers to the address', () => {
    const subs: ShopSubscription[] = [
      { id: 'we_x', address: 'https://other.example', topics: ['*'], status: 'enabled' },
    ];
    expect(planFixes(stripe, subs)).toEqual([{ kind: 'create', topics: stripe.topics }]);
  });
});

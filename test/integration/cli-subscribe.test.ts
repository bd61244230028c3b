import { describe, expect, it } from 'vitest';
import { localStackForCli, runCli } from '../support/cli.ts';

/**
 * `connector doctor` checks the shop side of each source with `shopApi` (the sandbox's shop fakes
 * under the local stack), and `connector subscribe` puts right what it finds: a disabled
 * WooCommerce webhook, a deleted Shopify topic, a Stripe endpoint missing `charge.refunded`.
 */

const local = localStackForCli();
const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });
const shops = () => {
  const sandbox = local.stack.sandbox;
  if (!sandbox) throw new Error('the local stack runs the sandbox in process');
  return sandbox.shops.control;
};
const hook = (source: string) => `${local.stack.url}/webhooks/${source}`;

describe('connector doctor, shop side', () => {
  it('finds every needed subscription of a fresh local stack active and pointed at the connector', async () => {
    // Act
    const checked = await cli('doctor');
    // Assess
    expect(checked.code, checked.stdout).toBe(0);
    expect(checked.stdout).toMatch(
      new RegExp(
        `✓ shop webhooks shopify\\s+orders/create, refunds/create, orders/cancelled → ${hook('shopify')}, active`,
      ),
    );
    expect(checked.stdout).toMatch(
      new RegExp(`✓ shop webhooks woocommerce\\s+order\\.created, order\\.updated → ${hook('woocommerce')}`),
    );
    expect(checked.stdout).toMatch(
      /✓ shop webhooks stripe\s+checkout\.session\.completed, checkout\.session\.async_payment_succeeded, refund\.created, charge\.refunded → /,
    );
    expect(checked.stdout).not.toContain('shop webhooks generic');
  });
});

describe('connector subscribe', () => {
  it('re-enables a disabled WooCommerce webhook; dry run first, nothing left to do after', async () => {
    // Prepare: WooCommerce disabled the order.updated webhook after failed deliveries
    shops().breakSubscription('woocommerce', 'order.updated');
    // Act
    const before = await cli('doctor');
    const dryRun = await cli('subscribe', '--source', 'woocommerce', '--dry-run');
    const afterDryRun = await cli('doctor');
    const fixed = await cli('subscribe', '--source', 'woocommerce');
    const after = await cli('doctor');
    const again = await cli('subscribe', '--source', 'woocommerce');
    // Assess
    expect(before.code).toBe(1);
    expect(before.stdout).toMatch(
      new RegExp(
        `✗ shop webhooks woocommerce\\s+topic order\\.updated: the webhook \\d+ to ${hook('woocommerce')} is disabled`,
      ),
    );
    expect(before.stdout).toContain('fix: connector subscribe --source woocommerce');
    expect(dryRun.code, dryRun.stderr).toBe(0);
    expect(dryRun.stdout).toMatch(/would re-enable \d+ \(order\.updated\)/);
    expect(afterDryRun.stdout).toMatch(/✗ shop webhooks woocommerce/);
    expect(fixed.code, fixed.stderr).toBe(0);
    expect(fixed.stdout).toMatch(/re-enabled \d+ \(order\.updated\)/);
    expect(after.code, after.stdout).toBe(0);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('woocommerce: nothing to do');
    expect(
      shops()
        .subscriptions('woocommerce')
        .filter((w) => w['topic'] === 'order.updated'),
    ).toHaveLength(1);
  });

  it('creates a WooCommerce webhook that is missing, signed with the source’s secret', async () => {
    // Prepare
    shops().breakSubscription('woocommerce', 'order.created', 'delete');
    // Act
    const fixed = await cli('subscribe', '--source', 'woocommerce');
    const after = await cli('doctor');
    // Assess
    expect(fixed.stdout).toContain(`created order.created → ${hook('woocommerce')}`);
    expect(after.code, after.stdout).toBe(0);
    const created = shops()
      .subscriptions('woocommerce')
      .find((w) => w['topic'] === 'order.created');
    expect(created).toMatchObject({ status: 'active', delivery_url: hook('woocommerce') });
    expect(created?.['secret']).toBe(local.stack.secrets['WOOCOMMERCE_WEBHOOK_SECRET']);
  });

  it('creates a Shopify topic that was deleted, and leaves the subscriptions of others alone', async () => {
    // Prepare: Shopify deleted refunds/create after failed deliveries; another app's subscription
    shops().breakSubscription('shopify', 'refunds/create');
    shops().seedSubscriptions('shopify', {
      address: 'https://other-app.example/hooks',
      topics: ['refunds/create'],
    });
    // Act
    const before = await cli('doctor');
    const dryRun = await cli('subscribe', '--source', 'shopify', '--dry-run');
    const fixed = await cli('subscribe', '--source', 'shopify');
    const after = await cli('doctor');
    const again = await cli('subscribe', '--source', 'shopify');
    // Assess
    expect(before.code).toBe(1);
    expect(before.stdout).toContain(
      `topic refunds/create: no subscription delivers it to ${hook('shopify')} (it goes to https://other-app.example/hooks only)`,
    );
    expect(dryRun.stdout).toContain(`would create refunds/create → ${hook('shopify')}`);
    expect(fixed.stdout).toContain(`created refunds/create → ${hook('shopify')}`);
    expect(after.code, after.stdout).toBe(0);
    expect(again.stdout).toContain('shopify: nothing to do');
    const addresses = shops()
      .subscriptions('shopify')
      .filter((w) => w['topic'] === 'refunds/create')
      .map((w) => w['address']);
    expect(addresses.sort()).toEqual([hook('shopify'), 'https://other-app.example/hooks'].sort());
  });

  it('adds charge.refunded to the Stripe endpoint, keeping its other events', async () => {
    // Prepare: the endpoint lost charge.refunded
    shops().breakSubscription('stripe', 'charge.refunded');
    const endpoint = shops().subscriptions('stripe')[0];
    const id = String(endpoint?.['id']);
    // Act
    const before = await cli('doctor');
    const dryRun = await cli('subscribe', '--source', 'stripe', '--dry-run');
    const unchanged = shops().subscriptions('stripe')[0]?.['enabled_events'];
    const fixed = await cli('subscribe', '--source', 'stripe');
    const after = await cli('doctor');
    const again = await cli('subscribe', '--source', 'stripe');
    // Assess
    expect(before.code).toBe(1);
    expect(before.stdout).toMatch(
      new RegExp(
        `✗ shop webhooks stripe\\s+event charge\\.refunded: no endpoint to ${hook('stripe')} sends it`,
      ),
    );
    expect(dryRun.stdout).toContain(`would add charge.refunded to endpoint ${id}`);
    expect(unchanged).not.toContain('charge.refunded');
    expect(fixed.code, fixed.stderr).toBe(0);
    expect(fixed.stdout).toContain(`added charge.refunded to endpoint ${id}`);
    expect(after.code, after.stdout).toBe(0);
    expect(again.stdout).toContain('stripe: nothing to do');
    expect(shops().subscriptions('stripe')).toHaveLength(1);
    expect(shops().subscriptions('stripe')[0]?.['enabled_events']).toContain('checkout.session.completed');
  });

  it('creates a missing Stripe endpoint only when told to show its new signing secret', async () => {
    // Prepare: no endpoint delivers to the connector any more
    shops().breakSubscription('stripe', '*', 'delete');
    // Act
    const refused = await cli('subscribe', '--source', 'stripe');
    const dryRun = await cli('subscribe', '--source', 'stripe', '--dry-run');
    const endpointsBefore = shops().subscriptions('stripe').length;
    const created = await cli('subscribe', '--source', 'stripe', '--show-secret');
    const after = await cli('doctor');
    // Assess
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--show-secret');
    expect(endpointsBefore).toBe(0);
    expect(dryRun.code).toBe(0);
    expect(dryRun.stdout).toContain(`would create an endpoint for ${hook('stripe')}`);
    expect(created.code, created.stderr).toBe(0);
    const secret = String(shops().subscriptions('stripe').at(-1)?.['secret']);
    expect(secret).toMatch(/^whsec_/);
    expect(created.stdout).toContain(secret);
    expect(created.stdout).toContain('STRIPE_WEBHOOK_SECRET');
    expect(shops().subscriptions('stripe')).toHaveLength(1);
    expect(after.code, after.stdout).toBe(0);
  });

  it('prints what the shop wrote without its terminal control characters', async () => {
    // Prepare: another subscription of the topic whose address carries an escape sequence
    shops().breakSubscription('shopify', 'orders/cancelled');
    shops().seedSubscriptions('shopify', {
      address: 'https://evil.example/\u001b[2J\u001b]0;pwned\u0007',
      topics: ['orders/cancelled'],
    });
    // Act
    const checked = await cli('doctor');
    const fixed = await cli('subscribe', '--source', 'shopify');
    // Assess
    expect(checked.stdout).toContain('(it goes to https://evil.example/[2J]0;pwned only)');
    for (const control of ['\u001b', '\u0007']) expect(checked.stdout + fixed.stdout).not.toContain(control);
    expect(fixed.code, fixed.stderr).toBe(0);
  });

  it('refuses a source without shopApi and an unknown source, naming the setting', async () => {
    // Act
    const generic = await cli('subscribe', '--source', 'generic');
    const unknown = await cli('subscribe', '--source', 'nope');
    // Assess
    expect(generic.code).toBe(2);
    expect(generic.stderr).toContain('source generic has no shopApi');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown source "nope"');
  });
});

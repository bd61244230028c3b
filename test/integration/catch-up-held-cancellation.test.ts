import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildCatchUpDeps, makeHandler } from '../../functions/catch-up.ts';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { LOCAL_SECRETS } from '../../local/defaults.ts';
import { ledgerKey, waitingRefunds } from '../../shared/ledger.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';

/**
 * The scheduled catch-up and an order cancelled before the connector heard of it (every webhook
 * missed). Its cancellation alone cannot settle it: queued without an order to follow, it is held in
 * the ledger for an order that never comes, listed as waiting by status and reconcile and firing the
 * RefundWaitingForOrder alarm a day later, every day the order stays in the catch-up's window. What
 * the catch-up queues must settle such an order (never added, nothing waiting), and still refuse an
 * order the connector had added before its cancellation was missed.
 */
const CLICK = '0123456789abcdef01234567';
let stack: LocalStack;

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 } });
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  stack.sandbox?.shops.control.reset();
});

function handler(sources: unknown[]) {
  return makeHandler(
    buildCatchUpDeps({
      sqs: stack.emulators.sqs,
      secrets: new EnvSecretStore({ ...LOCAL_SECRETS }),
      env: { SOURCES: JSON.stringify(sources), QUEUE_URL: stack.emulators.queueUrl },
    }),
  );
}
const source = (id: string) => stack.sources.get(id)!;
const hoursAgo = (h: number) => new Date(Date.now() - h * 3600_000).toISOString();
const recordOf = (id: string, orderId: string) => stack.ledger.get(ledgerKey(source(id).program, orderId));
const conversionsOf = (orderId: string) =>
  (stack.sandbox?.control.conversions() ?? []).filter((c) => c.externalId === orderId);

describe('catch-up of an order cancelled while its webhooks were missed', () => {
  it('WooCommerce: records it never added, with nothing left waiting for an order that will not come', async () => {
    // Prepare
    const shops = stack.sandbox!.shops.control;
    const orderId = shops.createOrder('woocommerce', { clickId: CLICK, at: hoursAgo(3) }).orderId;
    shops.cancelOrder('woocommerce', orderId, { at: hoursAgo(2) });

    // Act
    await handler([source('woocommerce')])({});
    await stack.waitForIdle();
    await handler([source('woocommerce')])({});
    await stack.waitForIdle();

    // Assess
    const record = await recordOf('woocommerce', orderId);
    expect(conversionsOf(orderId)).toEqual([]);
    expect(record?.state).toBe('skipped');
    expect(waitingRefunds(record ? [record] : [])).toEqual([]);
  });

  it('WooCommerce: still refuses, once, an order added before its cancellation was missed', async () => {
    // Prepare: the order is caught up (added), then cancelled with its webhook missed
    const shops = stack.sandbox!.shops.control;
    const orderId = shops.createOrder('woocommerce', { clickId: CLICK, at: hoursAgo(3) }).orderId;
    await handler([source('woocommerce')])({});
    await stack.waitForIdle();
    shops.cancelOrder('woocommerce', orderId, { at: new Date().toISOString() });

    // Act
    await handler([source('woocommerce')])({});
    await stack.waitForIdle();
    await handler([source('woocommerce')])({});
    await stack.waitForIdle();

    // Assess
    expect(conversionsOf(orderId).map((c) => c.status)).toEqual(['refused']);
    expect((await recordOf('woocommerce', orderId))?.state).toBe('refused');
  });

  it('Shopify with orderTopic orders/paid: an unpaid order cancelled is settled, not left waiting', async () => {
    // Prepare
    const shops = stack.sandbox!.shops.control;
    const orderId = shops.createOrder('shopify', {
      clickId: CLICK,
      at: hoursAgo(3),
      financialStatus: 'pending',
    }).orderId;
    shops.cancelOrder('shopify', orderId, { at: hoursAgo(2) });

    // Act
    await handler([{ ...source('shopify'), orderTopic: 'orders/paid' }])({});
    await stack.waitForIdle();

    // Assess
    const record = await recordOf('shopify', orderId);
    expect(conversionsOf(orderId)).toEqual([]);
    expect(record?.state).toBe('skipped');
    expect(waitingRefunds(record ? [record] : [])).toEqual([]);
  });
});

import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { sandboxConversions } from '../support/sandbox.ts';
import { genericWebhook, post, sampleFixture, shopifyWebhook, stripeWebhook } from '../support/webhooks.ts';

const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const IP = '203.0.113.7';

/** The Shopify docs order as a shop that keeps click ids sends it, under its own id. */
function shopifyOrder(id: string): string {
  const order = JSON.parse(sampleFixture('shopify/order_2026-07_docs_example.json')) as Record<
    string,
    unknown
  >;
  order['id'] = id;
  order['note_attributes'] = [...(order['note_attributes'] as unknown[]), { name: 'aecid', value: CLICK }];
  order['browser_ip'] = IP;
  return JSON.stringify(order);
}

let stack: LocalStack;

beforeAll(async () => {
  // No pollers at first: the main queue is read as the door left it.
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, autoPoll: false });
});
afterAll(async () => {
  await stack?.close();
});

async function queued(): Promise<number> {
  const { Attributes } = await stack.emulators.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: stack.emulators.queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(Attributes?.['ApproximateNumberOfMessages'] ?? 0) +
    Number(Attributes?.['ApproximateNumberOfMessagesNotVisible'] ?? 0)
  );
}

describe('POST /webhooks/{source}: a body signed for one topic, sent under another', () => {
  it('answers 400 naming cancelled_at for an orders/create resent as orders/cancelled, queues nothing, and the conversion stays', async () => {
    // Prepare: the order, then its exact signed bytes under the cancellation topic
    const secret = stack.secrets['SHOPIFY_WEBHOOK_SECRET'] ?? '';
    const order = shopifyWebhook(shopifyOrder('880001'), secret, 'orders/create');
    const resent: typeof order = {
      body: order.body,
      headers: { ...order.headers, 'x-shopify-topic': 'orders/cancelled' },
    };

    // Act
    const placed = await post(`${stack.url}/webhooks/shopify`, order);
    const afterOrder = await queued();
    const mismatch = await post(`${stack.url}/webhooks/shopify`, resent);
    const afterMismatch = await queued();
    stack.startPolling();
    await stack.waitForIdle();

    // Assess
    expect(placed.status).toBe(202);
    expect(mismatch).toMatchObject({ status: 400, json: { error: 'bad_request', field: 'cancelled_at' } });
    expect(afterOrder).toBe(1);
    expect(afterMismatch).toBe(1);
    const conversions = sandboxConversions(stack, '880001');
    expect(conversions).toHaveLength(1);
    expect(conversions[0]?.status).not.toBe('refused');
    expect((await stack.ledger.get(`${stack.sources.get('shopify')?.program}#880001`))?.state).toBe('added');
  });

  it('answers 400 for a Stripe refund.created carrying a charge and a generic refund sent as cancel, queueing nothing', async () => {
    // Prepare: no pollers, so a queued message would stay in the count
    await stack.stopPolling();
    const charge = {
      ...JSON.parse(sampleFixture('stripe/charge_object_stripe_mock_fixture.json')),
      payment_intent: 'pi_1',
    };
    const stripe = JSON.stringify({
      id: 'evt_mismatch',
      object: 'event',
      type: 'refund.created',
      data: { object: charge },
    });
    const generic = JSON.stringify({ ...JSON.parse(sampleFixture('generic/refund.json')), type: 'cancel' });
    const before = await queued();
    // Act
    const fromStripe = await post(
      `${stack.url}/webhooks/stripe`,
      stripeWebhook(stripe, stack.secrets['STRIPE_WEBHOOK_SECRET'] ?? ''),
    );
    const fromGeneric = await post(
      `${stack.url}/webhooks/generic`,
      genericWebhook(generic, stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? ''),
    );
    // Assess
    expect(fromStripe).toMatchObject({ status: 400, json: { field: 'data.object.object' } });
    expect(fromGeneric).toMatchObject({ status: 400, json: { field: 'refundId' } });
    expect(await queued()).toBe(before);
  });
});

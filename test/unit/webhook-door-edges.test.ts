import { describe, expect, it } from 'vitest';
import { makeHandler } from '../../functions/webhook.ts';
import { MAX_EVENTS_PER_DELIVERY } from '../../shared/ingest.ts';
import { adapterFor } from '../../shared/platforms/registry.ts';
import { doorSecrets, sourcePerPlatform, webhookEvent } from '../support/door.ts';
import { RecordingQueue } from '../support/recording-queue.ts';
import { type SignedPlatform, signedHeaders } from '../support/webhooks.ts';
import { sampleJson } from './platforms/support.ts';

/**
 * The webhook door (`POST /webhooks/{source}`) at edges the platform suites do not reach: bytes that
 * are not UTF-8, event types named like JavaScript's own object members, headers that arrive twice
 * (API Gateway joins a repeated header with commas), deliveries that map to more events than one
 * invocation can queue. Each goes through the deployed handler with an API Gateway event.
 */

const SECRETS = doorSecrets('edge');
const { sources, secretStore: secrets } = sourcePerPlatform(SECRETS);

async function post(
  platform: SignedPlatform,
  body: Buffer,
  options: { topic?: string; headers?: (signed: Record<string, string>) => Record<string, string> } = {},
) {
  const queue = new RecordingQueue();
  const handler = makeHandler({ sources, adapterFor, secrets, queue, now: () => new Date() });
  const signed = signedHeaders(platform, SECRETS[platform], body, {
    ...(options.topic ? { topic: options.topic } : {}),
  });
  const result = await handler(webhookEvent(platform, options.headers?.(signed) ?? signed, body));
  return {
    status: result.statusCode,
    body: JSON.parse(String(result.body)) as Record<string, unknown>,
    queue,
  };
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

describe('a body that is not UTF-8', () => {
  // A module that writes Latin-1 (an old PrestaShop) signs its own bytes: the signature holds.
  const latin1 = Buffer.concat([
    Buffer.from('{"type":"order","orderId":"o-1","amount":"1.00","currency":"EUR","vouchers":["M'),
    Buffer.from([0xdc]),
    Buffer.from('LLER10"]}'),
  ]);

  it('is a 400 naming the body, not queued with U+FFFD in place of its characters', async () => {
    // Act
    const answer = await post('generic', latin1);

    // Assess
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ field: 'body', message: 'request body is not valid UTF-8' });
    expect(answer.queue.events).toEqual([]);
  });

  it('is a 400 naming the body in UTF-16 too, and the same order in UTF-8 (with a BOM) is queued as written', async () => {
    // Prepare
    const text = '{"type":"order","orderId":"o-1","amount":"1.00","currency":"EUR","vouchers":["MÜLLER10"]}';

    // Act
    const utf16 = await post('generic', Buffer.from(`\ufeff${text}`, 'utf16le'));
    const utf8 = await post('generic', Buffer.from(`\ufeff${text}`, 'utf8'));

    // Assess
    expect(utf16).toMatchObject({ status: 400, body: { field: 'body' } });
    expect(utf8.status).toBe(202);
    expect(utf8.queue.events[0]).toMatchObject({ vouchers: ['MÜLLER10'] });
  });
});

describe('a Stripe event type named like a member of every JavaScript object', () => {
  it.each(['constructor', 'toString', 'hasOwnProperty', '__proto__'])(
    'answers 200 ignored to type %s, as to any type it does not handle (not a 400 that Stripe retries)',
    async (type) => {
      // Act
      const answer = await post('stripe', json({ id: 'evt_1', type, data: { object: { object: 'event' } } }));

      // Assess
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual({ status: 'ignored', reason: `event type ${type} is not handled` });
    },
  );
});

describe('a header that arrived twice (API Gateway joins the values with commas)', () => {
  const order = json(sampleJson('shopify/order_2026-07_docs_example.json'));
  const twice = (value: string | undefined) => `${value},${value}`;

  it('reads a Shopify topic and signature sent twice with the same value as sent once', async () => {
    // Act
    const answer = await post('shopify', order, {
      headers: (h) => ({
        ...h,
        'x-shopify-topic': twice(h['x-shopify-topic']),
        'x-shopify-hmac-sha256': twice(h['x-shopify-hmac-sha256']),
      }),
    });

    // Assess: not a 401 that makes Shopify retry, nor a 200 "topic not handled" that drops the order
    expect(answer.status).toBe(202);
    expect(answer.queue.events).toMatchObject([{ type: 'OrderPlaced', externalId: '450789469' }]);
  });

  it('reads a WooCommerce topic and signature sent twice (Node joins them with ", ") as sent once', async () => {
    // Prepare
    const wooOrder = json(sampleJson('woocommerce/order_v3_docs_example.json'));

    // Act
    const answer = await post('woocommerce', wooOrder, {
      headers: (h) => ({
        ...h,
        'x-wc-webhook-topic': 'order.created, order.created',
        'x-wc-webhook-signature': `${h['x-wc-webhook-signature']}, ${h['x-wc-webhook-signature']}`,
      }),
    });

    // Assess
    expect(answer.status).toBe(202);
    expect(answer.queue.events).toHaveLength(1);
  });

  it('answers 400 naming the topic header when its values differ, rather than 200 "not handled"', async () => {
    // Act
    const answer = await post('shopify', order, {
      headers: (h) => ({ ...h, 'x-shopify-topic': 'orders/create,orders/cancelled' }),
    });

    // Assess
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ field: 'x-shopify-topic' });
    expect(answer.queue.events).toEqual([]);
  });

  it('still refuses a signature header whose values all fail', async () => {
    // Act
    const answer = await post('shopify', order, {
      headers: (h) => ({ ...h, 'x-shopify-hmac-sha256': `${'A'.repeat(43)}=,${'B'.repeat(43)}=` }),
    });

    // Assess
    expect(answer.status).toBe(401);
    expect(answer.queue.events).toEqual([]);
  });
});

describe('a delivery that maps to more events than one invocation can queue', () => {
  // Each event is one SQS send (about 10–30 ms): thousands of them outlast the function's 10 s, so
  // the shop would get a 5xx on every retry while each retry queued part of them again.
  function wooUpdate(refunds: number): Buffer {
    return json({
      ...sampleJson('woocommerce/order_v3_docs_example.json'),
      status: 'processing',
      refunds: Array.from({ length: refunds }, (_, i) => ({ id: i + 1, reason: '', total: '-0.01' })),
    });
  }

  it('answers 413 naming the count and the limit, and queues nothing', async () => {
    // Act
    const answer = await post('woocommerce', wooUpdate(MAX_EVENTS_PER_DELIVERY + 1), {
      topic: 'order.updated',
    });

    // Assess
    expect(answer.status).toBe(413);
    expect(answer.body['message']).toBe(
      `this body maps to ${MAX_EVENTS_PER_DELIVERY + 1} events, over the ${MAX_EVENTS_PER_DELIVERY} one delivery may queue`,
    );
    expect(answer.queue.events).toEqual([]);
  });

  it('queues a delivery of exactly the limit, one message per refund', async () => {
    // Act
    const answer = await post('woocommerce', wooUpdate(MAX_EVENTS_PER_DELIVERY), { topic: 'order.updated' });

    // Assess
    expect(answer.status).toBe(202);
    expect(answer.queue.events).toHaveLength(MAX_EVENTS_PER_DELIVERY);
  });

  it('answers 413 to a Stripe charge.refunded listing more refunds than the limit', async () => {
    // Prepare
    const refunds = Array.from({ length: MAX_EVENTS_PER_DELIVERY + 1 }, (_, i) => ({
      id: `re_${i}`,
      amount: 1,
      status: 'succeeded',
    }));
    const charge = {
      object: 'charge',
      id: 'ch_1',
      currency: 'eur',
      refunded: false,
      payment_intent: 'pi_1',
      refunds: { data: refunds },
    };

    // Act
    const answer = await post(
      'stripe',
      json({ id: 'evt_1', type: 'charge.refunded', data: { object: charge } }),
    );

    // Assess
    expect(answer.status).toBe(413);
    expect(answer.queue.events).toEqual([]);
  });
});

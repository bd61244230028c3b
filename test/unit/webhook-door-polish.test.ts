import { Logger } from '@aws-lambda-powertools/logger';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { makeHandler } from '../../functions/webhook.ts';
import { BadInputError } from '../../shared/errors.ts';
import { MAX_JSON_DEPTH, parseJsonBody } from '../../shared/json.ts';
import { observeIngest } from '../../shared/observability.ts';
import { adapterFor } from '../../shared/platforms/registry.ts';
import { doorSecrets, sourcePerPlatform, webhookEvent } from '../support/door.ts';
import { captureOutput } from '../support/logged.ts';
import { RecordingQueue } from '../support/recording-queue.ts';
import { type SignedPlatform, signedHeaders } from '../support/webhooks.ts';
import { sampleJson } from './platforms/support.ts';

/**
 * The webhook door (`POST /webhooks/{source}`) where the sender controls what we echo or build:
 * topics and Stripe event types quoted in an *ignored* answer and its log line, dedup keys the
 * adapter builds from payload fields, and JSON nested past what the big-number reviver can walk.
 * Each goes through the deployed handler with an API Gateway event, and its log line through the
 * deployed observer and Powertools' logger.
 */

const SECRETS = doorSecrets('polish');
const { sources, secretStore: secrets } = sourcePerPlatform(SECRETS);

/** What Powertools' logger writes (a JSON line per call, to stdout or stderr). */
const logged = captureOutput();

async function post(platform: SignedPlatform, body: Buffer, options: { topic?: string } = {}) {
  const queue = new RecordingQueue();
  const logger = new Logger({ serviceName: 'polish', logLevel: 'INFO' });
  const metrics = { addMetric: () => undefined };
  const handler = makeHandler({
    sources,
    adapterFor,
    secrets,
    queue,
    now: () => new Date(),
    observe: observeIngest(logger, metrics),
  });
  const headers = signedHeaders(platform, SECRETS[platform], body, {
    ...(options.topic !== undefined ? { topic: options.topic } : {}),
  });
  const result = await handler(webhookEvent(platform, headers, body));
  return {
    status: result.statusCode,
    body: JSON.parse(String(result.body)) as Record<string, unknown>,
    queue,
  };
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
// biome-ignore lint/suspicious/noControlCharactersInRegex: looking for control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

describe('a topic or event type the sender made very long, or wrote with control characters', () => {
  const long = `\u001b[2J${'x'.repeat(10_000)}\u0007\r\nforged log line`;
  const wooOrder = sampleJson('woocommerce/order_v3_docs_example.json');
  const session = sampleJson('stripe/checkout_session_object_stripe_mock_fixture.json');
  const cases: [string, SignedPlatform, Buffer, string | undefined][] = [
    ['a Shopify topic', 'shopify', json(sampleJson('shopify/order_2026-07_docs_example.json')), long],
    ['a WooCommerce topic', 'woocommerce', json(wooOrder), long],
    ['a Stripe event type', 'stripe', json({ id: 'evt_1', type: long, data: { object: {} } }), undefined],
    [
      'a WooCommerce order status',
      'woocommerce',
      json({ ...wooOrder, status: long, refunds: [] }),
      'order.updated',
    ],
    [
      'a Stripe checkout payment_status',
      'stripe',
      json({
        id: 'evt_2',
        type: 'checkout.session.completed',
        data: { object: { ...session, object: 'checkout.session', mode: 'payment', payment_status: long } },
      }),
      undefined,
    ],
    [
      'a Stripe charge id',
      'stripe',
      json({
        id: 'evt_3',
        type: 'charge.refunded',
        data: { object: { object: 'charge', id: `ch_${long}`, currency: 'eur', refunded: true } },
      }),
      undefined,
    ],
  ];

  it.each(cases)(
    '%s is quoted short and printable in the ignored answer and its log line',
    async (_name, platform, body, topic) => {
      // Act
      const answer = await post(platform, body, { ...(topic !== undefined ? { topic } : {}) });

      // Assess
      expect(answer.status).toBe(200);
      expect(answer.body['status']).toBe('ignored');
      const reason = String(answer.body['reason']);
      expect(reason.length).toBeLessThan(300);
      expect(reason).not.toMatch(CONTROL);
      expect(reason).toContain('[2Jxxxx');
      expect(reason).toContain('…');
      expect(answer.queue.events).toEqual([]);
      const line = logged.join('');
      expect(line).toContain('"webhook ignored"');
      expect(line.length).toBeLessThan(1000);
      expect(JSON.parse(line)).toMatchObject({ detail: reason });
    },
  );

  it('quotes a short topic as it came', async () => {
    // Act
    const answer = await post('woocommerce', json(wooOrder), { topic: 'action.woocommerce_new_order' });

    // Assess
    expect(answer.body).toEqual({
      status: 'ignored',
      reason: 'topic action.woocommerce_new_order is not handled',
    });
  });
});

describe('a dedup key the adapter builds from payload fields that are each valid', () => {
  // The event id is ours (the queue's deduplication id is a hash of it): a shop cannot change how
  // WooCommerce writes a date, and must not see its order refused for how long our key came out.
  const wooOrder = sampleJson('woocommerce/order_v3_docs_example.json');
  const longDate = `2017-03-22T19:28:08.${'0'.repeat(600)}`;

  it('queues a WooCommerce order whose date_modified_gmt is long, with a key within the limit', async () => {
    // Act
    const first = await post('woocommerce', json({ ...wooOrder, date_modified_gmt: longDate }));
    const again = await post('woocommerce', json({ ...wooOrder, date_modified_gmt: longDate }));
    const later = await post('woocommerce', json({ ...wooOrder, date_modified_gmt: `${longDate}1` }));

    // Assess: the same delivery keeps its key (a retry is deduplicated), another gets another
    expect(first.status).toBe(202);
    const [placed] = first.queue.events;
    expect(placed).toMatchObject({ type: 'OrderPlaced', externalId: '727' });
    expect(placed?.eventId.length).toBeLessThanOrEqual(512);
    expect(again.queue.events[0]?.eventId).toBe(placed?.eventId);
    expect(later.status).toBe(202);
    expect(later.queue.events[0]?.eventId).not.toBe(placed?.eventId);
  });

  it('queues each refund of a WooCommerce order.updated whose order id and date together run long', async () => {
    // Prepare: an order id (200) and a date (300) each well within limits; with the refund suffix, over 512
    const body = json({
      ...wooOrder,
      id: `order-${'9'.repeat(194)}`,
      date_modified_gmt: `2017-03-22T19:28:08.${'1'.repeat(280)}`,
      status: 'processing',
      refunds: [
        { id: 1, reason: '', total: '-1.00' },
        { id: 2, reason: '', total: '-2.00' },
      ],
    });

    // Act
    const answer = await post('woocommerce', body, { topic: 'order.updated' });

    // Assess
    expect(answer.status).toBe(202);
    expect(answer.queue.events.map((e) => e.type)).toEqual(['OrderRefunded', 'OrderRefunded']);
    const [one, two] = answer.queue.events.map((e) => e.eventId);
    expect(one?.length).toBeLessThanOrEqual(512);
    expect(one).not.toBe(two);
  });

  it('queues each refund of a Stripe charge.refunded whose event id and refund ids together run long', async () => {
    // Prepare: the event id is 504 characters (within 512), and `<event id>:<refund id>` is each refund's key
    const charge = {
      object: 'charge',
      id: 'ch_1',
      currency: 'eur',
      refunded: false,
      payment_intent: 'pi_1',
      refunds: {
        data: [
          { id: 're_first', amount: 100, status: 'succeeded' },
          { id: 're_second', amount: 200, status: 'succeeded' },
        ],
      },
    };

    // Act
    const answer = await post(
      'stripe',
      json({ id: `evt_${'a'.repeat(500)}`, type: 'charge.refunded', data: { object: charge } }),
    );

    // Assess
    expect(answer.status).toBe(202);
    const ids = answer.queue.events.map((e) => e.eventId);
    expect(ids).toHaveLength(2);
    expect(ids.every((id) => id.length <= 512)).toBe(true);
    expect(ids[0]).not.toBe(ids[1]);
  });

  it('keeps a key within the limit as it was built', async () => {
    // Act
    const answer = await post('woocommerce', json(wooOrder));

    // Assess
    expect(answer.queue.events[0]?.eventId).toBe('order.created:727:2017-03-22T19:28:08');
  });
});

describe('a JSON body nested deeper than any shop writes', () => {
  /** The generic order with `extra` nested `levels` arrays deep (the body itself is one level more). */
  function genericOrder(levels: number, innermost: string): Buffer {
    const order = { type: 'order', orderId: 'o-deep', amount: '1.00', currency: 'EUR', extra: '@' };
    const text = JSON.stringify(order).replace(
      '"@"',
      `${'['.repeat(levels)}${innermost}${']'.repeat(levels)}`,
    );
    return Buffer.from(text);
  }
  const BIG = '12345678901234567';

  it.each([3_000, 10_000, 100_000])(
    'answers %i levels alike with or without a 16-digit number: a 400 naming body that says so',
    async (levels) => {
      // Act
      const plain = await post('generic', genericOrder(levels, '1'));
      const big = await post('generic', genericOrder(levels, BIG));

      // Assess
      for (const answer of [plain, big]) {
        expect(answer.status).toBe(400);
        expect(answer.body).toEqual({
          error: 'bad_request',
          field: 'body',
          message: `request body is nested too deep (over ${MAX_JSON_DEPTH} levels)`,
        });
        expect(answer.queue.events).toEqual([]);
      }
    },
  );

  it('queues a body nested exactly to the limit, its big numbers kept as their text', async () => {
    // Act
    const plain = await post('generic', genericOrder(MAX_JSON_DEPTH - 1, '1'));
    const big = await post('generic', genericOrder(MAX_JSON_DEPTH - 1, BIG));

    const over = await post('generic', genericOrder(MAX_JSON_DEPTH, BIG));

    // Assess
    expect(plain.status).toBe(202);
    expect(big.status).toBe(202);
    expect(over).toMatchObject({ status: 400, body: { field: 'body' } });
    let value: unknown = parseJsonBody(genericOrder(MAX_JSON_DEPTH - 1, BIG));
    value = (value as { extra: unknown }).extra;
    while (Array.isArray(value)) value = value[0];
    expect(value).toBe(BIG);
  });

  it('counts brackets inside strings as text, not as nesting', () => {
    // Prepare
    const raw = Buffer.from(`{"note":${JSON.stringify(`${'['.repeat(5_000)}{"}`)},"id":9007199254740993}`);

    // Act / Assess
    expect(parseJsonBody(raw)).toEqual({ note: `${'['.repeat(5_000)}{"}`, id: '9007199254740993' });
  });

  it('refuses any body exactly when it nests over the limit, whatever its strings hold', () => {
    // Strings full of brackets, quotes and runs of backslashes: only JSON's own nesting counts.
    const text = fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a', ' ') });
    const value = fc.letrec<{ value: unknown }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        text,
        fc.integer(),
        fc.array(tie('value'), { maxLength: 3 }),
        fc.dictionary(text, tie('value'), { maxKeys: 3 }),
      ),
    })).value;
    const depthOf = (v: unknown): number =>
      typeof v === 'object' && v !== null ? 1 + Math.max(0, ...Object.values(v).map(depthOf)) : 0;
    fc.assert(
      fc.property(value, fc.integer({ min: -2, max: 2 }), (inner, offset) => {
        // Prepare: wrapped in arrays up to the limit give or take two levels
        const wraps = Math.max(0, MAX_JSON_DEPTH + offset - depthOf(inner));
        const raw = Buffer.from(`${'['.repeat(wraps)}${JSON.stringify(inner)}${']'.repeat(wraps)}`);
        const depth = wraps + depthOf(inner);

        // Act
        let refused = false;
        try {
          parseJsonBody(raw);
        } catch (error) {
          refused = error instanceof BadInputError && error.field === 'body';
        }

        // Assess
        expect(refused).toBe(depth > MAX_JSON_DEPTH);
      }),
    );
  });

  it('refuses a too-deep body with a BadInputError, never a RangeError', () => {
    // Act
    let error: unknown;
    try {
      parseJsonBody(Buffer.from(`${'{"a":'.repeat(200_000)}1${'}'.repeat(200_000)}`));
    } catch (e) {
      error = e;
    }

    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect((error as BadInputError).field).toBe('body');
  });
});

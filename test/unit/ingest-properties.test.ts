import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { SOURCE_PLATFORMS } from '../../shared/domain/platforms.ts';
import { MAX_BODY_BYTES } from '../../shared/http/answers.ts';
import { ingestWebhook } from '../../shared/ingest.ts';
import { adapterFor } from '../../shared/platforms/registry.ts';
import type { EventQueue } from '../../shared/ports.ts';
import { doorSecrets, sourcePerPlatform } from '../support/door.ts';
import { signedHeaders } from '../support/webhooks.ts';
import { sampleJson } from './platforms/support.ts';

const PLATFORMS = SOURCE_PLATFORMS;
type Platform = (typeof PLATFORMS)[number];
const SECRETS = doorSecrets('prop');
/** The documented answers of POST /webhooks/{source}; 503 only when SQS or the secret store fails. */
const DOCUMENTED = [200, 202, 400, 401, 404, 413, 415];

/** One source per platform, as the local stack configures them. */
const { sources, secretStore } = sourcePerPlatform(SECRETS);

class MemoryQueue implements EventQueue {
  readonly sent: ConnectorEvent[] = [];
  async send(event: ConnectorEvent): Promise<string> {
    this.sent.push(event);
    return `m-${this.sent.length}`;
  }
}

async function ingest(source: string, headers: Record<string, string>, rawBody: Buffer) {
  const queue = new MemoryQueue();
  const deps = { sources, adapterFor, secrets: secretStore, queue, now: () => new Date() };
  const answer = await ingestWebhook(deps, source, { headers, rawBody });
  return { answer, queue };
}

/** Valid signature headers for exactly these bytes, with a topic that each platform maps. */
function signed(platform: Platform, body: Buffer, topic?: string): Record<string, string> {
  return signedHeaders(platform, SECRETS[platform], body, {
    eventId: 'prop-event',
    ...(topic ? { topic } : {}),
  });
}

const KNOWN_HEADERS = [
  'content-type',
  'x-shopify-topic',
  'x-shopify-hmac-sha256',
  'x-shopify-event-id',
  'x-wc-webhook-topic',
  'x-wc-webhook-signature',
  'x-wc-webhook-source',
  'stripe-signature',
  'x-connector-timestamp',
  'x-connector-signature',
  'content-encoding',
];

/** Bytes of every kind a caller can send: binary, invalid UTF-8, text, JSON, form bodies, edge sizes. */
const anyBody: fc.Arbitrary<Buffer> = fc.oneof(
  fc.uint8Array({ maxLength: 2048 }).map((b) => Buffer.from(b)),
  fc
    .tuple(
      fc.string(),
      fc.constantFrom([0xff], [0xc3], [0xed, 0xa0, 0x80], [0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]),
    )
    .map(([text, bad]) => Buffer.concat([Buffer.from(text), Buffer.from(bad), Buffer.from(text)])),
  fc.string({ unit: 'grapheme', maxLength: 500 }).map((s) => Buffer.from(s)),
  fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null')),
  fc
    .dictionary(fc.string({ maxLength: 12 }), fc.string({ maxLength: 24 }))
    .map((d) => Buffer.from(new URLSearchParams(d).toString())),
  fc
    .constantFrom('webhook_id=1', 'webhook_id=', '', '{}', '[]', 'null', '{"type":"order"}')
    .map((s) => Buffer.from(s)),
  fc.integer({ min: MAX_BODY_BYTES - 2, max: MAX_BODY_BYTES + 2 }).map((n) => Buffer.alloc(n, 0x7b)),
);

const anyHeaders: fc.Arbitrary<Record<string, string>> = fc
  .tuple(
    fc.dictionary(
      fc.constantFrom(...KNOWN_HEADERS),
      fc.oneof(fc.string({ maxLength: 80 }), fc.base64String({ maxLength: 64 })),
    ),
    fc.dictionary(
      fc.string({ minLength: 1, maxLength: 20 }).map((s) => s.toLowerCase()),
      fc.string({ maxLength: 40 }),
      { maxKeys: 3 },
    ),
  )
  .map(([known, extra]) => ({ ...extra, ...known }));

const anySource = fc.oneof(fc.constantFrom(...PLATFORMS, 'unknown'), fc.string({ maxLength: 70 }));

describe('ingestWebhook on arbitrary input', () => {
  it('never throws and answers only a documented status, whatever the body, headers and source', async () => {
    await fc.assert(
      fc.asyncProperty(anySource, anyHeaders, anyBody, async (source, headers, body) => {
        const { answer, queue } = await ingest(source, headers, body);

        expect(DOCUMENTED).toContain(answer.status);
        if (answer.status !== 202) expect(queue.sent).toEqual([]);
      }),
      { numRuns: 400, seed: 6_001 },
    );
  });

  it('answers 200, 202, 400 or 415 (never 401 or 5xx) to any correctly signed body', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...PLATFORMS), anyBody, async (platform, body) => {
        fc.pre(body.byteLength <= MAX_BODY_BYTES);

        const { answer } = await ingest(platform, signed(platform, body), body);

        // 415: random bytes that start like gzip (0x1f 0x8b).
        expect([200, 202, 400, 415]).toContain(answer.status);
      }),
      { numRuns: 300, seed: 6_002 },
    );
  });
});

/** A generic order that the adapter accepts, to break one field at a time. */
const GENERIC_ORDER = {
  type: 'order',
  eventId: 'e-1',
  orderId: 'o-1',
  amount: '49.90',
  currency: 'EUR',
  clickIds: ['a1b2c3d4e5f60718293a4b5c'],
};
const notAString = fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.constant({}), fc.constant([]));
const genericBreaks: fc.Arbitrary<[string, unknown]> = fc.oneof(
  fc.tuple(
    fc.constant('amount'),
    fc.oneof(notAString, fc.constantFrom('', 'twelve', '1,5', '1.2.3', '--1', 'NaN', 'Infinity')),
  ),
  fc.tuple(fc.constant('currency'), fc.oneof(notAString, fc.constantFrom('', 'EURO', 'e', '12'))),
  fc.tuple(
    fc.constant('orderId'),
    fc.oneof(fc.constant(null), fc.constant({}), fc.constant([]), fc.constant(''), fc.boolean()),
  ),
  fc.tuple(fc.constant('type'), fc.oneof(notAString, fc.constantFrom('', 'purchase', 'ORDER'))),
  fc.tuple(fc.constant('clickIds'), fc.oneof(fc.integer(), fc.string({ minLength: 1 }), fc.constant({}))),
);

function shopifyOrder(): Record<string, unknown> {
  return sampleJson('shopify/order_2026-07_docs_example.json');
}
const shopifyBreaks: fc.Arbitrary<(order: Record<string, unknown>) => void> = fc.oneof(
  fc.constantFrom('twelve', '', '1e3', '0x10').map((price) => (order: Record<string, unknown>) => {
    const line = (order['line_items'] as Array<Record<string, unknown>>)[0] as Record<string, unknown>;
    line['price'] = price;
    line['price_set'] = { shop_money: { amount: price, currency_code: 'USD' } };
  }),
  fc.constantFrom('id', 'line_items', 'currency').map((key) => (order: Record<string, unknown>) => {
    order[key] = key === 'line_items' ? 'none' : { not: 'valid' };
  }),
);

describe('a valid signature over a body that breaks the schema', () => {
  it('is a 400 naming a field for the generic platform, and nothing is queued', async () => {
    await fc.assert(
      fc.asyncProperty(genericBreaks, fc.boolean(), async ([field, value], remove) => {
        const body = Buffer.from(
          JSON.stringify({ ...GENERIC_ORDER, [field]: remove && field !== 'type' ? undefined : value }),
        );
        fc.pre(!(remove && field === 'clickIds'));

        const { answer, queue } = await ingest('generic', signed('generic', body), body);

        expect(answer.status).toBe(400);
        expect(queue.sent).toEqual([]);
      }),
      { numRuns: 200, seed: 6_003 },
    );
  });

  it('is a 400 for a Shopify order with a broken field, and nothing is queued', async () => {
    await fc.assert(
      fc.asyncProperty(shopifyBreaks, async (breakIt) => {
        const order = shopifyOrder();
        breakIt(order);
        const body = Buffer.from(JSON.stringify(order));

        const { answer, queue } = await ingest('shopify', signed('shopify', body), body);

        expect(answer.status).toBe(400);
        expect(queue.sent).toEqual([]);
      }),
      { numRuns: 50, seed: 6_004 },
    );
  });

  it('still maps the unbroken samples (the properties above start from valid bodies)', async () => {
    const generic = Buffer.from(JSON.stringify(GENERIC_ORDER));
    const shopify = Buffer.from(JSON.stringify(shopifyOrder()));

    const answers = await Promise.all([
      ingest('generic', signed('generic', generic), generic),
      ingest('shopify', signed('shopify', shopify), shopify),
    ]);

    expect(answers.map((a) => a.answer.status)).toEqual([202, 202]);
  });
});

describe('amounts that only overflow once combined', () => {
  it('answers 400 naming the price, not a 500, when price × quantity passes MAX_SAFE_INTEGER minor units', async () => {
    // Prepare: each value alone is a valid amount (5e15 minor units < 2^53); their product is not
    const order = shopifyOrder();
    const line = (order['line_items'] as Array<Record<string, unknown>>)[0]!;
    line['price'] = '50000000000000.00';
    line['price_set'] = { shop_money: { amount: '50000000000000.00', currency_code: 'USD' } };
    line['quantity'] = 2;
    const body = Buffer.from(JSON.stringify(order));
    // Act
    const { answer, queue } = await ingest('shopify', signed('shopify', body), body);
    // Assess
    expect(answer).toMatchObject({
      status: 400,
      body: { error: 'bad_request', field: 'line_items.0.price_set.shop_money.amount' },
    });
    expect(queue.sent).toEqual([]);
  });

  it('answers 400, not a 500, when the arithmetic of an adapter throws a RangeError (the safety net)', async () => {
    // Prepare: an adapter that fails the way unchecked arithmetic on payload numbers does
    const queue = new MemoryQueue();
    const deps = {
      sources,
      adapterFor: async () => ({
        platform: 'generic' as const,
        handle: () => {
          throw new RangeError('Invalid time value');
        },
        map: () => {
          throw new RangeError('Invalid time value');
        },
      }),
      secrets: secretStore,
      queue,
      now: () => new Date(),
    };
    // Act
    const answer = await ingestWebhook(deps, 'generic', { headers: {}, rawBody: Buffer.from('{}') });
    // Assess
    expect(answer).toMatchObject({ status: 400, body: { error: 'bad_request', field: null } });
    expect(queue.sent).toEqual([]);
  });
});

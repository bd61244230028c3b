import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ConnectorEvent } from '../../../shared/domain/events.ts';
import { SOURCE_PLATFORMS, type SourcePlatform } from '../../../shared/domain/platforms.ts';
import type { HttpAnswer } from '../../../shared/http/types.ts';
import { type IngestOutcome, ingestWebhook } from '../../../shared/ingest.ts';
import { adapterFor } from '../../../shared/platforms/registry.ts';
import type { AdapterLoader } from '../../../shared/platforms/types.ts';
import { sourcePerPlatform } from '../../support/door.ts';
import { RecordingQueue } from '../../support/recording-queue.ts';
import { signedHeaders } from '../../support/webhooks.ts';
import { NOW, NOW_S, sampleJson } from './support.ts';

/**
 * The contract every shop platform's adapter keeps at the door (`ingestWebhook`, as the webhook
 * function runs it): the signature is checked on the exact bytes with every accepted secret, a bad
 * or missing one is a 401, a topic the adapter does not act on gets what the docs promise, ids stay
 * exact strings, money is read exactly in the currency's minor units or refused with a 400 naming
 * the field, and no body makes the door throw. `KITS` is a `Record` over `SOURCE_PLATFORMS`, so a
 * new platform does not compile until it has a kit, and then it runs every case below. Where a
 * platform differs (Stripe's integer amounts, generic's refused unknown type), its kit says so.
 */

/** What a delivery carries besides its signature: the bytes, and the topic where a header names it. */
interface Delivery {
  readonly body: string;
  /** The topic header's value; undefined where the body says what it is (Stripe, generic). */
  readonly topic: string | undefined;
}

/** What the door answers a verified delivery of a topic (or event type) the adapter does not act on. */
type UnknownTopicAnswer =
  | { readonly status: 200 }
  | { readonly status: 400; readonly field: string; readonly why: string };

/** How one platform's deliveries are made, for the contract below. */
interface Kit {
  /** The headers the platform sends with exactly `body`, signed with `secret` at NOW. */
  readonly sign: (body: Buffer, secret: string, topic: string | undefined) => Record<string, string>;
  /** The headers that carry the signature: without them a delivery is unsigned. */
  readonly signatureHeaders: readonly string[];
  /**
   * An order the adapter maps to one OrderPlaced, indented with spaces (so that re-serializing it
   * changes its bytes), with `id` and `amount` written as the raw JSON given (`"A-1"`,
   * `9007199254740993`, `"12.30"`, `1230`) where the platform writes the order id and its amount.
   */
  readonly order: (parts: {
    readonly id: string;
    readonly amount: string;
    readonly currency: string;
  }) => Delivery;
  /**
   * The payload path of the amount `order` writes, as a 400 names it (or names its parent: a
   * WooCommerce line may be negative, an order adding up below zero is a 400 naming `line_items`).
   */
  readonly amountField: string;
  /**
   * How the platform writes an amount: a decimal string of major units (`"19.99"`), or an integer
   * of minor units (`1999`), with why.
   */
  readonly money:
    | { readonly kind: 'decimal string' }
    | { readonly kind: 'integer minor units'; readonly why: string };
  /** How the platform writes an order id: a JSON integer or a string, or only a string (with why). */
  readonly ids:
    | { readonly kind: 'integer or string' }
    | { readonly kind: 'string only'; readonly why: string };
  /** A signed delivery of a topic (or event type) the adapter does not act on, and the promised answer. */
  readonly unknownTopic: { readonly delivery: Delivery; readonly answer: UnknownTopicAnswer };
}

/** Written into a fixture where `order` puts the raw id and amount. */
const ID = '@@contract-id@@';
const AMOUNT = '@@contract-amount@@';

/** The fixture, indented, with the placeholders replaced by the raw JSON given. */
function written(json: unknown, parts: { readonly id: string; readonly amount: string }): string {
  const text = JSON.stringify(json, null, 2);
  expect(text).toContain(`"${ID}"`);
  expect(text).toContain(`"${AMOUNT}"`);
  return text.replaceAll(`"${ID}"`, parts.id).replaceAll(`"${AMOUNT}"`, parts.amount);
}

const sign =
  (platform: SourcePlatform) =>
  (body: Buffer, secret: string, topic: string | undefined): Record<string, string> =>
    signedHeaders(platform, secret, body, { now: NOW_S, ...(topic === undefined ? {} : { topic }) });

/** Shopify's documentation order, cut to one line whose `price` is the amount. */
function shopifyOrder(currency: string): Record<string, unknown> {
  const order = sampleJson('shopify/order_2026-07_docs_example.json');
  const [line] = order['line_items'] as Record<string, unknown>[];
  const { price_set: _shopMoney, ...plain } = line!;
  return {
    ...order,
    id: ID,
    currency,
    taxes_included: false,
    line_items: [{ ...plain, price: AMOUNT, quantity: 1, tax_lines: [], discount_allocations: [] }],
  };
}

/**
 * WooCommerce's documentation order, cut to one line whose `total` is the amount, without tax or
 * shipping. The order's `total` (which the adapter reads only to tell the tax mode) is 0: written
 * as the amount too, it would be the field a refused amount is named by.
 */
function wooOrder(currency: string): Record<string, unknown> {
  const order = sampleJson('woocommerce/order_v3_docs_example.json');
  const [line] = order['line_items'] as Record<string, unknown>[];
  return {
    ...order,
    id: ID,
    currency,
    total: '0',
    total_tax: '0',
    shipping_total: '0',
    shipping_tax: '0',
    cart_tax: '0',
    discount_total: '0',
    discount_tax: '0',
    line_items: [
      { ...line, quantity: 1, subtotal: AMOUNT, total: AMOUNT, subtotal_tax: '0', total_tax: '0' },
    ],
    tax_lines: [],
    shipping_lines: [],
    coupon_lines: [],
  };
}

/** Stripe's event envelope around its Checkout Session fixture, paid, whose `amount_total` is the amount. */
function stripeEvent(type: string, currency: string): Record<string, unknown> {
  const envelope = sampleJson('stripe/event_envelope_stripe_mock_fixture.json');
  const session = sampleJson('stripe/checkout_session_object_stripe_mock_fixture.json');
  return {
    ...envelope,
    id: 'evt_contract_0001',
    type,
    data: {
      object: {
        ...session,
        payment_status: 'paid',
        amount_total: AMOUNT,
        currency: currency.toLowerCase(),
        total_details: { amount_discount: 0, amount_shipping: 0, amount_tax: 0 },
        metadata: { order_id: ID },
      },
    },
  };
}

/** The generic webhook's documentation order. */
function genericOrder(type: string, currency: string): Record<string, unknown> {
  return { ...sampleJson('generic/order.json'), type, orderId: ID, amount: AMOUNT, currency };
}

const KITS: Readonly<Record<SourcePlatform, Kit>> = {
  shopify: {
    sign: sign('shopify'),
    signatureHeaders: ['x-shopify-hmac-sha256'],
    order: ({ id, amount, currency }) => ({
      body: written(shopifyOrder(currency), { id, amount }),
      topic: 'orders/create',
    }),
    amountField: 'line_items.0.price',
    money: { kind: 'decimal string' },
    ids: { kind: 'integer or string' },
    unknownTopic: {
      delivery: {
        body: written(shopifyOrder('USD'), { id: '450789469', amount: '"10.00"' }),
        topic: 'products/update',
      },
      answer: { status: 200 },
    },
  },
  woocommerce: {
    sign: sign('woocommerce'),
    signatureHeaders: ['x-wc-webhook-signature'],
    order: ({ id, amount, currency }) => ({
      body: written(wooOrder(currency), { id, amount }),
      topic: 'order.created',
    }),
    amountField: 'line_items.0.total',
    money: { kind: 'decimal string' },
    ids: { kind: 'integer or string' },
    unknownTopic: {
      delivery: {
        body: written(wooOrder('USD'), { id: '727', amount: '"10.00"' }),
        topic: 'product.updated',
      },
      answer: { status: 200 },
    },
  },
  stripe: {
    sign: sign('stripe'),
    signatureHeaders: ['stripe-signature'],
    order: ({ id, amount, currency }) => ({
      body: written(stripeEvent('checkout.session.completed', currency), { id, amount }),
      topic: undefined,
    }),
    amountField: 'data.object.amount_total',
    money: {
      kind: 'integer minor units',
      why: "Stripe writes amounts as integers of its smallest unit (docs/shop-platforms.md#money); the adapter converts the currencies where Stripe's unit is not ISO 4217's",
    },
    ids: {
      kind: 'string only',
      why: 'the order id comes from metadata.order_id (or the PaymentIntent id), and Stripe metadata values are strings',
    },
    unknownTopic: {
      delivery: {
        body: written(stripeEvent('customer.created', 'EUR'), { id: '"A-1"', amount: '1000' }),
        topic: undefined,
      },
      answer: { status: 200 },
    },
  },
  generic: {
    sign: sign('generic'),
    signatureHeaders: ['x-connector-signature'],
    order: ({ id, amount, currency }) => ({
      body: written(genericOrder('order', currency), { id, amount }),
      topic: undefined,
    }),
    amountField: 'amount',
    money: { kind: 'decimal string' },
    ids: { kind: 'integer or string' },
    unknownTopic: {
      delivery: {
        body: written(genericOrder('shipment', 'EUR'), { id: '"A-1"', amount: '"10.00"' }),
        topic: undefined,
      },
      answer: {
        status: 400,
        field: 'type',
        why: "the shop module's own code writes `type` and sees the answer (docs/generic-webhook.md): order, refund or cancel",
      },
    },
  },
};

const SECRETS: Record<SourcePlatform, string> = Object.fromEntries(
  SOURCE_PLATFORMS.map((p) => [p, `contract-${p}-current`]),
) as Record<SourcePlatform, string>;
const PREVIOUS: Record<SourcePlatform, string> = Object.fromEntries(
  SOURCE_PLATFORMS.map((p) => [p, `contract-${p}-previous`]),
) as Record<SourcePlatform, string>;
/** One source per platform (id = platform), accepting its current and previous secret. */
const { sources, secretStore } = sourcePerPlatform(SECRETS, PREVIOUS);

/** The adapters the door loads: the registry's, as the webhook function has them. */
const ADAPTER_FOR: AdapterLoader = adapterFor;

/** A delivery through the door, with what it queued and what its log line was told. */
async function door(platform: SourcePlatform, headers: Record<string, string>, body: Buffer | string) {
  const queue = new RecordingQueue();
  const outcomes: IngestOutcome[] = [];
  const deps = {
    sources,
    adapterFor: ADAPTER_FOR,
    secrets: secretStore,
    queue,
    now: () => NOW,
    observe: (outcome: IngestOutcome) => outcomes.push(outcome),
  };
  const rawBody = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const answer = await ingestWebhook(deps, platform, { headers, rawBody });
  // Every answer is logged (the `webhook queued` / `webhook not queued` line): a throw never is.
  expect(outcomes.map((o) => o.status)).toEqual([answer.status]);
  if (answer.status !== 202) expect(queue.events).toEqual([]);
  return { answer, events: queue.events };
}

/** Sends `delivery` signed with `secret` over `signedBytes` (by default the very bytes sent). */
function signedDoor(
  platform: SourcePlatform,
  delivery: Delivery,
  options: { readonly secret?: string; readonly signedBytes?: string } = {},
) {
  const kit = KITS[platform];
  const signedBytes = Buffer.from(options.signedBytes ?? delivery.body);
  const headers = kit.sign(signedBytes, options.secret ?? SECRETS[platform], delivery.topic);
  return door(platform, headers, delivery.body);
}

/** The one OrderPlaced a 202 queued. */
function placedOf(result: { answer: HttpAnswer; events: ConnectorEvent[] }) {
  expect(result.answer).toMatchObject({ status: 202, body: { status: 'queued' } });
  expect(result.events).toHaveLength(1);
  const [event] = result.events;
  if (event?.type !== 'OrderPlaced') throw new Error(`expected an OrderPlaced, got ${event?.type}`);
  return event;
}

/** A plain order of each platform: order id `A-1`, EUR 19.99. */
function plainOrder(platform: SourcePlatform): Delivery {
  const kit = KITS[platform];
  return kit.order({
    id: '"A-1"',
    amount: kit.money.kind === 'decimal string' ? '"19.99"' : '1999',
    currency: 'EUR',
  });
}

/**
 * Amounts as a decimal string of major units: the raw JSON written, its currency, and the minor
 * units it is, or `400` (refused naming the amount's field). docs/shop-platforms.md#money.
 */
const DECIMAL_AMOUNTS: ReadonlyArray<readonly [string, string, number | 400]> = [
  ['"19.99"', 'EUR', 1999],
  ['"0.29"', 'EUR', 29],
  ['"1990"', 'JPY', 1990],
  ['"1500.00"', 'JPY', 1500],
  ['"19.5"', 'JPY', 400],
  ['"10.005"', 'KWD', 10005],
  ['"90071992547409.91"', 'EUR', 9007199254740991],
  ['"0x10"', 'EUR', 400],
  ['"1e3"', 'EUR', 400],
  ['"1E3"', 'JPY', 400],
  ['"12abc"', 'EUR', 400],
  ['"1,5"', 'EUR', 400],
  ['" 12"', 'EUR', 400],
  ['"-1.00"', 'EUR', 400],
  ['"Infinity"', 'EUR', 400],
  ['""', 'EUR', 400],
  ['"19.999"', 'EUR', 400],
  ['"90071992547409.92"', 'EUR', 400],
];

/** Amounts as an integer of minor units: the raw JSON written, its currency, and the minor units or `400`. */
const MINOR_UNIT_AMOUNTS: ReadonlyArray<readonly [string, string, number | 400]> = [
  ['1999', 'EUR', 1999],
  ['1990', 'JPY', 1990],
  ['10005', 'KWD', 10005],
  ['9007199254740991', 'EUR', 9007199254740991],
  // The same JSON number as 1000, written another way: read as that integer, exactly.
  ['1e3', 'EUR', 1000],
  ['"0x10"', 'EUR', 400],
  ['"1e3"', 'EUR', 400],
  ['"1999"', 'EUR', 400],
  ['19.99', 'EUR', 400],
  ['1.0000000000000001', 'EUR', 400],
  ['-100', 'EUR', 400],
  ['9007199254740993', 'EUR', 400],
];

describe.each(SOURCE_PLATFORMS)('the %s adapter keeps the platform contract', (platform) => {
  const kit = KITS[platform];
  // The type demands a kit, but vitest does not typecheck: name what is missing rather than fail on it.
  if (kit === undefined) throw new Error(`no contract kit for platform ${platform}: add one to KITS`);

  it('queues an order signed over the exact bytes, and refuses (401) the same JSON re-serialized', async () => {
    // Prepare: the same JSON with other whitespace, as a proxy or a careless verifier would re-serialize it
    const order = plainOrder(platform);
    const compact = JSON.stringify(JSON.parse(order.body));
    expect(compact).not.toBe(order.body);

    // Act
    const exact = await signedDoor(platform, order);
    const signedCompactSentIndented = await signedDoor(platform, order, { signedBytes: compact });
    const signedIndentedSentCompact = await signedDoor(
      platform,
      { ...order, body: compact },
      { signedBytes: order.body },
    );

    // Assess
    expect(placedOf(exact)).toMatchObject({ externalId: 'A-1', platform });
    expect(signedCompactSentIndented.answer).toMatchObject({ status: 401, body: { error: 'unauthorized' } });
    expect(signedIndentedSentCompact.answer).toMatchObject({ status: 401, body: { error: 'unauthorized' } });
  });

  it('accepts the previous secret while rotating, and the current one, but no other', async () => {
    // Act
    const previous = await signedDoor(platform, plainOrder(platform), { secret: PREVIOUS[platform] });
    const current = await signedDoor(platform, plainOrder(platform), { secret: SECRETS[platform] });
    const other = await signedDoor(platform, plainOrder(platform), { secret: `${SECRETS[platform]}-other` });

    // Assess
    expect(placedOf(previous).externalId).toBe('A-1');
    expect(placedOf(current).externalId).toBe('A-1');
    expect(other.answer).toMatchObject({ status: 401, body: { error: 'unauthorized' } });
  });

  it.each([
    ['missing', undefined],
    ['empty', ''],
    ['garbage', 'not a signature ✗'],
    ['a lone equals sign', '='],
    ['another scheme', 't=1,v0=00,sha1=00'],
  ])('answers 401, never a 5xx or a throw, to a %s signature', async (_what, value) => {
    // Prepare
    const order = plainOrder(platform);
    const headers = kit.sign(Buffer.from(order.body), SECRETS[platform], order.topic);
    for (const name of kit.signatureHeaders) {
      if (value === undefined) delete headers[name];
      else headers[name] = value;
    }

    // Act
    const { answer } = await door(platform, headers, order.body);

    // Assess
    expect(answer).toMatchObject({ status: 401, body: { error: 'unauthorized' } });
  });

  it('answers a verified delivery of a topic it does not act on as its docs promise', async () => {
    // Act
    const { answer } = await signedDoor(platform, kit.unknownTopic.delivery);

    // Assess
    const promised = kit.unknownTopic.answer;
    if (promised.status === 200) {
      expect(answer).toMatchObject({ status: 200, body: { status: 'ignored', reason: expect.any(String) } });
    } else {
      expect(answer).toMatchObject({ status: 400, body: { error: 'bad_request', field: promised.field } });
    }
  });

  it('keeps an order id above 2^53 exact, as a string', async () => {
    // Prepare: 2^53 + 1 as a double is 2^53
    const ids =
      kit.ids.kind === 'integer or string'
        ? ['9007199254740993', '"9007199254740993"']
        : ['"9007199254740993"'];

    for (const id of ids) {
      // Act
      const amount = kit.money.kind === 'decimal string' ? '"10.00"' : '1000';
      const result = await signedDoor(platform, kit.order({ id, amount, currency: 'EUR' }));

      // Assess
      expect(placedOf(result).externalId, `order id written as ${id}`).toBe('9007199254740993');
    }
  });

  const amounts = kit.money.kind === 'decimal string' ? DECIMAL_AMOUNTS : MINOR_UNIT_AMOUNTS;
  it.each(amounts)(
    'reads the amount %s %s exactly, or refuses it naming the field',
    async (raw, currency, minor) => {
      // Act
      const result = await signedDoor(platform, kit.order({ id: '"A-1"', amount: raw, currency }));

      // Assess
      if (minor === 400) {
        expect(result.answer).toMatchObject({ status: 400, body: { error: 'bad_request' } });
        const field = String((result.answer.body as { field?: unknown }).field);
        expect(kit.amountField === field || kit.amountField.startsWith(`${field}.`), `field ${field}`).toBe(
          true,
        );
      } else {
        expect(placedOf(result)).toMatchObject({ amount: minor, currency });
      }
    },
  );

  it('never throws, and answers only 200, 202, 400 or 415, whatever body is signed', async () => {
    // Prepare: any bytes, and the platform's own order with one value anywhere in it replaced
    const order = plainOrder(platform);
    const anyBytes = fc.oneof(
      fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)),
      fc.string({ unit: 'grapheme', maxLength: 200 }).map((s) => Buffer.from(s)),
      fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null')),
    );
    const brokenOrder = fc
      .tuple(fc.nat(), fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.constant(undefined)))
      .map(([at, value]) =>
        Buffer.from(JSON.stringify(replacedAt(JSON.parse(order.body), at, value), null, 1)),
      );
    const topics = fc.constantFrom(order.topic, kit.unknownTopic.delivery.topic);

    // Act / Assess
    await fc.assert(
      fc.asyncProperty(fc.oneof(anyBytes, brokenOrder), topics, async (body, topic) => {
        const { answer } = await door(platform, kit.sign(body, SECRETS[platform], topic), body);
        expect([200, 202, 400, 415]).toContain(answer.status);
      }),
      { numRuns: 60, seed: 6_301 },
    );
  });
});

/** `json` with its `at`-th value (counting every object member and array element, depth first) replaced. */
function replacedAt(json: unknown, at: number, value: unknown): unknown {
  let count = 0;
  const paths: (string | number)[][] = [];
  const walk = (node: unknown, path: (string | number)[]) => {
    if (node === null || typeof node !== 'object') return;
    for (const [key, child] of Object.entries(node)) {
      const childPath = [...path, Array.isArray(node) ? Number(key) : key];
      paths.push(childPath);
      count += 1;
      walk(child, childPath);
    }
  };
  walk(json, []);
  const path = paths[at % Math.max(count, 1)];
  if (path === undefined) return value;
  let parent = json as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (value === undefined) delete parent[last];
  else parent[last] = value;
  return json;
}

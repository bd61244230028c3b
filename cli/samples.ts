import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import type { SourceConfig } from '../shared/config/sources.ts';
import { HexId } from '../shared/domain/ids.ts';
import { idText, MAX_ID_LENGTH } from '../shared/domain/limits.ts';
import { SOURCE_PLATFORMS, type SourcePlatform } from '../shared/domain/platforms.ts';
import { formatMinor } from '../shared/money.ts';
import { hmacSha256, signGeneric } from '../shared/platforms/signature.ts';
import { CliError } from './io.ts';

/**
 * Sample webhooks for `connector send`: a body per platform (the platforms' own documentation
 * examples, copied into test/fixtures/samples/), changed where the platform carries the tracking
 * data, and signed exactly as the platform signs it.
 */

export type Platform = SourcePlatform;
export const PLATFORMS: readonly Platform[] = SOURCE_PLATFORMS;

const SAMPLES_DIR = new URL('../test/fixtures/samples/', import.meta.url);

/** What a built-in sample demonstrates in the life of an order. */
export type SampleKind = 'order' | 'partial-refund' | 'full-refund' | 'cancel';
export const SAMPLE_KINDS: readonly SampleKind[] = ['order', 'partial-refund', 'full-refund', 'cancel'];

export interface Sample {
  readonly platform: Platform;
  readonly kind: SampleKind;
  /** Shopify/WooCommerce topic or Stripe event type; Generic bodies carry their own `type`. */
  readonly topic: string | undefined;
  readonly file: string;
  readonly about: string;
  /**
   * The sample order's conversion once this sample is sent after the order (a full refund after the
   * partial one), as the connector makes it: without tax and shipping, in minor units; or refused.
   */
  readonly conversion: SampleConversion;
}

export type SampleConversion = { readonly amount: number; readonly currency: string } | 'refused';

/**
 * Every built-in sample. Each platform's samples are one order (Shopify 450789469, WooCommerce 727,
 * Stripe PaymentIntent pi_1PgafyB7WZ01zgkWSjxsAJo3, Generic 1001), so order → partial refund → full
 * refund can be walked on it; `--order-id` moves the whole walk to another order.
 */
export const SAMPLES: readonly Sample[] = [
  {
    platform: 'shopify',
    kind: 'order',
    topic: 'orders/create',
    file: 'shopify-order.json',
    about: 'order, total 598.94 USD with tax',
    conversion: { amount: 58_700, currency: 'USD' },
  },
  {
    platform: 'shopify',
    kind: 'partial-refund',
    topic: 'refunds/create',
    file: 'shopify-refund.json',
    about: 'refund of 2 of its 3 items, 391.33 net',
    conversion: { amount: 19_567, currency: 'USD' },
  },
  {
    platform: 'shopify',
    kind: 'full-refund',
    topic: 'refunds/create',
    file: 'shopify-refund-rest.json',
    about: 'refund of the item left, 195.67 net',
    conversion: 'refused',
  },
  {
    platform: 'shopify',
    kind: 'cancel',
    topic: 'orders/cancelled',
    file: 'shopify-order-cancelled.json',
    about: 'the order cancelled',
    conversion: 'refused',
  },
  {
    platform: 'woocommerce',
    kind: 'order',
    topic: 'order.created',
    file: 'woocommerce-order.json',
    about: 'order, total 29.35 USD with tax and shipping',
    conversion: { amount: 1_800, currency: 'USD' },
  },
  {
    platform: 'woocommerce',
    kind: 'partial-refund',
    topic: 'order.updated',
    file: 'woocommerce-order-refunded-partly.json',
    about: 'refunds[]: one 12.90 refund, an item with its tax',
    conversion: { amount: 600, currency: 'USD' },
  },
  {
    platform: 'woocommerce',
    kind: 'full-refund',
    topic: 'order.updated',
    file: 'woocommerce-order-refunded.json',
    about: 'status refunded',
    conversion: 'refused',
  },
  {
    platform: 'woocommerce',
    kind: 'cancel',
    topic: 'order.updated',
    file: 'woocommerce-order-cancelled.json',
    about: 'status cancelled',
    conversion: 'refused',
  },
  {
    platform: 'stripe',
    kind: 'order',
    topic: 'checkout.session.completed',
    file: 'stripe-checkout-session-completed.json',
    about: 'paid session, total 68.90 EUR with tax and shipping',
    conversion: { amount: 5_990, currency: 'EUR' },
  },
  {
    platform: 'stripe',
    kind: 'partial-refund',
    topic: 'charge.refunded',
    file: 'stripe-charge-refunded-partly.json',
    about: 'charge refunded 20.00 of 68.90',
    conversion: { amount: 3_990, currency: 'EUR' },
  },
  {
    platform: 'stripe',
    kind: 'partial-refund',
    topic: 'refund.created',
    file: 'stripe-refund-created.json',
    about: 'a 10.00 refund',
    conversion: { amount: 4_990, currency: 'EUR' },
  },
  {
    platform: 'stripe',
    kind: 'full-refund',
    topic: 'charge.refunded',
    file: 'stripe-charge-refunded.json',
    about: 'charge wholly refunded',
    conversion: 'refused',
  },
  {
    platform: 'generic',
    kind: 'order',
    topic: undefined,
    file: 'generic-order.json',
    about: '{"type":"order"} 49.90 EUR',
    conversion: { amount: 4_990, currency: 'EUR' },
  },
  {
    platform: 'generic',
    kind: 'partial-refund',
    topic: undefined,
    file: 'generic-refund-partial.json',
    about: '{"type":"refund"} 10.00',
    conversion: { amount: 3_990, currency: 'EUR' },
  },
  {
    platform: 'generic',
    kind: 'full-refund',
    topic: undefined,
    file: 'generic-refund-full.json',
    about: '{"type":"refund","full":true}',
    conversion: 'refused',
  },
  {
    platform: 'generic',
    kind: 'cancel',
    topic: undefined,
    file: 'generic-cancel.json',
    about: '{"type":"cancel"}',
    conversion: 'refused',
  },
];

/** Generic `--topic` names the body's type; the kinds of sample each type has. */
const GENERIC_TOPIC_KINDS: Readonly<Record<string, readonly SampleKind[]>> = {
  order: ['order'],
  refund: ['partial-refund', 'full-refund'],
  cancel: ['cancel'],
};

/**
 * The built-in sample for `--sample` and/or `--topic`, or undefined when there is none. A topic
 * alone picks that topic's first sample (any Shopify `orders/…` order topic sends the order); no
 * kind and no topic is the order.
 */
export function findSample(platform: Platform, kind?: SampleKind, topic?: string): Sample | undefined {
  const own = SAMPLES.filter((s) => s.platform === platform);
  if (platform === 'generic' && topic !== undefined) {
    const allowed = GENERIC_TOPIC_KINDS[topic];
    const wanted = kind ?? allowed?.[0];
    return wanted && allowed?.includes(wanted) ? own.find((s) => s.kind === wanted) : undefined;
  }
  const sameTopic = (s: Sample) =>
    topic === undefined ||
    s.topic === topic ||
    (platform === 'shopify' &&
      s.kind === 'order' &&
      topic.startsWith('orders/') &&
      topic !== 'orders/cancelled') ||
    (platform === 'stripe' && s.kind === 'order' && topic === 'checkout.session.async_payment_succeeded');
  return own.find(
    (s) => (kind === undefined ? topic !== undefined || s.kind === 'order' : s.kind === kind) && sameTopic(s),
  );
}

/** The file of a sample, inside the repository. */
export function samplePath(sample: Sample): string {
  return fileURLToPath(new URL(sample.file, SAMPLES_DIR));
}

/** `--help`'s list of the built-in samples, with the conversion each leaves. */
export function samplesHelp(): string {
  const what = Math.max(...SAMPLES.map((s) => s.about.length)) + 2;
  const line = (platform: string, kind: string, topic: string, about: string, conversion: string) =>
    `  ${platform.padEnd(12)}${kind.padEnd(16)}${topic.padEnd(28)}${about.padEnd(what)}${conversion}`;
  const rows = SAMPLES.map((s) =>
    line(s.platform, s.kind, s.topic ?? '-', s.about, conversionText(s.conversion)),
  );
  return [line('PLATFORM', '--sample', 'TOPIC', 'WHAT', 'CONVERSION'), ...rows].join('\n');
}

function conversionText(conversion: SampleConversion): string {
  return conversion === 'refused' ? 'refused' : formatMinor(conversion.amount, conversion.currency);
}

/** Per platform, what `defaultTopic` answers: a record, so a new platform must say. */
const ORDER_TOPIC: Readonly<Record<Platform, (source: SourceConfig | undefined) => string | undefined>> = {
  shopify: (source) => source?.orderTopic ?? 'orders/create',
  woocommerce: () => 'order.created',
  stripe: () => 'checkout.session.completed',
  // The body carries its own `type`.
  generic: () => undefined,
};

/** The topic (Shopify, WooCommerce) or event type (Stripe) of an order sent when none is given. */
export function defaultTopic(platform: Platform, source: SourceConfig | undefined): string | undefined {
  return ORDER_TOPIC[platform](source);
}

export interface SampleChanges {
  readonly clickId?: string;
  readonly ip?: string;
  readonly trackingId?: number;
  readonly orderId?: string;
  /** Stripe: the event id in the envelope; Generic: the body's `eventId`. */
  readonly eventId?: string;
  /** Attribute names the source reads (its first click id and tracking id attribute). */
  readonly clickIdAttribute: string;
  readonly trackingIdAttribute: string;
}

/** An event id in the body (Stripe, Generic): an id as the door takes one. */
const BODY_EVENT_ID = idText();
/**
 * A delivery id sent as a header (Shopify, WooCommerce): fetch refuses what is not a byte string and
 * line breaks, and trims outer spaces, so printable ASCII with no space at either end.
 */
const HEADER_EVENT_ID = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

/**
 * Checks the values of `send`'s flags, naming the flag of the first wrong one. `deliveryId` is
 * `--event-id` where the platform sends it as a header (Shopify, WooCommerce), `eventId` where the
 * body carries it (Stripe, Generic).
 */
export function checkChanges(changes: Partial<SampleChanges> & { readonly deliveryId?: string }): void {
  if (changes.clickId !== undefined && !HexId.safeParse(changes.clickId).success) {
    throw new CliError(
      '--click-id: must be 24 hexadecimal characters (the aecid the platform appended to the landing URL)',
    );
  }
  if (changes.ip !== undefined && isIP(changes.ip) === 0)
    throw new CliError('--ip: must be an IPv4 or IPv6 address');
  if (
    changes.trackingId !== undefined &&
    !(Number.isSafeInteger(changes.trackingId) && changes.trackingId > 0)
  ) {
    throw new CliError('--tracking-id: must be a positive integer');
  }
  if (changes.orderId !== undefined && (changes.orderId.trim() === '' || changes.orderId.length > 256)) {
    throw new CliError('--order-id: must be 1 to 256 characters');
  }
  if (changes.eventId !== undefined) {
    const checked = BODY_EVENT_ID.safeParse(changes.eventId);
    if (!checked.success) throw new CliError(`--event-id: ${checked.error.issues[0]?.message ?? 'invalid'}`);
  }
  const deliveryId = changes.deliveryId;
  if (deliveryId !== undefined && !(HEADER_EVENT_ID.test(deliveryId) && deliveryId.length <= MAX_ID_LENGTH)) {
    throw new CliError(
      `--event-id: must be 1 to ${MAX_ID_LENGTH} printable ASCII characters, no space at either end (the platform sends it as a header)`,
    );
  }
}

/** Which changes apply to a body: refunds carry no tracking data. */
export function isOrderBody(
  platform: Platform,
  topic: string | undefined,
  body: Record<string, unknown>,
): boolean {
  if (platform === 'shopify') return topic?.startsWith('orders/') ?? false;
  if (platform === 'generic') return body['type'] === 'order';
  if (platform === 'stripe') return (topic ?? '').startsWith('checkout.session.');
  return true;
}

/** Shop order ids are numbers in Shopify and WooCommerce payloads; a non-numeric one stays a string. */
function idValue(id: string): number | string {
  return /^[0-9]{1,15}$/.test(id) && Number.isSafeInteger(Number(id)) ? Number(id) : id;
}

type Json = Record<string, unknown>;

function object(value: unknown): Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : {};
}

/** Sets `{ [nameKey]: name, value }` in a list of attributes, replacing an entry of the same name. */
function setPair(list: unknown, nameKey: 'name' | 'key', name: string, value: string): unknown[] {
  const entries = Array.isArray(list) ? list.filter((e) => object(e)[nameKey] !== name) : [];
  return [...entries, { [nameKey]: name, value }];
}

/**
 * Applies `send`'s flags to a body where its platform carries each value: Shopify `note_attributes`
 * and `browser_ip`, WooCommerce `meta_data` and `customer_ip_address`, Stripe session `metadata`
 * (the connector reads the buyer's IP from `metadata.buyer_ip`), Generic fields. Returns a new body.
 */
export function applyChanges(
  platform: Platform,
  topic: string | undefined,
  input: Json,
  changes: SampleChanges,
): Json {
  const body = structuredClone(input);
  const order = isOrderBody(platform, topic, body);
  switch (platform) {
    case 'shopify': {
      if (!order) {
        if (changes.orderId !== undefined) body['order_id'] = idValue(changes.orderId);
        break;
      }
      if (changes.orderId !== undefined) body['id'] = idValue(changes.orderId);
      if (changes.clickId !== undefined) {
        body['note_attributes'] = setPair(
          body['note_attributes'],
          'name',
          changes.clickIdAttribute,
          changes.clickId,
        );
      }
      if (changes.trackingId !== undefined) {
        body['note_attributes'] = setPair(
          body['note_attributes'],
          'name',
          changes.trackingIdAttribute,
          String(changes.trackingId),
        );
      }
      if (changes.ip !== undefined) {
        body['browser_ip'] = changes.ip;
        if (typeof body['client_details'] === 'object' && body['client_details'] !== null) {
          (body['client_details'] as Json)['browser_ip'] = changes.ip;
        }
      }
      break;
    }
    case 'woocommerce': {
      if (changes.orderId !== undefined) body['id'] = idValue(changes.orderId);
      if (changes.clickId !== undefined) {
        body['meta_data'] = setPair(body['meta_data'], 'key', changes.clickIdAttribute, changes.clickId);
      }
      if (changes.trackingId !== undefined) {
        body['meta_data'] = setPair(
          body['meta_data'],
          'key',
          changes.trackingIdAttribute,
          String(changes.trackingId),
        );
      }
      if (changes.ip !== undefined) body['customer_ip_address'] = changes.ip;
      break;
    }
    case 'stripe': {
      if (changes.eventId !== undefined) body['id'] = changes.eventId;
      const data = object(body['data']);
      const session = object(data['object']);
      const metadata = { ...object(session['metadata']) };
      if (changes.orderId !== undefined) metadata['order_id'] = changes.orderId;
      if (order) {
        if (changes.clickId !== undefined) metadata[changes.clickIdAttribute] = changes.clickId;
        if (changes.trackingId !== undefined)
          metadata[changes.trackingIdAttribute] = String(changes.trackingId);
        if (changes.ip !== undefined) metadata['buyer_ip'] = changes.ip;
      }
      session['metadata'] = metadata;
      data['object'] = session;
      body['data'] = data;
      break;
    }
    case 'generic': {
      if (changes.eventId !== undefined) body['eventId'] = changes.eventId;
      if (changes.orderId !== undefined) body['orderId'] = changes.orderId;
      if (!order) break;
      if (changes.clickId !== undefined) {
        const existing = Array.isArray(body['clickIds']) ? (body['clickIds'] as unknown[]) : [];
        body['clickIds'] = [...existing.filter((c) => c !== changes.clickId), changes.clickId];
      }
      if (changes.trackingId !== undefined) body['affiliateTrackingId'] = changes.trackingId;
      if (changes.ip !== undefined) body['buyerIp'] = changes.ip;
      break;
    }
  }
  return body;
}

/**
 * Per platform, a fresh id for the body where the platform's dedup key is one there (Stripe event
 * id, Generic eventId); none where a header carries it (`SignOptions.eventId`).
 */
const FRESH_BODY_EVENT_ID: Readonly<Record<Platform, () => string | undefined>> = {
  shopify: () => undefined,
  woocommerce: () => undefined,
  stripe: () => `evt_cli${randomBytes(12).toString('hex')}`,
  generic: () => `cli-${randomUUID()}`,
};

/** A fresh delivery id where the platform's dedup key is one (Stripe event id, Generic eventId). */
export function freshEventId(platform: Platform): string | undefined {
  return FRESH_BODY_EVENT_ID[platform]();
}

export interface SignOptions {
  readonly topic?: string;
  /** Shopify `x-shopify-event-id`; WooCommerce `x-wc-webhook-delivery-id`. Random when absent. */
  readonly eventId?: string;
  readonly now: Date;
}

/**
 * The headers the platform sends with `body`, signed with `secret` over the exact bytes:
 * Shopify and WooCommerce a base64 HMAC-SHA256 of the body, Stripe `t=<unix>,v1=<hex HMAC of
 * "t.body">`, Generic `sha256=<hex HMAC of "timestamp.body">` with `x-connector-timestamp`.
 */
export function signedHeaders(
  platform: Platform,
  body: string,
  secret: string,
  options: SignOptions,
): Record<string, string> {
  const unix = Math.floor(options.now.getTime() / 1000);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'connector-cli',
  };
  switch (platform) {
    case 'shopify':
      return {
        ...headers,
        'x-shopify-topic': options.topic ?? 'orders/create',
        'x-shopify-hmac-sha256': hmacSha256(secret, body).toString('base64'),
        'x-shopify-event-id': options.eventId ?? randomUUID(),
        'x-shopify-webhook-id': randomUUID(),
        'x-shopify-triggered-at': options.now.toISOString(),
        'x-shopify-api-version': '2026-07',
        'x-shopify-shop-domain': 'sample-shop.myshopify.com',
      };
    case 'woocommerce': {
      const topic = options.topic ?? 'order.created';
      const [resource = 'order', event = 'created'] = topic.split('.');
      return {
        ...headers,
        'x-wc-webhook-topic': topic,
        'x-wc-webhook-resource': resource,
        'x-wc-webhook-event': event,
        'x-wc-webhook-signature': hmacSha256(secret, body).toString('base64'),
        'x-wc-webhook-delivery-id': options.eventId ?? randomUUID(),
        'x-wc-webhook-id': '1',
        'x-wc-webhook-source': 'https://sample-shop.example/',
      };
    }
    case 'stripe':
      return {
        ...headers,
        'stripe-signature': `t=${unix},v1=${hmacSha256(secret, `${unix}.`, body).toString('hex')}`,
      };
    case 'generic':
      return {
        ...headers,
        'x-connector-timestamp': String(unix),
        'x-connector-signature': signGeneric(body, secret, unix),
      };
  }
}

/** Reads a sample or a user's file. */
export function readBodyFile(path: string, flag: string): string {
  return readFileBytes(path, flag).toString('utf8');
}

/** A file's bytes, for a caller that finds their encoding (`connector refund --csv`). */
export function readFileBytes(path: string, flag: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new CliError(`${flag}: cannot read ${path} (${code})`);
  }
}

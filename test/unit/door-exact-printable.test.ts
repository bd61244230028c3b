import { Logger } from '@aws-lambda-powertools/logger';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { makeHandler } from '../../functions/webhook.ts';
import { displayed, quoted, shopText } from '../../shared/domain/text.ts';
import { parseJsonBody } from '../../shared/json.ts';
import { currencyExponent } from '../../shared/money.ts';
import { observeIngest } from '../../shared/observability.ts';
import { adapterFor } from '../../shared/platforms/registry.ts';
import { issuesOf } from '../../shared/validation.ts';
import { doorSecrets, sourcePerPlatform } from '../support/door.ts';
import { captureOutput } from '../support/logged.ts';
import { RecordingQueue } from '../support/recording-queue.ts';
import { type SignedPlatform, signedHeaders } from '../support/webhooks.ts';
import { sampleJson } from './platforms/support.ts';

/**
 * The webhook door where what the sender wrote is not what a reader would get: an amount written as
 * a JSON number with more digits than a double holds, and a path or a value holding control or
 * bidirectional-override characters that an answer, a log line or a terminal would show as other
 * text. Each goes through the deployed handler with an API Gateway event, and its log line through
 * the deployed observer and Powertools' logger.
 */

const SECRETS = doorSecrets('exact');
const { sources, secretStore: secrets } = sourcePerPlatform(SECRETS);

const logged = captureOutput();

function handlerWith(queue: RecordingQueue) {
  const logger = new Logger({ serviceName: 'exact', logLevel: 'INFO' });
  return makeHandler({
    sources,
    adapterFor,
    secrets,
    queue,
    now: () => new Date(),
    observe: observeIngest(logger, { addMetric: () => undefined }),
  });
}

/** POST /webhooks/<source> as the local stack's catch-all route hands it over (`{source}` decoded). */
async function post(
  source: string,
  body: Buffer,
  options: { platform?: SignedPlatform; topic?: string } = {},
) {
  const queue = new RecordingQueue();
  const platform = options.platform ?? (source as SignedPlatform);
  const headers = signedHeaders(platform, SECRETS[platform], body, {
    ...(options.topic !== undefined ? { topic: options.topic } : {}),
  });
  const event: APIGatewayProxyEventV2 = {
    version: '2.0',
    routeKey: 'POST /webhooks/{source}',
    rawPath: `/webhooks/${encodeURIComponent(source)}`,
    rawQueryString: '',
    headers,
    pathParameters: { source },
    isBase64Encoded: true,
    body: body.toString('base64'),
    requestContext: {} as APIGatewayProxyEventV2['requestContext'],
  };
  const result = await handlerWith(queue)(event);
  return {
    status: result.statusCode,
    body: JSON.parse(String(result.body)) as Record<string, unknown>,
    queue,
  };
}

/**
 * A WooCommerce order of one line whose `total` (and the order's) is `amount` written as a JSON
 * number, digit for digit: `JSON.stringify` would write the double's shortest form instead.
 */
function wooOrderWithNumber(amount: string, currency: string): Buffer {
  const order = sampleJson('woocommerce/order_v3_docs_example.json');
  const [line] = order['line_items'] as Record<string, unknown>[];
  const text = JSON.stringify({
    ...order,
    currency,
    total: '@AMOUNT@',
    total_tax: '0',
    shipping_total: '0',
    prices_include_tax: false,
    line_items: [{ ...line, total: '@AMOUNT@', total_tax: '0' }],
    fee_lines: [],
  });
  return Buffer.from(text.replaceAll('"@AMOUNT@"', amount));
}

/** `minor` units of a currency with `exponent` decimals, written with exactly those decimals. */
function decimalText(minor: bigint, exponent: number): string {
  const digits = minor.toString().padStart(exponent + 1, '0');
  return exponent === 0 ? digits : `${digits.slice(0, -exponent)}.${digits.slice(-exponent)}`;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

describe('an amount written as a JSON number with more digits than a double holds', () => {
  it('queues EUR 90071992547409.91 as 9007199254740991 cents, not the double’s …990', async () => {
    // Prepare: the double nearest 90071992547409.91 prints as 90071992547409.9
    expect(String(90071992547409.91)).toBe('90071992547409.9');

    // Act
    const answer = await post('woocommerce', wooOrderWithNumber('90071992547409.91', 'EUR'));

    // Assess
    expect(answer.status).toBe(202);
    expect(answer.queue.events[0]).toMatchObject({ type: 'OrderPlaced', amount: 9007199254740991 });
  });

  it.each([
    ['a 2-decimal currency past 2^53 cents', '1234567890123456.78', 'USD', 'line_items.0.total'],
    ['more decimals than USD has, hidden by the double', '12345678901234.567', 'USD', 'line_items.0.total'],
    ['a sub-cent tail the double rounds away', '0.10000000000000001', 'EUR', 'line_items.0.total'],
    [
      'a fraction of a yen the double rounds to a whole one',
      '1.0000000000000001',
      'JPY',
      'line_items.0.total',
    ],
  ])(
    'refuses %s (%s %s) with a 400 naming the field, queueing nothing',
    async (_name, amount, currency, field) => {
      // Act
      const answer = await post('woocommerce', wooOrderWithNumber(amount, currency));

      // Assess
      expect(answer.status).toBe(400);
      expect(answer.body['field']).toBe(field);
      expect(answer.queue.events).toEqual([]);
    },
  );

  it('queues any amount up to 2^53 minor units written as a JSON number exactly, or refuses it naming the field', async () => {
    const currency = fc.constantFrom('EUR', 'JPY', 'KWD', 'CLF');
    // Near 2^53 minor units (where a double keeps no cent) as often as anywhere else.
    const minor = fc.oneof(
      fc.bigInt({ min: 0n, max: MAX_SAFE }),
      fc.bigInt({ min: 2n ** 52n, max: MAX_SAFE }),
      fc.bigInt({ min: MAX_SAFE - 1000n, max: MAX_SAFE }),
    );
    await fc.assert(
      fc.asyncProperty(currency, minor, async (code, units) => {
        // Act
        const answer = await post(
          'woocommerce',
          wooOrderWithNumber(decimalText(units, currencyExponent(code)), code),
        );

        // Assess
        if (answer.status === 202) {
          expect(answer.queue.events[0]).toMatchObject({ amount: Number(units), currency: code });
        } else {
          expect(answer).toMatchObject({ status: 400, body: { field: 'line_items.0.total' } });
        }
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a Stripe amount_total of 1.0000000000000001: an integer only to the double', async () => {
    // Prepare
    const session = {
      ...sampleJson('stripe/checkout_session_object_stripe_mock_fixture.json'),
      object: 'checkout.session',
      mode: 'payment',
      payment_status: 'paid',
      status: 'complete',
      currency: 'eur',
      amount_subtotal: 1,
      amount_total: '@AMOUNT@',
      total_details: { amount_discount: 0, amount_shipping: 0, amount_tax: 0 },
      metadata: { aecid: '0123456789abcdef01234567' },
    };
    const text = JSON.stringify({
      id: 'evt_exact',
      type: 'checkout.session.completed',
      data: { object: session },
    });

    // Act
    const answer = await post('stripe', Buffer.from(text.replace('"@AMOUNT@"', '1.0000000000000001')));
    const whole = await post('stripe', Buffer.from(text.replace('"@AMOUNT@"', '1')));

    // Assess
    expect(answer.status).toBe(400);
    expect(answer.body['field']).toBe('data.object.amount_total');
    expect(answer.queue.events).toEqual([]);
    expect(whole.status).toBe(202);
    expect(whole.queue.events[0]).toMatchObject({ amount: 1 });
  });
});

describe('parseJsonBody and numbers a double cannot hold as written', () => {
  it('keeps each number with more than 15 significant digits as its text, and every other number as a number', () => {
    // Act
    const body = parseJsonBody(
      Buffer.from(
        '{"a":90071992547409.91,"b":0.10000000000000001,"c":1.0000000000000001,"d":-1234567890123456.78,' +
          '"e":1.2345678901234567e5,"f":12.50000000000000000,"g":0.0000000000000001,"h":9007199254740991,' +
          '"i":12345678901234.5,"j":0.06,"k":9007199254740993}',
      ),
    );

    // Assess
    expect(body).toEqual({
      a: '90071992547409.91',
      b: '0.10000000000000001',
      c: '1.0000000000000001',
      d: '-1234567890123456.78',
      e: '1.2345678901234567e5',
      f: 12.5,
      g: 1e-16,
      h: Number.MAX_SAFE_INTEGER,
      i: 12345678901234.5,
      j: 0.06,
      k: '9007199254740993',
    });
  });

  it('gives back every decimal number either as the number it wrote or as its text', () => {
    const digits = fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: 1, maxLength: 24 });
    fc.assert(
      fc.property(fc.boolean(), digits, fc.option(digits), (negative, whole, fraction) => {
        const text = `${negative ? '-' : ''}${whole.replace(/^0+(?=.)/, '')}${fraction === null ? '' : `.${fraction}`}`;

        const value = (parseJsonBody(Buffer.from(`{"v":${text}}`)) as { v: unknown }).v;

        if (typeof value === 'string') expect(value).toBe(text);
        else expect(sameDecimal(String(value), text)).toBe(true);
      }),
    );
  });
});

/** Whether two plain or exponent decimal texts are the same number, compared exactly (BigInt). */
function sameDecimal(a: string, b: string): boolean {
  const exact = (text: string): [bigint, number] => {
    const [mantissa = '', exponent = '0'] = text.toLowerCase().split('e');
    const [whole = '', fraction = ''] = mantissa.split('.');
    return [BigInt(whole + fraction), Number(exponent) - fraction.length];
  };
  const [ma, ea] = exact(a);
  const [mb, eb] = exact(b);
  const scale = Math.min(ea, eb);
  return ma * 10n ** BigInt(ea - scale) === mb * 10n ** BigInt(eb - scale);
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: looking for control characters is the point.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const BIDI = /[\u202a-\u202e\u2066-\u2069]/;

describe('an unknown source named in a path with control and bidirectional characters', () => {
  it('is named short, on one line and printable in the 404 and its log line', async () => {
    // Prepare: what the local stack's catch-all decodes from /webhooks/%1B%5B2J…
    const source = `\u001b[2J\r\nforged log line \u202etxt.exe\u202c${'x'.repeat(10_000)}`;

    // Act
    const answer = await post(source, Buffer.from('{}'), { platform: 'generic' });

    // Assess
    expect(answer.status).toBe(404);
    const message = String(answer.body['message']);
    expect(message).toMatch(/^unknown source "\[2J forged log line \\u202etxt\.exe\\u202cx+…"$/);
    expect(message).not.toMatch(CONTROL);
    expect(message).not.toMatch(BIDI);
    expect(message.length).toBeLessThan(100);
    const line = JSON.parse(logged.join('')) as Record<string, unknown>;
    expect(line).toMatchObject({
      message: 'webhook rejected',
      status: 404,
      detail: 'unknown source',
      source: expect.stringMatching(/^\[2J forged log line \\u202etxt\.exe\\u202cx+…$/),
    });
    expect(String(line['source'])).not.toMatch(CONTROL);
    expect(String(line['source'])).not.toMatch(BIDI);
    expect(String(line['source']).length).toBeLessThanOrEqual(64);
  });

  it('names a short printable unknown source as it came', async () => {
    // Act
    const answer = await post('magento-2', Buffer.from('{}'), { platform: 'generic' });

    // Assess
    expect(answer).toMatchObject({
      status: 404,
      body: { error: 'not_found', message: 'unknown source "magento-2"' },
    });
  });
});

describe('bidirectional overrides in what a shop wrote (Trojan Source)', () => {
  const OVERRIDES = [
    '\u202a',
    '\u202b',
    '\u202c',
    '\u202d',
    '\u202e',
    '\u2066',
    '\u2067',
    '\u2068',
    '\u2069',
  ];

  it('are shown as \\u escapes wherever the door quotes a sender’s value', () => {
    for (const char of OVERRIDES) {
      const written = `\\u${char.charCodeAt(0).toString(16)}`;
      expect(quoted(`a${char}b `)).toBe(`a${written}b`);
      expect(displayed(` a${char}b `, 64)).toBe(` a${written}b `);
    }
  });

  it('shows an ignored topic with an override as its escape, never reordering the answer', async () => {
    // Prepare
    const order = Buffer.from(JSON.stringify(sampleJson('woocommerce/order_v3_docs_example.json')));

    // Act
    const answer = await post('woocommerce', order, { topic: 'order.\u202edetaerc' });

    // Assess
    expect(answer.body).toEqual({ status: 'ignored', reason: 'topic order.\\u202edetaerc is not handled' });
    const line = JSON.parse(logged.join('')) as Record<string, unknown>;
    expect(line).toMatchObject({
      message: 'webhook ignored',
      status: 200,
      detail: 'topic order.\\u202edetaerc is not handled',
    });
    expect(logged.join('')).not.toMatch(BIDI);
  });

  it('names an unknown key with an override as its escape', () => {
    // Prepare: a strict object's unknown key, as POST /refunds reports it
    const error = {
      issues: [{ code: 'unrecognized_keys', keys: ['amount\u202e'], path: [], message: '' }],
    } as unknown as Parameters<typeof issuesOf>[0];

    // Act
    const [issue] = issuesOf(error, 'body');

    // Assess
    expect(issue).toMatchObject({
      field: 'body.amount\\u202e',
      message: 'amount\\u202e is not allowed here',
    });
  });

  it('cuts a quoted value of overrides on a whole character or escape, within the limit', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom('a', ' ', '\u202e', '\u2066', '😀', '\u0007', '\n') }),
        fc.integer({ min: 10, max: 80 }),
        (value, max) => {
          const shown = quoted(value, max);

          expect(shown.length).toBeLessThanOrEqual(max);
          expect(shown).not.toMatch(BIDI);
          expect(shown).not.toMatch(CONTROL);
          expect(shown.isWellFormed()).toBe(true);
          // Never half an escape, and a cut falls at most one escape short of the limit.
          expect(shown.replace(/\\u[0-9a-f]{4}/g, '')).not.toContain('\\u');
          if (shown.endsWith('…')) expect(shown.length).toBeGreaterThan(max - 6);
        },
      ),
    );
  });

  it('keeps them in the text sent on: a refund reason in Hebrew and English isolates reaches the platform unchanged', () => {
    // Legitimate bidirectional text marks its embedded runs with isolates (U+2066–U+2069).
    const reason = 'הוחזר \u2066SKU-42\u2069 פגום';

    expect(shopText(reason, 500)).toBe(reason);
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CurrentApiBackend } from '../../shared/affiliate/backend.ts';
import { AffiliateClient } from '../../shared/affiliate/client.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { ConnectorEvent, OrderPlaced } from '../../shared/domain/events.ts';
import { BadInputError } from '../../shared/errors.ts';
import { submitFinanceRefund } from '../../shared/finance.ts';
import { ingestWebhook } from '../../shared/ingest.ts';
import { adapterFor } from '../../shared/platforms/registry.ts';
import { signGeneric } from '../../shared/platforms/signature.ts';
import type { EventQueue } from '../../shared/ports.ts';
import { encodeEvent, MAX_EVENT_BYTES } from '../../shared/queueing.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

const SECRET = 'door-generic-secret';
const PROGRAM = '5ad000000000000000000101';
const RULE = '5ad000000000000000000201';
const source = SourceConfig.parse({
  id: 'generic',
  platform: 'generic',
  program: PROGRAM,
  rule: RULE,
  secretRef: 'GENERIC_SECRET',
  // Every order is added (manual mode when unattributed), so the property reaches the client.
  unattributed: { mode: 'manual', affiliateTrackingId: 7 },
});
const sources = new Map([[source.id, source]]);
const secrets = new EnvSecretStore({
  GENERIC_SECRET: SECRET,
  FINANCE_KEY: 'door-finance-key-0123456789abcdef0123',
});

class MemoryQueue implements EventQueue {
  readonly sent: ConnectorEvent[] = [];
  async send(event: ConnectorEvent): Promise<string> {
    this.sent.push(event);
    return `m-${this.sent.length}`;
  }
}

async function postGeneric(payload: Record<string, unknown>) {
  const rawBody = Buffer.from(JSON.stringify(payload));
  const now = Math.floor(Date.now() / 1000);
  const headers = {
    'content-type': 'application/json',
    'x-connector-timestamp': String(now),
    'x-connector-signature': signGeneric(rawBody, SECRET, now),
  };
  const queue = new MemoryQueue();
  const answer = await ingestWebhook(
    { sources, adapterFor, secrets, queue, now: () => new Date() },
    'generic',
    { headers, rawBody },
  );
  return { answer, queue };
}

const ORDER = {
  type: 'order',
  eventId: 'door-1',
  orderId: 'o-1',
  amount: '49.90',
  currency: 'EUR',
  clickIds: ['a1b2c3d4e5f60718293a4b5c'],
  buyerIp: '203.0.113.9',
};

describe('limits checked at the door (the platform client would refuse these later)', () => {
  it.each([
    ['subId', { subId: 's'.repeat(257) }, 'subId'],
    ['a voucher', { vouchers: ['V'.repeat(257)] }, 'vouchers.0'],
    ['customerId', { customerId: 'c'.repeat(257) }, 'customerId'],
    ['paymentMethod', { paymentMethod: 'p'.repeat(257) }, 'paymentMethod'],
    ['a made-up currency', { currency: 'ABC' }, 'currency'],
    ['a crypto ticker', { currency: 'BTC' }, 'currency'],
    ['the test currency XTS', { currency: 'XTS' }, 'currency'],
    ['"no currency" XXX', { currency: 'XXX' }, 'currency'],
  ])('answers 400 naming the field for %s over the limit, and queues nothing', async (_, change, field) => {
    const { answer, queue } = await postGeneric({ ...ORDER, ...change });

    expect(answer.status).toBe(400);
    expect(answer.body['field']).toBe(field);
    expect(queue.sent).toEqual([]);
  });

  it.each(['VES', 'SLE', 'ZWG', 'MRU', 'STN', 'BYN'])(
    'accepts the current ISO 4217 code %s',
    async (code) => {
      const { answer, queue } = await postGeneric({ ...ORDER, currency: code });

      expect(answer.status).toBe(202);
      expect(queue.sent[0]).toMatchObject({ currency: code });
    },
  );

  it('reads a lower-case currency the same way on the webhook and on /refunds', async () => {
    const webhook = await postGeneric({ ...ORDER, currency: 'eur' });
    const queue = new MemoryQueue();
    const refund = await submitFinanceRefund(
      {
        sources,
        ledger: { get: async () => undefined },
        reservations: new MemoryLedger(),
        queue,
        secrets,
        keyRef: 'FINANCE_KEY',
        now: () => new Date(),
      },
      { 'x-api-key': 'door-finance-key-0123456789abcdef0123' },
      Buffer.from(JSON.stringify({ externalId: 'o-1', refundId: 'r-1', amount: '5.00', currency: 'eur' })),
    );

    expect(webhook.answer.status).toBe(202);
    expect(webhook.queue.sent[0]).toMatchObject({ currency: 'EUR' });
    expect(refund.status).toBe(202);
    expect(queue.sent[0]).toMatchObject({ currency: 'EUR', amount: 500 });
  });
});

describe('what can never be delivered is refused at the door', () => {
  it.each([
    ['a NUL in the order id', { orderId: 'o-\u00001' }, 'externalId'],
    ['a control character in a voucher', { vouchers: ['GIFT\u0007'] }, 'vouchers.0'],
    ['a lone surrogate in the sub id', { subId: 'half \ud83c' }, 'subId'],
  ])('answers 400 naming the field for %s', async (_, change, field) => {
    const { answer, queue } = await postGeneric({ ...ORDER, ...change });

    expect(answer.status).toBe(400);
    expect(answer.body['field']).toBe(field);
    expect(queue.sent).toEqual([]);
  });

  it('answers 413 when the mapped event would not fit in an SQS message', async () => {
    // Each emoji is 2 UTF-16 units in the body and 12 ASCII bytes once escaped for the queue.
    const vouchers = Array.from({ length: 2_000 }, (_, i) => `🎁${'🎁'.repeat(60)}${i}`);
    const { answer, queue } = await postGeneric({ ...ORDER, vouchers });

    expect(answer.status).toBe(413);
    expect(queue.sent).toEqual([]);
  });

  it('encodes any valid Unicode as ASCII JSON that decodes to the same event', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }), (text) => {
        const event = ConnectorEvent.parse({
          type: 'OrderRefunded',
          eventId: 'e',
          source: 'generic',
          platform: 'generic',
          externalId: 'o-1',
          receivedAt: '2026-01-01T00:00:00.000Z',
          refundId: 'r-1',
          full: true,
          reason: `${text} \uffff GIFT🎁`,
        });

        const body = encodeEvent(event);

        expect(body).toMatch(/^[\x20-\x7e]*$/);
        expect(JSON.parse(body)).toEqual(event);
        expect(Buffer.byteLength(body)).toBeLessThanOrEqual(MAX_EVENT_BYTES);
      }),
      { numRuns: 200, seed: 13_002 },
    );
  });
});

/** A platform that records every add request and answers 200 with a conversion id. */
function recordingBackend() {
  const client = new AffiliateClient({
    baseUrl: 'http://platform.test',
    token: 'door-token',
    ratePerSecond: 1_000_000,
    fetch: async () => Response.json({ id: 'aaaaaaaaaaaaaaaaaaaaaaaa' }),
  });
  return new CurrentApiBackend(client);
}

/** Mostly what passes the door (so the property reaches the client), with edges on both sides. */
const text = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 258 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }) },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', 'x'.repeat(256), 'x'.repeat(257), 'a\u0000b', '\ud83c') },
);
const anyOrder = fc.record(
  {
    eventId: fc.oneof({ weight: 5, arbitrary: fc.uuid() }, text),
    externalId: text,
    amount: fc.oneof(fc.nat(), fc.constant(Number.MAX_SAFE_INTEGER)),
    currency: fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom('EUR', 'VES', 'ZWG', 'JPY', 'XAU', 'BYR') },
      { weight: 2, arbitrary: fc.constantFrom('XTS', 'XXX', 'XBT', 'BTC', 'eur', 'ABC') },
      { weight: 1, arbitrary: fc.string({ minLength: 3, maxLength: 3 }) },
    ),
    customerId: text,
    vouchers: fc.array(text, { maxLength: 3 }),
    clickIds: fc.array(fc.oneof(text, fc.constant('a1b2c3d4e5f60718293a4b5c')), { maxLength: 3 }),
    buyerIp: fc.oneof({ weight: 4, arbitrary: fc.oneof(fc.ipV4(), fc.ipV6()) }, text),
    productIds: fc.array(text, { maxLength: 3 }),
    paymentMethod: text,
    orderDate: fc.oneof(
      { weight: 4, arbitrary: fc.date({ noInvalidDate: true }).map((d) => d.toISOString()) },
      fc.constantFrom('9999-12-31T23:00:00-05:00', '0000-01-01T00:30:00+01:00', '2026-02-30T10:00:00Z'),
      text,
    ),
    affiliateTrackingId: fc.oneof(fc.integer(), fc.constant(Number.MAX_SAFE_INTEGER + 2)),
    subId: text,
  },
  { requiredKeys: ['eventId', 'externalId', 'amount', 'currency'] },
);

describe('any event ingest accepts is one the platform client accepts', () => {
  it('the worker never meets a request the client refuses as bad input', async () => {
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(anyOrder, async (fields) => {
        const parsed = OrderPlaced.safeParse({
          type: 'OrderPlaced',
          ...fields,
          source: 'generic',
          platform: 'generic',
          receivedAt: '2026-01-01T00:00:00.000Z',
        });
        fc.pre(parsed.success);
        accepted++;
        const deps = {
          ledger: new MemoryLedger(Date.now),
          sources,
          backendFor: recordingBackend,
          now: Date.now,
          workerId: 'w',
          leaseMs: 60_000,
        };

        const outcome = await processEvent(deps, parsed.data!).catch((error: unknown) => error);

        if (outcome instanceof BadInputError) expect.fail(`${outcome.field}: ${outcome.message}`);
        expect(outcome).toMatchObject({ result: 'added' });
      }),
      { numRuns: 300, seed: 13_003 },
    );
    expect(accepted).toBe(300);
  });
});

import { request } from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { MAX_BODY_BYTES } from '../../shared/http/answers.ts';
import { sandboxConversions } from '../support/sandbox.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

let stack: LocalStack;
beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 } });
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  stack.sandbox?.control.reset();
});

const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const secret = () => stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '';
const order = (orderId: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    type: 'order',
    orderId,
    amount: '49.90',
    currency: 'EUR',
    clickIds: [CLICK],
    buyerIp: '203.0.113.9',
    ...extra,
  });

/** Sends the headers and `sent` bytes of a body announced as longer, then waits for any answer. */
function unfinishedPost(path: string, announced: number, sent: string): Promise<number> {
  const url = new URL(path, stack.url);
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(announced) },
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.write(sent);
  });
}

describe('the local ingest server at its edges', () => {
  it('answers 400, not 500, to a malformed percent-encoding in the path', async () => {
    const res = await fetch(`${stack.url}/webhooks/%`, { method: 'POST', body: '{}' });

    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: 'bad_request', field: 'source' });
  });

  it('answers 408 to a request whose body never finishes, instead of holding it open', async () => {
    const status = await unfinishedPost('/webhooks/generic', 1_000, '{"type":"order"');

    expect(status).toBe(408);
  });

  it('answers 415 naming the encoding to a gzip body, not "signature does not match"', async () => {
    const body = order('edge-gzip');
    const signed = genericWebhook(body, secret());

    const res = await fetch(`${stack.url}/webhooks/generic`, {
      method: 'POST',
      headers: { ...signed.headers, 'content-encoding': 'gzip' },
      body: gzipSync(body),
    });

    expect(res.status).toBe(415);
    expect(JSON.stringify(await res.json())).toContain('gzip');
  });

  it('answers 413 on /refunds for a body over the limit, like the webhooks', async () => {
    const res = await fetch(`${stack.url}/refunds`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': stack.secrets['FINANCE_API_KEY'] ?? '' },
      body: `{"reason":"${'x'.repeat(MAX_BODY_BYTES)}"}`,
    });

    expect(res.status).toBe(413);
  });
});

describe('any valid Unicode goes through the queue', () => {
  it('queues and applies an order whose discount code is an emoji (GIFT🎁), and a refund reason with U+FFFF', async () => {
    const placed = await post(
      `${stack.url}/webhooks/generic`,
      genericWebhook(order('edge-emoji', { vouchers: ['GIFT🎁'] }), secret()),
    );
    const refunded = await post(
      `${stack.url}/webhooks/generic`,
      genericWebhook(
        JSON.stringify({
          type: 'refund',
          orderId: 'edge-emoji',
          refundId: 'r-\uffff-1',
          amount: '10.00',
          currency: 'EUR',
          reason: 'damaged \uffff 📦',
        }),
        secret(),
      ),
    );
    await stack.waitForIdle();

    expect([placed.status, refunded.status]).toEqual([202, 202]);
    const conversions = sandboxConversions(stack, 'edge-emoji');
    expect(conversions).toMatchObject([{ voucher: 'GIFT🎁', amount: 3_990 }]);
  });
});

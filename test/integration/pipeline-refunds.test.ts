import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { onlyConversion } from '../support/sandbox.ts';
import { peekQueue } from '../support/sqs-records.ts';
import { genericWebhook, post, sampleFixture, shopifyWebhook } from '../support/webhooks.ts';

const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const IP = '203.0.113.7';

let stack: LocalStack;

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, visibilityBaseSeconds: 1 });
});
afterAll(async () => {
  await stack?.close();
});

const secret = (name: string) => stack.secrets[name] ?? '';
const conversion = (externalId: string) => onlyConversion(stack, externalId);

/** Places a 587.00 USD order (the Shopify sample with a click id) under a fresh id. */
async function placeOrder(id: string): Promise<void> {
  const order = JSON.parse(sampleFixture('shopify/order_2026-07_docs_example.json')) as Record<
    string,
    unknown
  >;
  order['note_attributes'] = [{ name: 'aecid', value: CLICK }];
  order['browser_ip'] = IP;
  const body = JSON.stringify(order).replace('"id":450789469', `"id":${id}`);
  const answer = await post(
    `${stack.url}/webhooks/shopify`,
    shopifyWebhook(body, secret('SHOPIFY_WEBHOOK_SECRET'), 'orders/create'),
  );
  expect(answer.status).toBe(202);
  await stack.waitForIdle();
}

/**
 * Places a 587.00 USD order through the generic source (a shop refunds only its own orders), with a
 * click id unless `attributed` is false.
 */
async function placeGenericOrder(id: string, attributed = true): Promise<void> {
  const body = JSON.stringify({
    type: 'order',
    eventId: randomUUID(),
    orderId: id,
    amount: '587.00',
    currency: 'USD',
    ...(attributed ? { clickIds: [CLICK], buyerIp: IP } : {}),
  });
  const answer = await post(
    `${stack.url}/webhooks/generic`,
    genericWebhook(body, secret('GENERIC_WEBHOOK_SECRET')),
  );
  expect(answer.status).toBe(202);
  await stack.waitForIdle();
}

async function genericRefund(orderId: string, refund: Record<string, unknown>): Promise<number> {
  const body = JSON.stringify({ type: 'refund', orderId, eventId: randomUUID(), ...refund });
  const answer = await post(
    `${stack.url}/webhooks/generic`,
    genericWebhook(body, secret('GENERIC_WEBHOOK_SECRET')),
  );
  return answer.status;
}

async function financeRefund(body: Record<string, unknown>, key = secret('FINANCE_API_KEY')) {
  const res = await fetch(`${stack.url}/refunds`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { 'x-api-key': key } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

async function dlqMessages() {
  return peekQueue(stack.emulators.sqs, stack.emulators.dlqUrl);
}

describe('refunds reach the platform exactly once', () => {
  it('applies partial, partial, then full refunds, ending refused, with every delivery repeated', async () => {
    await placeGenericOrder('8001');
    const steps = [
      { refundId: 'r1', amount: '100.00', currency: 'USD' },
      { refundId: 'r2', amount: '87.00', currency: 'USD' },
      { refundId: 'r3', full: true, reason: 'returned' },
    ];

    for (const step of steps) {
      // Each refund delivered twice, with distinct event ids (only the ledger can dedupe them).
      expect(await genericRefund('8001', step)).toBe(202);
      expect(await genericRefund('8001', step)).toBe(202);
      await stack.waitForIdle();
    }

    const final = conversion('8001');
    expect(final.amountHistory.map((h) => h.amount)).toEqual([48_700, 40_000]);
    expect(final.status).toBe('refused');
    const record = await stack.ledger.get(ledgerKey(final.program, '8001'));
    expect(record?.state).toBe('refused');
    expect(
      Object.values(record?.refunds ?? {}).map((r) => [r.refundId, r.status, r.resultingAmount]),
    ).toEqual([
      ['r1', 'applied', 48_700],
      ['r2', 'applied', 40_000],
      ['r3', 'applied', 0],
    ]);
  });

  it('applies the Shopify refund sample once, even when finance sends the same refund id', async () => {
    await placeOrder('8002');
    const refund = sampleFixture('shopify/refund_2026-07_docs_example_two_lines.json').replace(
      '"order_id": 450789469',
      '"order_id": 8002',
    );

    const fromShop = await post(
      `${stack.url}/webhooks/shopify`,
      shopifyWebhook(refund, secret('SHOPIFY_WEBHOOK_SECRET'), 'refunds/create'),
    );
    await stack.waitForIdle();
    const fromFinance = await financeRefund({ externalId: '8002', refundId: '509562969', amount: '391.33' });
    await stack.waitForIdle();

    expect(fromShop.status).toBe(202);
    expect(fromFinance.status).toBe(202);
    // 587.00 minus the two refunded lines excluding tax (195.66 + 195.67).
    expect(conversion('8002').amountHistory.map((h) => h.amount)).toEqual([19_567]);
  });

  it('lets finance refund by API with the key, and answers 401 without it and 400 naming the field', async () => {
    await placeOrder('8003');

    const unauthorized = await financeRefund({ externalId: '8003', refundId: 'f1', amount: '10.00' }, '');
    const badField = await financeRefund({ externalId: '8003', refundId: 'f1', amount: '10.001' });
    const accepted = await financeRefund({
      externalId: '8003',
      refundId: 'f1',
      amount: '10.00',
      reason: 'goodwill',
    });
    await stack.waitForIdle();

    expect(unauthorized.status).toBe(401);
    expect(badField).toMatchObject({ status: 400, json: { field: 'amount' } });
    expect(accepted).toMatchObject({ status: 202, json: { amount: 1_000 } });
    expect(conversion('8003').amountHistory.map((h) => h.amount)).toEqual([57_700]);
  });

  it('records a refund of a locked conversion as a late refund, at once and not in the DLQ', async () => {
    await placeGenericOrder('8004');
    const locked = conversion('8004');
    stack.sandbox?.control.accept(locked.id);
    stack.sandbox?.control.lock(locked.id);

    expect(await genericRefund('8004', { refundId: 'late', full: true })).toBe(202);
    await stack.waitForIdle();

    expect((await dlqMessages()).filter((m) => m.body['externalId'] === '8004')).toEqual([]);
    const record = await stack.ledger.get(ledgerKey(locked.program, '8004'));
    expect(record?.refunds['late']).toMatchObject({ status: 'late', late: { because: 'locked' } });
    expect(record?.state).toBe('added');
    expect(conversion('8004').status).toBe('accepted');
  });

  it('keeps refund ids that are names of object properties, through the DynamoDB ledger', async () => {
    await placeGenericOrder('8008');

    for (const step of [
      { refundId: '__proto__', amount: '100.00', currency: 'USD' },
      { refundId: 'constructor', amount: '87.00', currency: 'USD' },
      { refundId: '__proto__', amount: '100.00', currency: 'USD' },
    ]) {
      expect(await genericRefund('8008', step)).toBe(202);
      await stack.waitForIdle();
    }

    const final = conversion('8008');
    expect(final.amountHistory.map((h) => h.amount)).toEqual([48_700, 40_000]);
    const record = await stack.ledger.get(ledgerKey(final.program, '8008'));
    expect(Object.getPrototypeOf(record?.refunds)).toBe(Object.prototype);
    expect(Object.keys(record?.refunds ?? {})).toEqual(['__proto__', 'constructor']);
    expect(
      Object.values(record?.refunds ?? {}).map((r) => [r.refundId, r.status, r.resultingAmount]),
    ).toEqual([
      ['__proto__', 'applied', 48_700],
      ['constructor', 'applied', 40_000],
    ]);
  });

  it('refuses the conversion of a cancelled order', async () => {
    await placeOrder('8005');
    const cancelled = sampleFixture('shopify/order_cancelled_2026-07_docs_example.json').replace(
      /"id":\s*450789469/,
      '"id": 8005',
    );

    const answer = await post(
      `${stack.url}/webhooks/shopify`,
      shopifyWebhook(cancelled, secret('SHOPIFY_WEBHOOK_SECRET'), 'orders/cancelled'),
    );
    await stack.waitForIdle();

    expect(answer.status).toBe(202);
    expect(conversion('8005')).toMatchObject({ status: 'refused' });
  });

  it('records a refund of a skipped order as skipped, holds one of an unknown order, and parks a currency mismatch', async () => {
    await placeGenericOrder('8006', false);
    await placeGenericOrder('8007');

    await genericRefund('8006', { refundId: 's1', amount: '5.00', currency: 'USD' });
    await genericRefund('no-such-order', { refundId: 'u1', amount: '5.00', currency: 'USD' });
    await genericRefund('8007', { refundId: 'c1', amount: '5.00', currency: 'EUR' });
    await stack.waitForIdle();

    const program = stack.sources.get('generic')?.program ?? '';
    const skipped = await stack.ledger.get(ledgerKey(program, '8006'));
    expect(skipped?.refunds['s1']).toMatchObject({ status: 'skipped' });
    expect(await stack.ledger.get(ledgerKey(program, 'no-such-order'))).toMatchObject({
      state: 'awaiting',
      refunds: { u1: { status: 'pending', amount: 500 } },
    });
    const parked = await dlqMessages();
    expect(parked.find((m) => m.body['externalId'] === 'no-such-order')).toBeUndefined();
    expect(parked.find((m) => m.body['externalId'] === '8007')?.attributes['reason']).toMatch(
      /currency EUR differs/,
    );
    expect(conversion('8007').amountHistory).toEqual([]);
  });

  it('parks a refund from another source than the order’s, naming both, and leaves the amount alone', async () => {
    await placeOrder('8009');

    expect(await genericRefund('8009', { refundId: 'x1', amount: '500.00', currency: 'USD' })).toBe(202);
    await stack.waitForIdle();

    expect(conversion('8009')).toMatchObject({ amount: 58_700, amountHistory: [] });
    const parked = (await dlqMessages()).find((m) => m.body['externalId'] === '8009');
    expect(parked?.attributes).toMatchObject({ failureClass: 'permanent', eventType: 'OrderRefunded' });
    expect(parked?.attributes['reason']).toMatch(/source "generic" for order 8009 of source "shopify"/);
  });
});

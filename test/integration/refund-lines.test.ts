import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { parseJsonBody } from '../../shared/json.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { onlyConversion } from '../support/sandbox.ts';
import { post, sampleFixture, shopifyWebhook, wooWebhook } from '../support/webhooks.ts';

/**
 * Issue 19: a refund's net amount is computed by the worker from the order's lines the ledger kept
 * (tax mode, per line net and quantity), not guessed from the refund alone. Real parts: the local
 * stack (fauxqs, dynalite, the sandbox) on port 0.
 */

const CLICK = '0123456789abcdef01234567';
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
const ledgerRecord = async (externalId: string) =>
  stack.ledger.get(ledgerKey(conversion(externalId).program, externalId));

/** A sample as an object; big ids stay exact (as strings) through `parseJsonBody`. */
function sample(path: string): Record<string, unknown> {
  return parseJsonBody(Buffer.from(sampleFixture(path))) as Record<string, unknown>;
}

async function shopify(body: unknown, topic: string): Promise<void> {
  const answer = await post(
    `${stack.url}/webhooks/shopify`,
    shopifyWebhook(JSON.stringify(body), secret('SHOPIFY_WEBHOOK_SECRET'), topic),
  );
  expect(answer.status).toBe(202);
}

async function woo(body: unknown, topic: string): Promise<void> {
  const answer = await post(
    `${stack.url}/webhooks/woocommerce`,
    wooWebhook(JSON.stringify(body), secret('WOOCOMMERCE_WEBHOOK_SECRET'), topic),
  );
  expect(answer.status).toBe(202);
}

/**
 * The tax-inclusive EUR order of our Shopify variant: 2 × 119.00 less 23.80 discount (tax 34.20,
 * net 180.00) and 1 × 59.50 (tax 9.50, net 50.00), shipping 5.95: 230.00 net.
 */
function taxInclusiveOrder(id: string): Record<string, unknown> {
  return { ...sample('shopify/order_taxes_included_multicurrency_bigids.json'), id, browser_ip: IP };
}

/**
 * The refund of one unit of each line plus the 5.95 shipping, paid back in one transaction in the
 * buyer's currency (129.00 − 12.90 discount share + 64.50 + 6.45 shipping = 187.05 USD): the
 * transaction equals neither Σ subtotal nor Σ subtotal + Σ tax, so the old rule took the
 * subtotals (tax included) as net.
 */
function twoItemsAndShipping(orderId: string, refundId: string): Record<string, unknown> {
  const base = sample('shopify/refund_taxes_included_bigids.json');
  const money = (shop: string, presentment: string) => ({
    shop_money: { amount: shop, currency_code: 'EUR' },
    presentment_money: { amount: presentment, currency_code: 'USD' },
  });
  return {
    ...base,
    id: refundId,
    order_id: orderId,
    refund_line_items: [
      {
        id: '9234567890123456701',
        line_item_id: '14567890123456789012',
        quantity: 1,
        subtotal: 107.1,
        subtotal_set: money('107.10', '116.10'),
        total_tax: 17.1,
        total_tax_set: money('17.10', '18.54'),
      },
      {
        id: '9234567890123456702',
        line_item_id: '14567890123456789013',
        quantity: 1,
        subtotal: 59.5,
        subtotal_set: money('59.50', '64.50'),
        total_tax: 9.5,
        total_tax_set: money('9.50', '10.30'),
      },
    ],
    refund_shipping_lines: [{ id: '1', amount_set: money('5.95', '6.45') }],
    transactions: [
      { id: '7234567890123456701', kind: 'refund', status: 'success', amount: '187.05', currency: 'USD' },
    ],
  };
}

describe('Shopify refunds are computed from the order the ledger kept', () => {
  it('lands a tax-inclusive refund of two items plus shipping on the order net minus the two items’ net', async () => {
    await shopify(taxInclusiveOrder('5787612545068100001'), 'orders/create');
    await stack.waitForIdle();
    expect(conversion('5787612545068100001').amount).toBe(23_000);

    await shopify(twoItemsAndShipping('5787612545068100001', '1234567890123400001'), 'refunds/create');
    await stack.waitForIdle();

    // 230.00 − (90.00 + 50.00): one unit of the first line is half its 180.00 net.
    expect(conversion('5787612545068100001').amountHistory.map((h) => h.amount)).toEqual([9_000]);
    const refund = (await ledgerRecord('5787612545068100001'))?.refunds['1234567890123400001'];
    expect(refund).toMatchObject({ amount: 14_000, status: 'applied', resultingAmount: 9_000 });
  });

  it('computes a refund that came before its order once the order arrives (held as awaiting)', async () => {
    await shopify(twoItemsAndShipping('5787612545068100002', '1234567890123400002'), 'refunds/create');
    await stack.waitForIdle();
    await shopify(taxInclusiveOrder('5787612545068100002'), 'orders/create');
    await stack.waitForIdle();

    const added = conversion('5787612545068100002');
    expect(added.amount).toBe(9_000);
    const refund = (await ledgerRecord('5787612545068100002'))?.refunds['1234567890123400002'];
    expect(refund).toMatchObject({ amount: 14_000, status: 'applied', resultingAmount: 9_000 });
  });

  it('keeps the current rule for an order the ledger never saw, and says so on the refund', async () => {
    // The order reaches the platform without the connector (placed before it existed).
    const order = taxInclusiveOrder('5787612545068100003');
    await shopify(order, 'orders/create');
    await stack.waitForIdle();
    const program = conversion('5787612545068100003').program;
    const record = await stack.ledger.get(ledgerKey(program, '5787612545068100003'));
    expect(record?.refundBasis).toBeDefined();
    await stack.ledger.update({ ...record!, refundBasis: undefined });

    await shopify(twoItemsAndShipping('5787612545068100003', '1234567890123400003'), 'refunds/create');
    await stack.waitForIdle();

    // The old rule: Σ subtotal (166.60) taken as net.
    expect(conversion('5787612545068100003').amountHistory.map((h) => h.amount)).toEqual([6_340]);
    const refund = (await ledgerRecord('5787612545068100003'))?.refunds['1234567890123400003'];
    expect(refund?.amount).toBe(16_660);
    expect(refund?.amountFrom).toMatch(/current rule/);
  });
});

/**
 * WooCommerce order with two tax rates and taxed shipping: 2 × 50.00 at 20 % and 1 × 30.00 at 5 %,
 * shipping 10.00 + 2.00 tax. Net 130.00; total 163.50.
 */
function wooOrder(
  id: string,
  refunds: unknown[] = [],
  modified = '2026-03-02T10:00:00',
): Record<string, unknown> {
  const order = sample('woocommerce/order_v3_docs_example.json');
  return {
    ...order,
    id,
    status: refunds.length > 0 ? 'processing' : 'processing',
    currency: 'EUR',
    date_modified_gmt: modified,
    prices_include_tax: false,
    total: '163.50',
    total_tax: '23.50',
    shipping_total: '10.00',
    shipping_tax: '2.00',
    customer_ip_address: IP,
    meta_data: [{ id: 1, key: '_aecid', value: CLICK }],
    line_items: [
      { id: 315, product_id: 93, quantity: 2, subtotal: '100.00', total: '100.00', total_tax: '20.00' },
      { id: 316, product_id: 22, quantity: 1, subtotal: '30.00', total: '30.00', total_tax: '1.50' },
    ],
    fee_lines: [],
    coupon_lines: [],
    refunds,
  };
}

describe('WooCommerce refunds use the refund’s lines, else the order’s per-line rates', () => {
  it('lands exact when an order with two tax rates is refunded line by line (refund totals only)', async () => {
    await woo(wooOrder('9101'), 'order.created');
    await stack.waitForIdle();
    expect(conversion('9101').amount).toBe(13_000);

    // One unit of the 20 % line (60.00 gross), then the 5 % line (31.50 gross), then the last unit.
    const first = { id: 9201, refund: 'broken', total: '-60.00' };
    const second = { id: 9202, refund: '', total: '-31.50' };
    const third = { id: 9203, refund: '', total: '-60.00' };
    await woo(wooOrder('9101', [first], '2026-03-02T11:00:00'), 'order.updated');
    await stack.waitForIdle();
    await woo(wooOrder('9101', [second, first], '2026-03-02T12:00:00'), 'order.updated');
    await stack.waitForIdle();
    await woo(wooOrder('9101', [third, second, first], '2026-03-02T13:00:00'), 'order.updated');
    await stack.waitForIdle();

    const final = conversion('9101');
    expect(final.amountHistory.map((h) => h.amount)).toEqual([8_000, 5_000]);
    expect(final.status).toBe('refused');
    const record = await ledgerRecord('9101');
    expect(['9201', '9202', '9203'].map((id) => record?.refunds[id]?.amount)).toEqual([5_000, 3_000, 5_000]);
  });

  it('lands exact from the refund’s own lines when the body lists them', async () => {
    await woo(wooOrder('9102'), 'order.created');
    await stack.waitForIdle();
    // The refund pays back the 5 % line and the shipping in one: its lines say what it was.
    const refund = {
      id: 9301,
      refund: '',
      total: '-43.50',
      line_items: [
        {
          id: 401,
          quantity: -1,
          total: '-30.00',
          total_tax: '-1.50',
          meta_data: [{ id: 1, key: '_refunded_item_id', value: '316' }],
        },
      ],
    };
    await woo(wooOrder('9102', [refund], '2026-03-02T11:00:00'), 'order.updated');
    await stack.waitForIdle();

    expect(conversion('9102').amountHistory.map((h) => h.amount)).toEqual([10_000]);
  });
});

describe('the lines kept for refunds, in DynamoDB', () => {
  it('stores a record past the item size with its basis pared down to totals and tax mode', async () => {
    // 200 lines with ids at their length limit, refunded line by line 8 times: past 400 KB as is.
    const id = (i: number) => `${i}`.padStart(256, '0');
    const lines = Array.from({ length: 200 }, (_, i) => ({ id: id(i), net: 100, tax: 19, quantity: 1 }));
    const refunds = Object.fromEntries(
      Array.from({ length: 8 }, (_, r) => [
        `r${r}`,
        {
          refundId: `r${r}`,
          amount: 100,
          full: false,
          origin: 'shop' as const,
          receivedAt: new Date().toISOString(),
          status: 'applied' as const,
          lines: lines.map((l) => ({ id: l.id, quantity: 1 })),
        },
      ]),
    );
    const key = ledgerKey('0123456789abcdef01234567', 'big-order');
    const now = new Date().toISOString();
    const created = await stack.ledger.create({
      key,
      program: '0123456789abcdef01234567',
      externalId: 'big-order',
      source: 'shopify',
      state: 'added',
      version: 0,
      originalAmount: 20_000,
      currentAmount: 19_200,
      currency: 'EUR',
      refundBasis: { taxesIncluded: true, net: 20_000, tax: 3_800, shipping: 0, lines, truncated: false },
      refunds,
      createdAt: now,
      updatedAt: now,
    });

    expect(created).toBe(true);
    const stored = await stack.ledger.get(key);
    expect(stored?.refundBasis).toEqual({
      taxesIncluded: true,
      net: 20_000,
      tax: 3_800,
      shipping: 0,
      lines: [],
      truncated: true,
    });
    expect(Object.values(stored?.refunds ?? {}).map((r) => [r.refundId, r.amount, r.lines])).toEqual(
      Array.from({ length: 8 }, (_, r) => [`r${r}`, 100, undefined]),
    );
  });
});

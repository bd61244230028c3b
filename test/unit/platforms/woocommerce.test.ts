import { describe, expect, it } from 'vitest';
import { BadInputError, UnauthorizedError } from '../../../shared/errors.ts';
import { woocommerceAdapter } from '../../../shared/platforms/woocommerce.ts';
import {
  base64Hmac,
  contextOf,
  eventsOf,
  NOW,
  onlyEvent,
  request,
  SECRET,
  sampleJson,
  sampleRaw,
  signatureVector,
  signedDeliveries,
  sourceOf,
  thrown,
} from './support.ts';

const ORDER = 'woocommerce/order_v3_docs_example.json';

const { context, delivery, handle } = signedDeliveries(woocommerceAdapter, (body, topic: string) => ({
  'x-wc-webhook-topic': topic,
  'x-wc-webhook-signature': base64Hmac(SECRET, body),
  'x-wc-webhook-delivery-id': 'delivery-1',
}));

/** Order 723 of the "List all orders" example: completed, two refunds with negative totals. */
function refundedOrder(): Record<string, unknown> {
  const orders = JSON.parse(sampleRaw('woocommerce/orders_list_v3_docs_example.json').toString()) as Array<
    Record<string, unknown>
  >;
  return orders.find((o) => o['id'] === 723)!;
}

describe('woocommerce orders', () => {
  it('maps the documentation order signed as in signature_test_vectors.json', () => {
    // Prepare
    const vector = signatureVector('woocommerce');
    const req = request(sampleRaw(vector.body_file), {
      'x-wc-webhook-topic': 'order.created',
      'x-wc-webhook-signature': vector.value,
    });
    // Act
    const event = onlyEvent(
      woocommerceAdapter.handle(req, contextOf(sourceOf('woocommerce'), [vector.secret])),
    );
    // Assess. By hand: line totals 6.00 + 12.00 = 18.00 (total 29.35 = 18.00 + shipping 10.00 +
    // total_tax 1.35). Guest (customer_id 0) and empty customer_ip_address give neither field.
    expect(event).toEqual({
      type: 'OrderPlaced',
      eventId: 'order.created:727:2017-03-22T19:28:08',
      source: 'woocommerce-shop',
      platform: 'woocommerce',
      externalId: '727',
      receivedAt: NOW.toISOString(),
      amount: 1800,
      currency: 'USD',
      vouchers: [],
      clickIds: [],
      productIds: ['93', '22'],
      paymentMethod: 'bacs',
      orderDate: '2017-03-22T19:28:02Z',
      // Kept for refunds (issue 19): each line's total and tax, the shipping.
      basis: {
        taxesIncluded: false,
        net: 1800,
        tax: 135,
        shipping: 1000,
        lines: [
          { id: '315', net: 600, tax: 45, quantity: 2 },
          { id: '316', net: 1200, tax: 90, quantity: 1 },
        ],
        truncated: false,
      },
    });
  });

  it('maps a prices-include-tax order with attribution from meta_data', () => {
    // Prepare
    const raw = sampleRaw('woocommerce/order_prices_include_tax_attributed.json');
    // Act
    const event = onlyEvent(handle(raw, 'order.created'));
    // Assess. By hand: line totals (net of tax even though prices include it) 84.03 + 16.81 =
    // 100.84; check: 100.84 + shipping 4.20 + total_tax 19.96 = total 125.00.
    expect(event).toMatchObject({
      externalId: '1042',
      amount: 10084,
      currency: 'EUR',
      customerId: '17',
      vouchers: ['fruehling'],
      clickIds: ['fedcba9876543210fedcba98'],
      subId: 'blog-post-17',
      buyerIp: '198.51.100.23',
      paymentMethod: 'stripe',
      orderDate: '2026-05-04T09:20:31Z',
    });
  });

  it('subtracts line taxes when the order total shows the line totals were gross', () => {
    // Prepare: a plugin wrote tax-inclusive line totals (100.00 and 20.00) into the same order
    const order = JSON.parse(sampleRaw('woocommerce/order_prices_include_tax_attributed.json').toString());
    order.line_items[0].total = '100.00';
    order.line_items[1].total = '20.00';
    // Act
    const event = onlyEvent(handle(JSON.stringify(order), 'order.created'));
    // Assess: 120.00 − (15.97 + 3.19) = 100.84, as 100.84 + 4.20 + 19.96 = 125.00 confirms
    expect(event).toMatchObject({ amount: 10084 });
  });

  it('reads the lines kept for refunds leniently: an odd line id or quantity drops them, not the order', () => {
    // Prepare
    const order = sampleJson(ORDER);
    const lines = order['line_items'] as Record<string, unknown>[];
    lines[0]!['quantity'] = '2';
    lines[1]!['id'] = { odd: true };
    // Act
    const event = onlyEvent(handle(JSON.stringify(order), 'order.created'));
    // Assess
    expect(event).toMatchObject({ type: 'OrderPlaced', amount: 1800 });
    expect(event).not.toHaveProperty('basis', expect.anything());
  });

  it('passes a refund’s own lines through, net, naming the order line refunded', () => {
    // Prepare: refund 726 of order 723 lists the line it refunds (one unit of line 311, 9.00).
    const order = refundedOrder();
    const refunds = order['refunds'] as Record<string, unknown>[];
    refunds[0]!['line_items'] = [
      {
        id: 314,
        quantity: -1,
        total: '-9.00',
        total_tax: '0.00',
        meta_data: [{ id: 2076, key: '_refunded_item_id', value: '311' }],
      },
    ];
    refunds[1]!['line_items'] = 'junk';
    // Act
    const events = eventsOf(handle(JSON.stringify(order), 'order.updated'));
    // Assess: lines for the first; the second, unreadable, passes its gross instead.
    expect(events[0]).toMatchObject({ refundId: '726', lines: [{ id: '311', quantity: 1, net: 900 }] });
    expect(events[0]).not.toHaveProperty('gross', expect.anything());
    expect(events[1]).toMatchObject({ refundId: '724', gross: 900 });
    expect(events[1]).not.toHaveProperty('lines', expect.anything());
  });

  it('reads JPY amounts without decimals and names a bad one', () => {
    // Prepare
    const order = sampleJson(ORDER);
    order['currency'] = 'JPY';
    order['total'] = '2935';
    const lines = order['line_items'] as Array<Record<string, unknown>>;
    lines[0]!['total'] = '600';
    lines[1]!['total'] = '1200';
    const bad = structuredClone(order);
    (bad['line_items'] as Array<Record<string, unknown>>)[1]!['total'] = '1200.5';
    // Act
    const event = onlyEvent(handle(JSON.stringify(order), 'order.created'));
    const error = thrown(() => handle(JSON.stringify(bad), 'order.created'));
    // Assess
    expect(event).toMatchObject({ amount: 1800, currency: 'JPY' });
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('line_items.1.total');
  });

  it('rejects line totals adding up past what can be counted exactly, naming line_items', () => {
    // Prepare: two lines of 50 000 000 000 000.00 (5e15 minor units each, fine alone; together past
    // Number.MAX_SAFE_INTEGER)
    const order = sampleJson(ORDER);
    for (const line of order['line_items'] as Array<Record<string, unknown>>)
      line['total'] = '50000000000000.00';
    // Act
    const error = thrown(() => handle(JSON.stringify(order), 'order.created'));
    // Assess: the field the shop can look up, not one a WooCommerce order does not have
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('line_items');
  });

  it('reads a tracking id from meta_data, the first valid one', () => {
    // Prepare
    const good = sampleJson(ORDER);
    (good['meta_data'] as unknown[]).push(
      { id: 1, key: 'affiliate_tracking_id', value: '8.8' },
      { id: 2, key: '_affiliate_tracking_id', value: '88' },
    );
    // Act
    const result = handle(JSON.stringify(good), 'order.created');
    // Assess
    expect(onlyEvent(result)).toMatchObject({ affiliateTrackingId: 88, clickIds: [] });
    expect(result).toMatchObject({ skippedFields: ['meta_data.1.value'] });
  });

  it.each([
    ['a click id over 256 characters', { key: '_aecid', value: 'a'.repeat(300) }],
    ['a click id holding a control character (\\u0001)', { key: 'aecid', value: 'abc\u0001def' }],
    ['a tracking id that is not one', { key: 'affiliate_tracking_id', value: 'abc' }],
    ['a subid holding a control character (\\u0001)', { key: 'subid', value: 'blog\u0001post' }],
  ])('places the order whose meta_data has %s, without that value, reporting its field', (_case, junk) => {
    // Prepare: plugins copy the URL's aecid or a cookie, which the buyer controls, into order meta
    // unchecked. A 400 would lose the order and, after 5 in a row, WooCommerce disables the webhook
    // for every later order of the shop.
    const order = sampleJson(ORDER);
    (order['meta_data'] as unknown[]).push({ id: 1, ...junk });
    // Act
    const result = handle(JSON.stringify(order), 'order.created');
    // Assess: the documentation order; the field is reported, never the value
    const event = onlyEvent(result);
    expect(event).toMatchObject({ type: 'OrderPlaced', externalId: '727', amount: 1800, clickIds: [] });
    expect(event).not.toHaveProperty('affiliateTrackingId', expect.anything());
    expect(event).not.toHaveProperty('subId', expect.anything());
    expect(result).toMatchObject({ skippedFields: ['meta_data.1.value'] });
  });

  it('still takes the valid meta_data attribution next to invalid values', () => {
    // Prepare
    const order = JSON.parse(sampleRaw('woocommerce/order_prices_include_tax_attributed.json').toString());
    order.meta_data.unshift(
      { id: 1, key: 'aecid', value: `${'a'.repeat(300)},aaaaaaaaaaaaaaaaaaaaaaaa` },
      { id: 2, key: 'subid', value: 's'.repeat(300) },
      { id: 3, key: 'affiliate_tracking_id', value: 'abc' },
    );
    // Act
    const result = handle(JSON.stringify(order), 'order.created');
    // Assess
    expect(onlyEvent(result)).toMatchObject({
      externalId: '1042',
      amount: 10084,
      clickIds: ['aaaaaaaaaaaaaaaaaaaaaaaa', 'fedcba9876543210fedcba98'],
      subId: 'blog-post-17',
    });
    expect(onlyEvent(result)).not.toHaveProperty('affiliateTrackingId', expect.anything());
    expect(result).toMatchObject({
      skippedFields: ['meta_data.0.value', 'meta_data.1.value', 'meta_data.2.value'],
    });
  });

  it('ignores other topics and rejects a missing topic or a bad signature', () => {
    // Prepare
    const raw = sampleRaw(ORDER);
    const noTopic = delivery(raw, 'x');
    delete (noTopic.headers as Record<string, string | undefined>)['x-wc-webhook-topic'];
    const forged = request(raw, { 'x-wc-webhook-topic': 'order.created', 'x-wc-webhook-signature': 'Zm9v' });
    // Act / Assess
    expect(handle(raw, 'product.updated').kind).toBe('ignored');
    expect(thrown(() => woocommerceAdapter.handle(noTopic, context)).field).toBe('x-wc-webhook-topic');
    expect(thrown(() => woocommerceAdapter.handle(forged, context))).toBeInstanceOf(UnauthorizedError);
  });

  it('answers the unsigned creation ping before any signature check', () => {
    // Prepare
    const ping = request('webhook_id=15', { 'content-type': 'application/x-www-form-urlencoded' });
    const notPing = request('webhook_id=15&x=1', {});
    // Act / Assess
    expect(woocommerceAdapter.handle(ping, context)).toEqual({ kind: 'ping' });
    expect(thrown(() => woocommerceAdapter.handle(notPing, context))).toBeInstanceOf(UnauthorizedError);
  });
});

describe('woocommerce order.updated', () => {
  it('emits one OrderRefunded per refunds[] entry, with its gross for the worker and the net/gross ratio as fallback', () => {
    // Prepare
    const raw = JSON.stringify(refundedOrder());
    // Act
    const events = eventsOf(handle(raw, 'order.updated'));
    // Assess. By hand: net = line totals 9.00 + 20.00 = 29.00 of gross total 39.00 (10.00
    // shipping). Refund 726: 10.00 × 29/39 = 7.4358… → 7.44; refund 724: 9.00 × 29/39 = 6.6923… → 6.69.
    expect(events).toEqual([
      {
        type: 'OrderRefunded',
        eventId: 'order.updated:723:2017-03-21T19:54:51:refund:726',
        source: 'woocommerce-shop',
        platform: 'woocommerce',
        externalId: '723',
        receivedAt: NOW.toISOString(),
        refundId: '726',
        amount: 744,
        currency: 'USD',
        full: false,
        origin: 'shop',
        // The worker turns this net against the order's recorded lines (issue 19).
        gross: 1000,
      },
      expect.objectContaining({
        refundId: '724',
        amount: 669,
        eventId: expect.stringMatching(/:refund:724$/),
      }),
    ]);
  });

  it('carries the reason WooCommerce writes in refunds[].reason', () => {
    // Prepare: the built-in sample `connector send` posts, in the shape WooCommerce's REST order
    // controller writes (`{ id, reason, total }`)
    const raw = sampleRaw('../samples/woocommerce-order-refunded-partly.json');
    // Act
    const event = onlyEvent(handle(raw, 'order.updated'));
    // Assess
    expect(event).toMatchObject({ type: 'OrderRefunded', refundId: '728', reason: 'one item returned' });
  });

  it('still reads refunds[].refund, the key the REST documentation example shows', () => {
    // Prepare
    const order = refundedOrder();
    const [first, second] = order['refunds'] as Array<Record<string, unknown>>;
    first!['refund'] = 'damaged in transit';
    second!['refund'] = 'ignored';
    second!['reason'] = 'wrong colour';
    // Act
    const events = eventsOf(handle(JSON.stringify(order), 'order.updated'));
    // Assess: `reason`, WooCommerce's own key, wins when both are there
    expect(events).toMatchObject([
      { refundId: '726', reason: 'damaged in transit' },
      { refundId: '724', reason: 'wrong colour' },
    ]);
  });

  it('keeps a refund whose long or odd reason the event could not carry as written', () => {
    // Prepare: 499 characters then an emoji across the 500-character limit (under either key); a
    // control character
    const order = refundedOrder();
    const [first, second] = order['refunds'] as Array<Record<string, unknown>>;
    first!['refund'] = `${'x'.repeat(499)}😀 customer returned both items`;
    second!['reason'] = 'scratched\u0001 lid';
    // Act
    const events = eventsOf(handle(JSON.stringify(order), 'order.updated'));
    // Assess: both refunds counted, their reasons cut before the emoji and without the control character
    expect(events).toMatchObject([
      { refundId: '726', amount: 744, reason: 'x'.repeat(499) },
      { refundId: '724', amount: 669, reason: 'scratched lid' },
    ]);
  });

  it('re-emits the same refund ids on every send; the dedup key follows date_modified_gmt', () => {
    // Prepare
    const order = refundedOrder();
    const later = { ...order, date_modified_gmt: '2017-03-25T08:00:00' };
    // Act
    const first = eventsOf(handle(JSON.stringify(order), 'order.updated'));
    const resent = eventsOf(handle(JSON.stringify(order), 'order.updated'));
    const newer = eventsOf(handle(JSON.stringify(later), 'order.updated'));
    // Assess
    expect(resent.map((e) => e.eventId)).toEqual(first.map((e) => e.eventId));
    expect(newer.map((e) => e.eventId)).not.toEqual(first.map((e) => e.eventId));
    expect(newer.map((e) => (e.type === 'OrderRefunded' ? e.refundId : ''))).toEqual(['726', '724']);
  });

  it('maps status refunded to a full refund and status cancelled to a cancellation', () => {
    // Prepare
    const refunded = { ...refundedOrder(), status: 'refunded' };
    const cancelled = { ...sampleJson(ORDER), status: 'cancelled' };
    // Act
    const full = onlyEvent(handle(JSON.stringify(refunded), 'order.updated'));
    const cancel = onlyEvent(handle(JSON.stringify(cancelled), 'order.updated'));
    // Assess
    expect(full).toMatchObject({
      type: 'OrderRefunded',
      refundId: 'connector:status-refunded',
      full: true,
      externalId: '723',
    });
    expect(full).not.toHaveProperty('amount');
    expect(cancel).toMatchObject({
      type: 'OrderCancelled',
      externalId: '727',
      eventId: 'order.updated:727:2017-03-22T19:28:08',
    });
  });

  it('ignores an update without refunds or a terminal status', () => {
    // Act
    const result = handle(sampleRaw(ORDER), 'order.updated');
    // Assess
    expect(result).toEqual({
      kind: 'ignored',
      reason: 'order.updated with status processing and no refunds',
    });
  });
});

describe('woocommerce refund resource', () => {
  it('ignores the documentation refund, which carries no currency', () => {
    // Act
    const result = handle(
      sampleRaw('woocommerce/refund_v3_docs_example.json'),
      'action.woocommerce_refund_created',
    );
    // Assess
    expect(result).toEqual({ kind: 'ignored', reason: expect.stringContaining('no currency') });
  });

  it('maps a refund resource with a currency: line totals when listed, else the amount', () => {
    // Prepare
    const [withoutLines, withLines] = JSON.parse(
      sampleRaw('woocommerce/refunds_list_v3_docs_example.json').toString(),
    ) as Array<Record<string, unknown>>;
    // Act
    const gross = onlyEvent(handle(JSON.stringify({ ...withoutLines, currency: 'usd' }), 'order.updated'));
    const net = onlyEvent(handle(JSON.stringify({ ...withLines, currency: 'USD' }), 'refund.created'));
    // Assess: the order id comes from _links.up (…/orders/723)
    expect(gross).toMatchObject({ externalId: '723', refundId: '726', amount: 1000, currency: 'USD' });
    expect(net).toMatchObject({ externalId: '723', refundId: '724', amount: 900, eventId: 'refund:723:724' });
  });

  it('keeps a refund resource whose long or odd reason the event could not carry as written', () => {
    // Prepare: the documentation refund with the currency a plugin adds
    const body = { ...sampleJson('woocommerce/refund_v3_docs_example.json'), currency: 'USD' };
    const long = { ...body, reason: `${'x'.repeat(499)}😀 customer returned both items` };
    const onlyControls = { ...body, reason: '\u0000\u001b' };
    // Act
    const cut = onlyEvent(handle(JSON.stringify(long), 'action.woocommerce_refund_created'));
    const none = onlyEvent(handle(JSON.stringify(onlyControls), 'action.woocommerce_refund_created'));
    // Assess
    expect(cut).toMatchObject({
      type: 'OrderRefunded',
      refundId: '726',
      amount: 1000,
      reason: 'x'.repeat(499),
    });
    expect(none).toMatchObject({ type: 'OrderRefunded', refundId: '726', amount: 1000 });
    expect(none).not.toHaveProperty('reason', expect.anything());
  });
});

describe('woocommerce: the topic header is not signed', () => {
  // X-WC-Webhook-Topic is outside the HMAC, so an order.updated body can be resent as order.created.
  // The body is the order's state when it was sent: what it says is acted on, never the topic alone.

  it('does not place an order whose order.created body is cancelled, refunded or failed', () => {
    // Prepare: the documentation order as order.updated sends it after each change
    const results = ['cancelled', 'refunded', 'failed'].map((status) =>
      handle(JSON.stringify({ ...sampleJson(ORDER), status }), 'order.created'),
    );
    // Assess
    for (const [i, status] of ['cancelled', 'refunded', 'failed'].entries()) {
      expect(results[i]).toEqual({ kind: 'ignored', reason: expect.stringContaining(`status ${status}`) });
    }
  });

  it('does not place the refunded order 723 resent as order.created', () => {
    // Prepare: order 723 of the docs with its two refunds, now wholly refunded
    const body = JSON.stringify({ ...refundedOrder(), status: 'refunded' });
    // Act
    const created = handle(body, 'order.created');
    const updated = onlyEvent(handle(body, 'order.updated'));
    // Assess
    expect(created.kind).toBe('ignored');
    expect(updated).toMatchObject({ type: 'OrderRefunded', full: true });
  });

  it('acts on nothing when a new order is resent as order.updated', () => {
    // Act
    const result = handle(sampleRaw(ORDER), 'order.updated');
    // Assess
    expect(result).toEqual({
      kind: 'ignored',
      reason: 'order.updated with status processing and no refunds',
    });
  });
});

import { describe, expect, it } from 'vitest';
import { BadInputError, UnauthorizedError } from '../../../shared/errors.ts';
import { shopifyAdapter } from '../../../shared/platforms/shopify.ts';
import {
  base64Hmac,
  contextOf,
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

const ORDER = 'shopify/order_2026-07_docs_example.json';
const REFUND = 'shopify/refund_2026-07_docs_example.json';
const REFUND_TWO_LINES = 'shopify/refund_2026-07_docs_example_two_lines.json';

const { context, delivery, handle } = signedDeliveries(
  shopifyAdapter,
  (body, topic: string, extra: Record<string, string> = {}) => ({
    'x-shopify-topic': topic,
    'x-shopify-hmac-sha256': base64Hmac(SECRET, body),
    'x-shopify-event-id': 'e8c1a2f4-0000-4000-8000-000000000001',
    ...extra,
  }),
);

describe('shopify orders', () => {
  it('maps the documentation order signed as in signature_test_vectors.json', () => {
    // Prepare: the vector's secret, after a retired one (rotation)
    const vector = signatureVector('shopify');
    const raw = sampleRaw(vector.body_file);
    const req = request(raw, {
      'x-shopify-topic': 'orders/create',
      'x-shopify-hmac-sha256': vector.value,
      'x-shopify-event-id': 'evt-42',
    });
    // Act
    const event = onlyEvent(
      shopifyAdapter.handle(req, contextOf(context.source, ['retired', vector.secret])),
    );
    // Assess. By hand: three lines at 199.00 × 1 = 597.00, discount_allocations 3.34 + 3.33 + 3.33
    // = 10.00, taxes_included false → 587.00. The sample's subtotal_price says 597.00, but its
    // total_price 598.94 = 587.00 + total_tax 11.94 + shipping 0.00 agrees with the lines, so the
    // lines are the rule. current_subtotal_price (195.67) reflects later refunds: not the sale.
    expect(event).toEqual({
      type: 'OrderPlaced',
      eventId: 'evt-42',
      source: 'shopify-shop',
      platform: 'shopify',
      externalId: '450789469',
      receivedAt: NOW.toISOString(),
      amount: 58700,
      currency: 'USD',
      customerId: '207119551',
      vouchers: ['TENOFF'],
      clickIds: [],
      buyerIp: '0.0.0.0',
      productIds: ['632910392'],
      paymentMethod: 'bogus',
      orderDate: '2008-01-10T11:00:00-05:00',
      // Kept for refunds (issue 19): each line's net as counted above, its tax, its quantity.
      basis: {
        taxesIncluded: false,
        net: 58700,
        tax: 1194,
        shipping: 0,
        lines: [
          { id: '466157049', net: 19566, tax: 398, quantity: 1 },
          { id: '518995019', net: 19567, tax: 398, quantity: 1 },
          { id: '703073504', net: 19567, tax: 398, quantity: 1 },
        ],
        truncated: false,
      },
    });
    expect(event).not.toHaveProperty('affiliateTrackingId');
    expect(event).not.toHaveProperty('subId');
  });

  it('maps a tax-inclusive, multi-currency order with ids over 2^53 exactly, in shop currency', () => {
    // Prepare
    const raw = sampleRaw('shopify/order_taxes_included_multicurrency_bigids.json');
    // Act
    const event = onlyEvent(handle(raw, 'orders/create'));
    // Assess. By hand, EUR shop money (presentment USD ignored), taxes_included:
    // line 1: 2 × 119.00 − 23.80 discount − 34.20 tax = 180.00; line 2: 59.50 − 9.50 tax = 50.00;
    // shipping 5.95 (+0.95 tax) left out → 230.00 EUR.
    expect(event).toMatchObject({
      type: 'OrderPlaced',
      externalId: '5787612545068000001',
      amount: 23000,
      currency: 'EUR',
      customerId: '7390712345678901234',
      productIds: ['8123456789012345678', '8123456789012345679'],
      vouchers: ['WELCOME10'],
      // note attribute `_aecid` (underscore-hidden) first, then the landing_site query
      clickIds: ['0123456789abcdef01234567', 'abcdefabcdefabcdefabcdef'],
      subId: 'newsletter-march',
      buyerIp: '2001:db8::7',
      paymentMethod: 'shopify_payments',
      orderDate: '2026-03-02T10:15:03+01:00',
    });
  });

  it('maps a JPY order with a tracking id attribute (manual mode) and no click id', () => {
    // Prepare
    const raw = sampleRaw('shopify/order_jpy.json');
    // Act
    const event = onlyEvent(handle(raw, 'orders/create'));
    // Assess. By hand: 2 × 1500 − 300 discount − 245 included tax = 2455 JPY (0 decimals;
    // "300.00" is accepted because its extra decimals are zeros); shipping 500 left out.
    expect(event).toMatchObject({ amount: 2455, currency: 'JPY', affiliateTrackingId: 4711, clickIds: [] });
    expect(event).not.toHaveProperty('customerId', expect.anything());
  });

  it('reads click ids, tracking id and subId from the configured attribute names', () => {
    // Prepare
    const order = sampleJson(ORDER);
    order['note_attributes'] = [
      { name: 'Ref-Click', value: 'aaaaaaaaaaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbbbbbbbbbb' },
      { name: 'aecid', value: 'cccccccccccccccccccccccc' },
      { name: 'partner', value: '31' },
      { name: 'campaign', value: 'summer' },
    ];
    order['landing_site'] = '/?ref-click=aaaaaaaaaaaaaaaaaaaaaaaa';
    const custom = sourceOf('shopify', {
      clickIdAttributes: ['ref-click'],
      trackingIdAttributes: ['partner'],
      subIdAttributes: ['campaign'],
    });
    // Act
    const event = onlyEvent(
      shopifyAdapter.handle(delivery(JSON.stringify(order), 'orders/create'), contextOf(custom)),
    );
    // Assess: `aecid` is not configured here, duplicates collapse
    expect(event).toMatchObject({
      clickIds: ['aaaaaaaaaaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbbbbbbbbbb'],
      affiliateTrackingId: 31,
      subId: 'summer',
    });
  });

  it('maps an order whose lines the event cannot keep for refunds (a line discounted below zero) without them', () => {
    // Prepare: the first 199.00 line carries a 250.00 discount; the order is still 340.34 net.
    const order = sampleJson(ORDER);
    const lines = order['line_items'] as {
      discount_allocations: { amount: string; amount_set?: unknown }[];
    }[];
    lines[0]!.discount_allocations = [{ amount: '250.00' }];
    // Act
    const event = onlyEvent(handle(JSON.stringify(order), 'orders/create'));
    // Assess: the order goes through as before; its refunds keep the adapter's rules.
    expect(event).toMatchObject({ type: 'OrderPlaced', amount: 34_034 });
    expect(event).not.toHaveProperty('basis', expect.anything());
  });

  it('maps a refund whose line id the event cannot carry with the adapter’s amount and no lines', () => {
    // Prepare
    const refund = sampleJson(REFUND_TWO_LINES);
    const items = refund['refund_line_items'] as { line_item_id: unknown; line_item?: unknown }[];
    items[0]!.line_item_id = '9'.repeat(300);
    delete items[0]!.line_item;
    // Act
    const event = onlyEvent(handle(JSON.stringify(refund), 'refunds/create'));
    // Assess
    expect(event).toMatchObject({ type: 'OrderRefunded', amount: 39_133 });
    expect(event).not.toHaveProperty('lines', expect.anything());
  });

  it.each([
    ['a click id over 256 characters', { name: 'aecid', value: 'a'.repeat(300) }],
    ['a click id holding a control character (\\u0001)', { name: '_aecid', value: 'abc\u0001def' }],
    ['a tracking id that is not one', { name: 'affiliate_tracking_id', value: 'abc' }],
    ['a subid over 256 characters', { name: 'subid', value: 's'.repeat(300) }],
  ])(
    'places the order whose cart attribute has %s, without that value, reporting its field',
    (_case, junk) => {
      // Prepare: cart attributes (note_attributes) are the buyer's to write: the storefront's AJAX
      // cart (/cart/update.js) takes any, and themes copy the URL's aecid or a cookie into one
      // unchecked. A 400 would lose the order (Shopify resends the same body, then drops it) and,
      // repeated, get the shop's webhook subscription deleted.
      const order = sampleJson(ORDER);
      (order['note_attributes'] as unknown[]).push(junk);
      // Act
      const result = handle(JSON.stringify(order), 'orders/create');
      // Assess: the documentation order; the field is reported, never the value
      const event = onlyEvent(result);
      expect(event).toMatchObject({
        type: 'OrderPlaced',
        externalId: '450789469',
        amount: 58_700,
        clickIds: [],
      });
      expect(event).not.toHaveProperty('affiliateTrackingId', expect.anything());
      expect(event).not.toHaveProperty('subId', expect.anything());
      expect(result).toMatchObject({ skippedFields: ['note_attributes.2.value'] });
    },
  );

  it('still takes the valid cart attributes next to invalid ones, before the landing_site query', () => {
    // Prepare
    const order = sampleJson(ORDER);
    order['note_attributes'] = [
      { name: 'aecid', value: 'a'.repeat(300) },
      { name: '_aecid', value: 'abc\u0001def, aaaaaaaaaaaaaaaaaaaaaaaa' },
      { name: 'affiliate_tracking_id', value: 'abc' },
      { name: 'affiliate_tracking_id', value: '4711' },
      { name: 'subid', value: '\u0001' },
      { name: 'subid', value: 'newsletter' },
    ];
    order['landing_site'] = '/?aecid=bbbbbbbbbbbbbbbbbbbbbbbb&affiliate_tracking_id=1002&subid=other';
    // Act
    const result = handle(JSON.stringify(order), 'orders/create');
    // Assess
    expect(onlyEvent(result)).toMatchObject({
      clickIds: ['aaaaaaaaaaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbbbbbbbbbb'],
      affiliateTrackingId: 4711,
      subId: 'newsletter',
    });
    expect(result).toMatchObject({
      skippedFields: [
        'note_attributes.0.value',
        'note_attributes.1.value',
        'note_attributes.2.value',
        'note_attributes.4.value',
      ],
    });
  });

  it('ignores a tracking id in the buyer-written landing_site query that is not one', () => {
    // Prepare: a visitor arrived on /?affiliate_tracking_id=AF1001 (a tracking code with its
    // prefix, or junk a link or bot appends). A 400 would lose the order: Shopify resends the same
    // body and then drops it.
    const junk = { ...sampleJson(ORDER), landing_site: '/?affiliate_tracking_id=AF1001' };
    const junkThenValid = {
      ...sampleJson(ORDER),
      landing_site: '/?affiliate_tracking_id=AF1001&affiliate_tracking_id=1002',
    };
    // Act
    const ignored = handle(JSON.stringify(junk), 'orders/create');
    const valid = onlyEvent(handle(JSON.stringify(junkThenValid), 'orders/create'));
    // Assess
    expect(onlyEvent(ignored)).toMatchObject({ type: 'OrderPlaced', externalId: '450789469' });
    expect(onlyEvent(ignored)).not.toHaveProperty('affiliateTrackingId');
    expect(ignored).toMatchObject({ skippedFields: ['landing_site'] });
    expect(valid).toMatchObject({ affiliateTrackingId: 1002 });
  });

  it.each([
    ['a click id over 256 characters', `/products/x?aecid=${'a'.repeat(300)}`],
    ['a click id holding a control character (%01)', '/products/x?aecid=%01'],
    ['a subid over 256 characters', `/products/x?subid=${'s'.repeat(300)}`],
    ['a subid holding a control character (%1F)', '/products/x?subid=blog%1Fpost'],
  ])('places the order whose buyer-written landing_site query has %s, without that value', (_case, url) => {
    // Prepare: a visitor (or a bot) arrived on a URL the event could not carry a value of. A 400
    // would lose the order: Shopify resends the same body and then drops it.
    const order = { ...sampleJson(ORDER), landing_site: url };
    // Act
    const event = onlyEvent(handle(JSON.stringify(order), 'orders/create'));
    // Assess: the documentation order, with the hint skipped
    expect(event).toMatchObject({
      type: 'OrderPlaced',
      externalId: '450789469',
      amount: 58_700,
      clickIds: [],
    });
    expect(event).not.toHaveProperty('subId', expect.anything());
  });

  it('still takes the valid click ids and subId of a landing_site query that also holds junk', () => {
    // Prepare
    const order = {
      ...sampleJson(ORDER),
      landing_site: `/?aecid=${'a'.repeat(300)},aaaaaaaaaaaaaaaaaaaaaaaa&subid=%01&subid=newsletter`,
    };
    // Act
    const event = onlyEvent(handle(JSON.stringify(order), 'orders/create'));
    // Assess
    expect(event).toMatchObject({ clickIds: ['aaaaaaaaaaaaaaaaaaaaaaaa'], subId: 'newsletter' });
  });

  it('skips a buyer IP the event schema refuses (IPv6 zone id) and uses the next candidate', () => {
    // Prepare: node's isIP accepts `fe80::1%eth0`, the event schema does not
    const order = {
      ...sampleJson(ORDER),
      browser_ip: 'fe80::1%eth0',
      client_details: { browser_ip: '203.0.113.7' },
    };
    // Act
    const event = onlyEvent(handle(JSON.stringify(order), 'orders/create'));
    // Assess
    expect(event).toMatchObject({ buyerIp: '203.0.113.7', amount: 58700 });
  });

  it('rejects a price × quantity past Number.MAX_SAFE_INTEGER minor units, naming the price', () => {
    // Prepare: 50 000 000 000 000.00 alone is a valid amount (5e15 minor units < 2^53); × 2 is not
    const order = sampleJson(ORDER);
    const line = (order['line_items'] as Array<Record<string, unknown>>)[0]!;
    line['price_set'] = { shop_money: { amount: '50000000000000.00', currency_code: 'USD' } };
    line['quantity'] = 2;
    // Act
    const error = thrown(() => handle(JSON.stringify(order), 'orders/create'));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('line_items.0.price_set.shop_money.amount');
  });

  it('falls back to subtotal_price on payloads without discount_allocations (legacy shape)', () => {
    // Prepare: the legacy fixture is wrapped in {"order": …}; a webhook body is the order itself
    const order = sampleJson('shopify/order_legacy_fixture_wrapped.json')['order'];
    // Act
    const event = onlyEvent(handle(JSON.stringify(order), 'orders/create'));
    // Assess: subtotal_price 398.00, taxes excluded; `gateway` names the payment; browser_ip is
    // null, so the IP comes from client_details
    expect(event).toMatchObject({
      externalId: '450789469',
      amount: 39800,
      paymentMethod: 'authorize_net',
      buyerIp: '0.0.0.0',
    });
  });

  it('names the failing field of a bad body', () => {
    // Prepare
    const order = sampleJson(ORDER);
    const lines = order['line_items'] as Array<Record<string, unknown>>;
    delete lines[1]!['price_set'];
    lines[1]!['price'] = '199.001';
    const noCurrency = sampleJson(ORDER);
    delete noCurrency['currency'];
    // Act
    const price = thrown(() => handle(JSON.stringify(order), 'orders/create'));
    const currency = thrown(() => handle(JSON.stringify(noCurrency), 'orders/create'));
    const json = thrown(() => handle('{"id":', 'orders/create'));
    // Assess
    expect(price).toBeInstanceOf(BadInputError);
    expect(price.field).toBe('line_items.1.price');
    expect(currency.field).toBe('currency');
    expect(json.field).toBe('body');
  });

  it('uses x-shopify-webhook-id, then a hash of the body, when the event id header is absent', () => {
    // Prepare
    const raw = sampleRaw(ORDER);
    const withWebhookId = delivery(raw, 'orders/create', { 'x-shopify-webhook-id': 'wh-1' });
    const bare = delivery(raw, 'orders/create');
    delete (withWebhookId.headers as Record<string, string | undefined>)['x-shopify-event-id'];
    delete (bare.headers as Record<string, string | undefined>)['x-shopify-event-id'];
    // Act
    const first = onlyEvent(shopifyAdapter.handle(withWebhookId, context));
    const second = onlyEvent(shopifyAdapter.handle(bare, context));
    const again = onlyEvent(shopifyAdapter.handle(bare, context));
    // Assess
    expect(first.eventId).toBe('wh-1');
    expect(second.eventId).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(again.eventId).toBe(second.eventId);
  });

  it('acts on the configured order topic only', () => {
    // Prepare
    const raw = sampleRaw(ORDER);
    const paidSource = contextOf(sourceOf('shopify', { orderTopic: 'orders/paid' }));
    // Act
    const paidByDefault = handle(raw, 'orders/paid');
    const createWhenPaid = shopifyAdapter.handle(delivery(raw, 'orders/create'), paidSource);
    const paidWhenPaid = shopifyAdapter.handle(delivery(raw, 'orders/paid'), paidSource);
    // Assess
    expect(paidByDefault).toEqual({ kind: 'ignored', reason: expect.stringContaining('orders/paid') });
    expect(createWhenPaid.kind).toBe('ignored');
    expect(onlyEvent(paidWhenPaid).type).toBe('OrderPlaced');
  });

  it('ignores other topics, but only after checking the signature', () => {
    // Prepare
    const body = Buffer.from('not even json');
    const unsigned = request(body, { 'x-shopify-topic': 'products/update', 'x-shopify-hmac-sha256': 'AAAA' });
    // Act
    const ignored = handle(body, 'products/update');
    const rejected = thrown(() => shopifyAdapter.handle(unsigned, context));
    // Assess
    expect(ignored).toEqual({ kind: 'ignored', reason: 'topic products/update is not handled' });
    expect(rejected).toBeInstanceOf(UnauthorizedError);
  });

  it('rejects a missing topic header', () => {
    // Prepare
    const req = delivery(sampleRaw(ORDER), 'x');
    delete (req.headers as Record<string, string | undefined>)['x-shopify-topic'];
    // Act
    const error = thrown(() => shopifyAdapter.handle(req, context));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('x-shopify-topic');
  });

  it('maps orders/cancelled to OrderCancelled', () => {
    // Prepare
    const raw = sampleRaw('shopify/order_cancelled_2026-07_docs_example.json');
    // Act
    const event = onlyEvent(handle(raw, 'orders/cancelled'));
    // Assess
    expect(event).toEqual({
      type: 'OrderCancelled',
      eventId: 'e8c1a2f4-0000-4000-8000-000000000001',
      source: 'shopify-shop',
      platform: 'shopify',
      externalId: '450789469',
      receivedAt: NOW.toISOString(),
      reason: 'other',
    });
  });

  it('keeps a cancellation whose cancel_reason holds a control character, dropping the character', () => {
    // Prepare
    const order = {
      ...sampleJson('shopify/order_cancelled_2026-07_docs_example.json'),
      cancel_reason: 'oth\u0000er',
    };
    // Act
    const event = onlyEvent(handle(JSON.stringify(order), 'orders/cancelled'));
    // Assess
    expect(event).toMatchObject({ type: 'OrderCancelled', externalId: '450789469', reason: 'other' });
  });

  it('keeps a cancellation whose long cancel_reason would be cut inside an emoji, cutting before it', () => {
    // Prepare: 499 characters, then an emoji across the 500-character limit
    const reason = `${'x'.repeat(499)}😀 and more`;
    const order = {
      ...sampleJson('shopify/order_cancelled_2026-07_docs_example.json'),
      cancel_reason: reason,
    };
    // Act
    const event = onlyEvent(handle(JSON.stringify(order), 'orders/cancelled'));
    // Assess
    expect(event).toMatchObject({ type: 'OrderCancelled', reason: 'x'.repeat(499) });
  });
});

describe('shopify refunds', () => {
  it('maps the documentation refund (one line)', () => {
    // Prepare
    const raw = sampleRaw(REFUND);
    // Act
    const event = onlyEvent(handle(raw, 'refunds/create'));
    // Assess: the sample's only refund line has subtotal 0.00 and total_tax 0.00 (its transaction
    // of 41.94 is money, not the commission base, and is not used for the amount).
    expect(event).toEqual({
      type: 'OrderRefunded',
      eventId: 'e8c1a2f4-0000-4000-8000-000000000001',
      source: 'shopify-shop',
      platform: 'shopify',
      externalId: '450789469',
      receivedAt: NOW.toISOString(),
      refundId: '929361472',
      amount: 0,
      currency: 'USD',
      full: false,
      reason: 'wrong size',
      origin: 'shop',
      // Passed through for the worker, which turns them net against the order's recorded lines.
      lines: [{ id: '518995019', quantity: 1, amount: 0, tax: 0 }],
    });
  });

  it('sums a two-line refund from refund_line_items, not from transactions', () => {
    // Prepare
    const raw = sampleRaw(REFUND_TWO_LINES);
    // Act
    const event = onlyEvent(handle(raw, 'refunds/create'));
    // Assess. By hand: subtotals 195.66 + 195.67 = 391.33 USD; total_tax 3.98 + 3.98 = 7.96; the
    // transaction (209.00) equals neither 391.33 nor 399.29, so the subtotals are taken as net.
    expect(event).toMatchObject({
      externalId: '450789469',
      refundId: '509562969',
      amount: 39133,
      currency: 'USD',
      reason: 'it broke during shipping',
    });
  });

  it('keeps a refund whose long note would be cut inside an emoji, cutting before it', () => {
    // Prepare: 499 characters, then an emoji across the 500-character limit (a cut there would
    // leave half of it, which the event refuses: the refund would never be counted)
    const refund = {
      ...sampleJson(REFUND_TWO_LINES),
      note: `${'x'.repeat(499)}😀 customer returned both items`,
    };
    // Act
    const event = onlyEvent(handle(JSON.stringify(refund), 'refunds/create'));
    // Assess: the amount of the sample, the note cut before the emoji
    expect(event).toMatchObject({
      type: 'OrderRefunded',
      refundId: '509562969',
      amount: 39_133,
      reason: 'x'.repeat(499),
    });
  });

  it('keeps a refund whose note holds control characters, dropping them but not its line breaks', () => {
    // Prepare
    const refund = { ...sampleJson(REFUND_TWO_LINES), note: 'broke\u0001 in\ttransit\r\nsee photos\u007f' };
    const onlyControls = { ...sampleJson(REFUND_TWO_LINES), note: '\u0000\u0007' };
    // Act
    const event = onlyEvent(handle(JSON.stringify(refund), 'refunds/create'));
    const noReason = onlyEvent(handle(JSON.stringify(onlyControls), 'refunds/create'));
    // Assess
    expect(event).toMatchObject({
      refundId: '509562969',
      amount: 39_133,
      reason: 'broke in\ttransit\r\nsee photos',
    });
    expect(noReason).toMatchObject({ refundId: '509562969', amount: 39_133 });
    expect(noReason).not.toHaveProperty('reason', expect.anything());
  });

  it('subtracts the tax when the transaction, in the presentment currency, shows it was inside the subtotals', () => {
    // Prepare: shop EUR, buyer USD; the refund transaction is in USD, as Shopify writes it for a
    // multi-currency order (it must be in the presentment currency)
    const raw = sampleRaw('shopify/refund_taxes_included_bigids.json');
    // Act
    const event = onlyEvent(handle(raw, 'refunds/create'));
    // Assess. By hand: one mug at 119.00 − 11.90 (its share of the discount) = 107.10 EUR including
    // 17.10 VAT; the transaction is 116.10 USD = Σ presentment subtotal (not + 18.54 tax), so the
    // VAT was inside → 107.10 − 17.10 = 90.00 EUR, in shop money.
    expect(event).toMatchObject({
      externalId: '5787612545068000001',
      refundId: '1234567890123456789',
      amount: 9000,
      currency: 'EUR',
    });
  });

  it('compares a transaction in the shop currency with the shop-money subtotals (single currency)', () => {
    // Prepare: the same refund from a shop that sells in EUR only
    const refund = JSON.parse(sampleRaw('shopify/refund_taxes_included_bigids.json').toString()) as {
      refund_line_items: Array<Record<string, Record<string, unknown>>>;
      transactions: Array<Record<string, unknown>>;
    };
    const line = refund.refund_line_items[0]!;
    line['subtotal_set'] = {
      ...line['subtotal_set'],
      presentment_money: line['subtotal_set']!['shop_money'],
    };
    line['total_tax_set'] = {
      ...line['total_tax_set'],
      presentment_money: line['total_tax_set']!['shop_money'],
    };
    const taxInside = {
      ...refund,
      transactions: [{ ...refund.transactions[0], amount: '107.10', currency: 'EUR' }],
    };
    const taxOnTop = {
      ...refund,
      transactions: [{ ...refund.transactions[0], amount: '124.20', currency: 'EUR' }],
    };
    // Act
    const inside = onlyEvent(handle(JSON.stringify(taxInside), 'refunds/create'));
    const onTop = onlyEvent(handle(JSON.stringify(taxOnTop), 'refunds/create'));
    // Assess: 107.10 = Σ subtotal → 90.00 net; 124.20 = Σ subtotal + Σ tax → the subtotal is net
    expect(inside).toMatchObject({ amount: 9000, currency: 'EUR' });
    expect(onTop).toMatchObject({ amount: 10710, currency: 'EUR' });
  });

  it('takes the subtotals as net when the transaction also refunds shipping (documented limit)', () => {
    // Prepare: the same refund with the shipping (6.45 USD, 5.95 EUR) paid back in the same transaction
    const [head, tail] = sampleRaw('shopify/refund_taxes_included_bigids.json')
      .toString()
      .split('"transactions"');
    const raw = `${head}"transactions"${tail!.replace('"amount": "116.10"', '"amount": "122.55"')}`;
    // Act
    const event = onlyEvent(handle(raw, 'refunds/create'));
    // Assess
    expect(event).toMatchObject({ amount: 10710, currency: 'EUR' });
  });

  it('derives subtotals from the line items on legacy refunds without subtotal fields', () => {
    // Prepare
    const refund = sampleJson('shopify/refund_legacy_fixture_wrapped.json')['refund'];
    // Act
    const event = onlyEvent(handle(JSON.stringify(refund), 'refunds/create'));
    // Assess: 2 lines × 199.00, no discount; currency only on the transaction (USD)
    expect(event).toMatchObject({
      externalId: '450789469',
      refundId: '509562969',
      amount: 39800,
      currency: 'USD',
    });
  });

  it('ignores a refund without refund line items (shipping or amount only)', () => {
    // Prepare
    const refund = sampleJson(REFUND);
    refund['refund_line_items'] = [];
    // Act
    const result = handle(JSON.stringify(refund), 'refunds/create');
    // Assess
    expect(result.kind).toBe('ignored');
  });
});

describe('shopify: a body signed for one topic is not acted on under another', () => {
  // X-Shopify-Topic is not covered by the HMAC: whoever holds one signed delivery can resend its
  // exact bytes under any topic. Each topic's schema asks for what only its own payload has.
  const CANCELLED = 'shopify/order_cancelled_2026-07_docs_example.json';

  it('refuses an order resent as orders/cancelled, naming cancelled_at', () => {
    // Act
    const error = thrown(() => handle(sampleRaw(ORDER), 'orders/cancelled'));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('cancelled_at');
  });

  it('refuses a refund resent as orders/cancelled, naming order_id', () => {
    // Act
    const error = thrown(() => handle(sampleRaw(REFUND), 'orders/cancelled'));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('order_id');
  });

  it('refuses a cancelled order resent as the order topic, naming cancelled_at', () => {
    // Prepare
    const paid = contextOf(sourceOf('shopify', { orderTopic: 'orders/paid' }));
    // Act
    const created = thrown(() => handle(sampleRaw(CANCELLED), 'orders/create'));
    const paidTopic = thrown(() =>
      shopifyAdapter.handle(delivery(sampleRaw(CANCELLED), 'orders/paid'), paid),
    );
    // Assess
    expect(created).toBeInstanceOf(BadInputError);
    expect(created.field).toBe('cancelled_at');
    expect(paidTopic.field).toBe('cancelled_at');
  });

  it('refuses a refund resent as orders/create, naming order_id', () => {
    // Act
    const error = thrown(() => handle(sampleRaw(REFUND_TWO_LINES), 'orders/create'));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('order_id');
  });

  it('refuses an order or a cancellation resent as refunds/create, naming order_id', () => {
    // Act
    const order = thrown(() => handle(sampleRaw(ORDER), 'refunds/create'));
    const cancelled = thrown(() => handle(sampleRaw(CANCELLED), 'refunds/create'));
    // Assess
    expect(order).toBeInstanceOf(BadInputError);
    expect(order.field).toBe('order_id');
    expect(cancelled.field).toBe('order_id');
  });

  it('refuses a refunds/create body without refund_line_items, which every refund payload has', () => {
    // Prepare: a body with an order_id but none of a refund's lines
    const refund = sampleJson(REFUND);
    delete refund['refund_line_items'];
    // Act
    const error = thrown(() => handle(JSON.stringify(refund), 'refunds/create'));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('refund_line_items');
  });

  it('still maps each sample under its own topic', () => {
    // Act
    const placed = onlyEvent(handle(sampleRaw(ORDER), 'orders/create'));
    const cancelled = onlyEvent(handle(sampleRaw(CANCELLED), 'orders/cancelled'));
    const refunded = onlyEvent(handle(sampleRaw(REFUND), 'refunds/create'));
    // Assess
    expect([placed.type, cancelled.type, refunded.type]).toEqual([
      'OrderPlaced',
      'OrderCancelled',
      'OrderRefunded',
    ]);
  });
});

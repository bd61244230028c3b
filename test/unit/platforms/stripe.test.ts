import { describe, expect, it } from 'vitest';
import { BadInputError, UnauthorizedError } from '../../../shared/errors.ts';
import { stripeAdapter } from '../../../shared/platforms/stripe.ts';
import {
  contextOf,
  eventsOf,
  hexHmac,
  NOW,
  NOW_S,
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

const PI = 'pi_1PgafyB7WZ01zgkWSjxsAJo3';

/** A real event: the fixture envelope with `type` and `data.object` set, as the SOURCES note says. */
function envelope(type: string, object: Record<string, unknown>, id = 'evt_1Pgc76B7WZ01zgkWwyRHS12y') {
  return JSON.stringify({
    ...sampleJson('stripe/event_envelope_stripe_mock_fixture.json'),
    id,
    type,
    data: { object },
  });
}

const { context, delivery, handle } = signedDeliveries(stripeAdapter, (body, t: number = NOW_S) => ({
  'stripe-signature': `t=${t},v1=${hexHmac(SECRET, `${t}.`, body)}`,
}));

/** The fixture session (unpaid, amounts null) turned into a paid one. */
function paidSession(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    ...sampleJson('stripe/checkout_session_object_stripe_mock_fixture.json'),
    payment_status: 'paid',
    status: 'complete',
    currency: 'eur',
    amount_subtotal: 10000,
    amount_total: 12400,
    total_details: { amount_discount: 0, amount_shipping: 500, amount_tax: 1900 },
    customer: 'cus_QXg1',
    metadata: {
      aecid: '0123456789abcdef01234567',
      subid: 'spring',
      buyer_ip: '203.0.113.50',
      voucher: 'SPRING10',
    },
    ...overrides,
  };
}

function refundObject(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...sampleJson('stripe/refund_object_stripe_mock_fixture.json'), ...overrides };
}

describe('stripe signature and envelope', () => {
  it('verifies the signature vector and ignores its plan.created event', () => {
    // Prepare
    const vector = signatureVector('stripe');
    const req = request(sampleRaw(vector.body_file), { 'stripe-signature': vector.value });
    const now = new Date((vector.timestamp! + 10) * 1000);
    // Act
    const result = stripeAdapter.handle(
      req,
      contextOf(sourceOf('stripe'), ['whsec_old', vector.secret], now),
    );
    // Assess
    expect(result).toEqual({ kind: 'ignored', reason: 'event type plan.created is not handled' });
  });

  it('rejects a stale signature, within the source tolerance only', () => {
    // Prepare
    const body = envelope('checkout.session.completed', paidSession());
    const req = delivery(body, NOW_S - 400);
    const lenient = contextOf(sourceOf('stripe', { toleranceSeconds: 600 }));
    // Act / Assess
    expect(thrown(() => stripeAdapter.handle(req, context))).toBeInstanceOf(UnauthorizedError);
    expect(onlyEvent(stripeAdapter.handle(req, lenient)).type).toBe('OrderPlaced');
  });

  it('names the missing part of a bad envelope', () => {
    // Prepare
    const body = JSON.stringify({ id: 'evt_1', type: 'refund.created' });
    // Act
    const error = thrown(() => handle(body));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('data');
  });
});

describe('stripe checkout sessions', () => {
  it('keeps the session’s line items with tax for refunds, and none without tax or when they do not add up', () => {
    // Prepare: 12400 = 10000 net + 1900 tax + 500 shipping, in two items.
    const items = (data: unknown[], hasMore = false) => ({ object: 'list', has_more: hasMore, data });
    const taxed = [
      { id: 'li_A', quantity: 2, amount_total: 9520, amount_tax: 1520 },
      { id: 'li_B', quantity: 1, amount_total: 2380, amount_tax: 380 },
    ];
    const event = (lineItems: unknown, overrides: Record<string, unknown> = {}) =>
      onlyEvent(
        handle(envelope('checkout.session.completed', paidSession({ line_items: lineItems, ...overrides }))),
      );
    // Act / Assess
    expect(event(items(taxed))).toMatchObject({
      amount: 10000,
      basis: {
        taxesIncluded: false,
        net: 10000,
        tax: 1900,
        shipping: 500,
        lines: [
          { id: 'li_A', net: 8000, tax: 1520, quantity: 2 },
          { id: 'li_B', net: 2000, tax: 380, quantity: 1 },
        ],
      },
    });
    const untaxed = { amount_total: 10500, total_details: { amount_shipping: 500, amount_tax: 0 } };
    const noTax = taxed.map((l) => ({ ...l, amount_total: l.amount_total - l.amount_tax, amount_tax: 0 }));
    expect(event(items(noTax), untaxed)).not.toHaveProperty('basis', expect.anything());
    expect(event(items(taxed, true))).not.toHaveProperty('basis', expect.anything());
    expect(event(items(taxed.slice(0, 1)))).not.toHaveProperty('basis', expect.anything());
    // Read for refunds only: a shape it cannot read leaves the order as it was, not a 400.
    expect(event({ data: 'junk' })).toMatchObject({ type: 'OrderPlaced', amount: 10000 });
  });

  it('ignores the fixture session, which is unpaid (the async event follows)', () => {
    // Prepare
    const object = sampleJson('stripe/checkout_session_object_stripe_mock_fixture.json');
    // Act
    const result = handle(envelope('checkout.session.completed', object));
    // Assess
    expect(result).toEqual({ kind: 'ignored', reason: expect.stringContaining('payment_status unpaid') });
  });

  it('maps a paid session: total minus tax and shipping, keyed by the PaymentIntent', () => {
    // Prepare
    const body = envelope('checkout.session.completed', paidSession());
    // Act
    const event = onlyEvent(handle(body));
    // Assess: 124.00 − 19.00 tax − 5.00 shipping = 100.00 EUR
    expect(event).toEqual({
      type: 'OrderPlaced',
      eventId: 'evt_1Pgc76B7WZ01zgkWwyRHS12y',
      source: 'stripe-shop',
      platform: 'stripe',
      externalId: PI,
      receivedAt: NOW.toISOString(),
      amount: 10000,
      currency: 'EUR',
      customerId: 'cus_QXg1',
      vouchers: ['SPRING10'],
      clickIds: ['0123456789abcdef01234567'],
      subId: 'spring',
      buyerIp: '203.0.113.50',
      productIds: [],
      paymentMethod: 'card',
      orderDate: '2009-02-13T23:31:30.000Z',
    });
  });

  it('prefers metadata.order_id, and falls back to the session id without a PaymentIntent', () => {
    // Prepare
    const withOrderId = paidSession({ metadata: { order_id: 'A-1001', affiliate_tracking_id: '12' } });
    const withoutIntent = paidSession({ payment_intent: null, metadata: {} });
    // Act
    const first = onlyEvent(handle(envelope('checkout.session.completed', withOrderId)));
    const second = onlyEvent(handle(envelope('checkout.session.completed', withoutIntent)));
    // Assess
    expect(first).toMatchObject({ externalId: 'A-1001', affiliateTrackingId: 12, clickIds: [] });
    expect(second).toMatchObject({
      externalId: 'cs_test_a1YS1URlnyQCN5fUUduORoQ7Pw41PJqDWkIVQCpJPqkfIhd6tVY8XB1OLY',
    });
  });

  it.each([
    ['a click id over 256 characters', { _aecid: 'a'.repeat(300) }],
    ['a click id holding a control character (\\u0001)', { _aecid: 'abc\u0001def' }],
    ['a tracking id that is not one', { affiliate_tracking_id: 'abc' }],
    ['a subid over 256 characters', { SubId: 's'.repeat(300) }],
  ])('places the session whose metadata has %s, without that value, reporting its field', (_case, junk) => {
    // Prepare: shops copy the URL's aecid or a cookie, which the buyer controls, into the session's
    // metadata unchecked. A 400 would lose the order: Stripe resends the same event, then drops it.
    const session = paidSession({ metadata: { ...(paidSession()['metadata'] as object), ...junk } });
    // Act
    const result = handle(envelope('checkout.session.completed', session));
    // Assess: the valid metadata next to it is still taken; the field is reported, never the value
    const event = onlyEvent(result);
    expect(event).toMatchObject({
      type: 'OrderPlaced',
      externalId: PI,
      amount: 10000,
      clickIds: ['0123456789abcdef01234567'],
      subId: 'spring',
      buyerIp: '203.0.113.50',
    });
    expect(event).not.toHaveProperty('affiliateTrackingId', expect.anything());
    const [name] = Object.keys(junk);
    expect(result).toMatchObject({ skippedFields: [`data.object.metadata.${name}`] });
  });

  it('takes a valid tracking id in metadata after an invalid one', () => {
    // Prepare
    const session = paidSession({
      metadata: { affiliate_tracking_id: 'AF1001', _affiliate_tracking_id: '1001' },
    });
    // Act
    const result = handle(envelope('checkout.session.completed', session));
    // Assess
    expect(onlyEvent(result)).toMatchObject({ affiliateTrackingId: 1001, clickIds: [] });
    expect(result).toMatchObject({ skippedFields: ['data.object.metadata.affiliate_tracking_id'] });
  });

  it('maps async_payment_succeeded, no_payment_required and JPY sessions', () => {
    // Prepare
    const asyncPaid = paidSession({ payment_status: 'paid' });
    const free = paidSession({ payment_status: 'no_payment_required', amount_total: 0, total_details: null });
    const yen = paidSession({ currency: 'jpy', amount_total: 5000, total_details: { amount_tax: 455 } });
    // Act
    const a = onlyEvent(handle(envelope('checkout.session.async_payment_succeeded', asyncPaid)));
    const f = onlyEvent(handle(envelope('checkout.session.completed', free)));
    const y = onlyEvent(handle(envelope('checkout.session.completed', yen)));
    // Assess: Stripe amounts are already minor units (JPY has none)
    expect(a).toMatchObject({ type: 'OrderPlaced', amount: 10000 });
    expect(f).toMatchObject({ amount: 0 });
    expect(y).toMatchObject({ amount: 4545, currency: 'JPY' });
  });

  it('converts the currencies whose Stripe unit is not the ISO 4217 minor unit (ISK, MGA), not UGX', () => {
    // Prepare: Stripe keeps ISK two-decimal for backwards compatibility (5 000 kr is 500000) though
    // ISO 4217 gives it no decimals; MGA is zero-decimal at Stripe, 2 in ISO; UGX is zero-decimal
    // in both (on Stripe's zero-decimal list), so 37 000 USh is 37000.
    const untaxed = { amount_discount: 0, amount_shipping: 0, amount_tax: 0 };
    const session = (currency: string, amount: number) =>
      paidSession({ currency, amount_total: amount, total_details: untaxed, metadata: {} });
    // Act
    const [isk, ugx, mga] = [session('isk', 500000), session('ugx', 37000), session('mga', 25000)].map((s) =>
      onlyEvent(handle(envelope('checkout.session.completed', s))),
    );
    const refund = onlyEvent(
      handle(
        envelope('refund.created', refundObject({ payment_intent: PI, currency: 'isk', amount: 150000 })),
      ),
    );
    // Assess: in minor units of ISO 4217, as currencyExponent and the platform read them
    expect(isk).toMatchObject({ currency: 'ISK', amount: 5000 });
    expect(ugx).toMatchObject({ currency: 'UGX', amount: 37000 });
    expect(mga).toMatchObject({ currency: 'MGA', amount: 2500000 });
    expect(refund).toMatchObject({ currency: 'ISK', amount: 1500 });
  });

  it('rejects a paid session without amount_total, naming it', () => {
    // Prepare
    const body = envelope('checkout.session.completed', paidSession({ amount_total: null }));
    // Act
    const error = thrown(() => handle(body));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('data.object.amount_total');
  });
});

describe('stripe refunds', () => {
  it('ignores the fixture refund: no PaymentIntent, so no Checkout order to match', () => {
    // Act
    const result = handle(envelope('refund.created', refundObject()));
    // Assess
    expect(result.kind).toBe('ignored');
  });

  it('maps refund.created to OrderRefunded keyed like the checkout (taken as given, tax included)', () => {
    // Prepare
    const byIntent = refundObject({ payment_intent: PI, reason: 'requested_by_customer' });
    const byOrderId = refundObject({ payment_intent: PI, metadata: { order_id: 'A-1001' } });
    // Act
    const first = onlyEvent(handle(envelope('refund.created', byIntent)));
    const second = onlyEvent(handle(envelope('refund.created', byOrderId)));
    // Assess
    expect(first).toEqual({
      type: 'OrderRefunded',
      eventId: 'evt_1Pgc76B7WZ01zgkWwyRHS12y',
      source: 'stripe-shop',
      platform: 'stripe',
      externalId: PI,
      receivedAt: NOW.toISOString(),
      refundId: 're_1Pgc72B7WZ01zgkWqPvrRrPE',
      amount: 100,
      // For the worker: turned net when it holds the session's lines with tax (issue 19).
      gross: 100,
      currency: 'USD',
      full: false,
      reason: 'requested_by_customer',
      origin: 'shop',
    });
    expect(second).toMatchObject({ externalId: 'A-1001' });
  });

  it('ignores a failed refund', () => {
    // Act
    const result = handle(envelope('refund.created', refundObject({ payment_intent: PI, status: 'failed' })));
    // Assess
    expect(result.kind).toBe('ignored');
  });

  it('ignores the fixture charge.refunded, which lists no refunds and is not fully refunded', () => {
    // Act
    const result = handle(
      envelope('charge.refunded', sampleJson('stripe/charge_object_stripe_mock_fixture.json')),
    );
    // Assess
    expect(result.kind).toBe('ignored');
  });

  it('maps a wholly refunded charge to a full refund', () => {
    // Prepare
    const charge = {
      ...sampleJson('stripe/charge_object_stripe_mock_fixture.json'),
      payment_intent: PI,
      refunded: true,
      amount_refunded: 100,
    };
    // Act
    const event = onlyEvent(handle(envelope('charge.refunded', charge)));
    // Assess
    expect(event).toMatchObject({
      type: 'OrderRefunded',
      externalId: PI,
      refundId: 'connector:full:ch_1PgafuB7WZ01zgkWXYmPNZs8',
      full: true,
      currency: 'USD',
    });
    expect(event).not.toHaveProperty('amount');
  });

  it('keys a listed refund by the charge metadata.order_id before the PaymentIntent, as the full refund is', () => {
    // Prepare: the shop keys its orders by the order_id on the charge; the refund has none of its
    // own but carries its PaymentIntent, as every real refund does.
    const charge = {
      ...sampleJson('stripe/charge_object_stripe_mock_fixture.json'),
      payment_intent: PI,
      metadata: { order_id: 'A-1001' },
      refunded: false,
      amount_refunded: 30,
      refunds: {
        object: 'list',
        data: [refundObject({ id: 're_partial', amount: 30, payment_intent: PI, metadata: {} })],
        has_more: false,
      },
    };
    // Act
    const partial = onlyEvent(handle(envelope('charge.refunded', charge)));
    const full = onlyEvent(handle(envelope('charge.refunded', { ...charge, refunded: true }, 'evt_2')));
    // Assess: README "metadata.order_id (of the refund, or the charge) else payment_intent"
    expect(full).toMatchObject({ externalId: 'A-1001' });
    expect(partial).toMatchObject({ refundId: 're_partial', externalId: 'A-1001' });
  });

  it('maps a partly refunded charge to one refund per listed refund, with refund.created ids', () => {
    // Prepare
    const charge = sampleJson('stripe/charge_object_stripe_mock_fixture.json');
    const second = refundObject({ id: 're_second', amount: 30, payment_intent: PI });
    const failed = refundObject({ id: 're_failed', amount: 5, status: 'failed' });
    Object.assign(charge, {
      payment_intent: PI,
      amount_refunded: 130,
      refunds: {
        object: 'list',
        data: [refundObject({ payment_intent: PI }), second, failed],
        has_more: false,
      },
    });
    // Act
    const events = eventsOf(handle(envelope('charge.refunded', charge, 'evt_9')));
    // Assess
    expect(events).toEqual([
      expect.objectContaining({
        refundId: 're_1Pgc72B7WZ01zgkWqPvrRrPE',
        amount: 100,
        eventId: 'evt_9:re_1Pgc72B7WZ01zgkWqPvrRrPE',
      }),
      expect.objectContaining({
        refundId: 're_second',
        amount: 30,
        eventId: 'evt_9:re_second',
        externalId: PI,
      }),
    ]);
  });
});

describe('stripe: the object must be what the event type says', () => {
  // The type is inside the signed body, but the adapter read only the fields it needed: a charge
  // has a refund's id, amount, currency and PaymentIntent, so it passed as one.
  const charge = () => ({
    ...sampleJson('stripe/charge_object_stripe_mock_fixture.json'),
    payment_intent: PI,
  });

  it('refuses refund.created whose object is a charge, naming data.object.object', () => {
    // Act
    const error = thrown(() => handle(envelope('refund.created', charge())));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('data.object.object');
  });

  it('refuses checkout.session.completed whose object is a charge, naming data.object.object', () => {
    // Act
    const completed = thrown(() => handle(envelope('checkout.session.completed', charge())));
    const succeeded = thrown(() => handle(envelope('checkout.session.async_payment_succeeded', charge())));
    // Assess
    expect(completed).toBeInstanceOf(BadInputError);
    expect(completed.field).toBe('data.object.object');
    expect(succeeded.field).toBe('data.object.object');
  });

  it('refuses charge.refunded whose object is a refund or a session, naming data.object.object', () => {
    // Act
    const refund = thrown(() => handle(envelope('charge.refunded', refundObject({ payment_intent: PI }))));
    const session = thrown(() => handle(envelope('charge.refunded', { ...paidSession(), refunded: true })));
    // Assess
    expect(refund).toBeInstanceOf(BadInputError);
    expect(refund.field).toBe('data.object.object');
    expect(session.field).toBe('data.object.object');
  });
});

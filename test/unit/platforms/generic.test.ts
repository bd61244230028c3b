import { describe, expect, it } from 'vitest';
import { BadInputError, UnauthorizedError } from '../../../shared/errors.ts';
import { genericAdapter } from '../../../shared/platforms/generic.ts';
import { signGeneric } from '../../../shared/platforms/signature.ts';
import {
  contextOf,
  hexHmac,
  NOW,
  NOW_S,
  onlyEvent,
  request,
  SECRET,
  sampleRaw,
  signedDeliveries,
  sourceOf,
  thrown,
} from './support.ts';

const { context, delivery, handle } = signedDeliveries(genericAdapter, (body, t: number = NOW_S) => ({
  'x-connector-timestamp': String(t),
  'x-connector-signature': `sha256=${hexHmac(SECRET, `${t}.`, body)}`,
}));

function localJson(path: string): Record<string, unknown> {
  return JSON.parse(sampleRaw(path).toString());
}

describe('generic adapter', () => {
  it('maps an order, merging click ids from clickIds and attributes', () => {
    // Act
    const event = onlyEvent(handle(sampleRaw('generic/order.json')));
    // Assess
    expect(event).toEqual({
      type: 'OrderPlaced',
      eventId: 'order-100045-created',
      source: 'generic-shop',
      platform: 'generic',
      externalId: '100045',
      receivedAt: NOW.toISOString(),
      amount: 4990,
      currency: 'EUR',
      customerId: 'c-881',
      vouchers: ['SPRING10'],
      clickIds: ['0123456789abcdef01234567', 'abcdefabcdefabcdefabcdef'],
      buyerIp: '198.51.100.23',
      productIds: ['SKU-1', 'SKU-2'],
      paymentMethod: 'paypal',
      orderDate: '2026-05-04T11:20:31+02:00',
      subId: 'newsletter',
    });
  });

  it('maps a partial refund, a full refund and a cancellation', () => {
    // Prepare
    const full = { type: 'refund', orderId: 100045, refundId: 'all', full: true };
    // Act
    const partial = onlyEvent(handle(sampleRaw('generic/refund.json')));
    const whole = onlyEvent(handle(JSON.stringify(full)));
    const cancel = onlyEvent(handle(sampleRaw('generic/cancel.json')));
    // Assess
    expect(partial).toMatchObject({
      type: 'OrderRefunded',
      eventId: 'refund-100045-7',
      externalId: '100045',
      refundId: '7',
      amount: 1995,
      currency: 'EUR',
      full: false,
      reason: 'one item returned',
    });
    expect(whole).toMatchObject({ type: 'OrderRefunded', externalId: '100045', full: true });
    expect(whole).not.toHaveProperty('amount');
    expect(cancel).toMatchObject({ type: 'OrderCancelled', externalId: '100045', reason: 'payment failed' });
    expect(cancel.eventId).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it('reads amounts in the currency minor unit and big order ids exactly', () => {
    // Prepare
    const body =
      '{"type":"order","orderId":9007199254740993,"amount":"1000","currency":"JPY","affiliateTrackingId":"77"}';
    // Act
    const event = onlyEvent(handle(body));
    // Assess
    expect(event).toMatchObject({
      externalId: '9007199254740993',
      amount: 1000,
      currency: 'JPY',
      affiliateTrackingId: 77,
    });
  });

  it.each([
    [{ amount: 49.9 }, 'amount'],
    [{ amount: '4.99e1' }, 'amount'],
    [{ amount: '49.999' }, 'amount'],
    [{ currency: 'EURO' }, 'currency'],
    [{ orderId: '' }, 'orderId'],
    [{ type: 'shipment' }, 'type'],
    [{ buyerIp: 'localhost' }, 'buyerIp'],
    [{ affiliateTrackingId: 'AFF-1' }, 'affiliateTrackingId'],
    [{ orderDate: 'yesterday' }, 'orderDate'],
  ])('rejects %j naming %s', (change, field) => {
    // Prepare
    const body = JSON.stringify({ ...localJson('generic/order.json'), ...change });
    // Act
    const error = thrown(() => handle(body));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe(field);
  });

  it.each([
    ['a click id over 256 characters', { name: 'aecid', value: 'a'.repeat(300) }, 'clickIds.2'],
    [
      'a click id holding a control character (\\u0001)',
      { name: 'aecid', value: 'abc\u0001def' },
      'clickIds.2',
    ],
    ['a tracking id that is not one', { name: 'affiliate_tracking_id', value: 'abc' }, 'attributes.1.value'],
  ])('still rejects attributes with %s, naming the field', (_case, attribute, field) => {
    // Prepare: unlike a shop platform's attributes, the Generic body is the shop module's own
    // contract, and the module sees the 400 when it posts
    const order = localJson('generic/order.json');
    const body = JSON.stringify({
      ...order,
      attributes: [...(order['attributes'] as unknown[]), attribute],
    });
    // Act
    const error = thrown(() => handle(body));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe(field);
  });

  it.each(['2026-05-01T10:00:00', '2026-05-01T10:00:00.000', '2026-05-01T10:00', '2026-05-01'])(
    'refuses the orderDate %s, which has no offset, naming orderDate and asking for one',
    (orderDate) => {
      // Prepare
      const body = JSON.stringify({ ...localJson('generic/order.json'), orderDate });
      // Act
      const error = thrown(() => handle(body));
      // Assess
      expect(error).toBeInstanceOf(BadInputError);
      expect(error.field).toBe('orderDate');
      expect(error.message).toMatch(/^orderDate: .*offset such as Z or \+02:00/);
    },
  );

  it.each(['2026-05-01T10:00:00Z', '2026-05-01T10:00:00.123+02:00', '2026-05-01T10:00:00-05:00'])(
    'takes the orderDate %s, which carries its offset, as sent',
    (orderDate) => {
      // Prepare
      const body = JSON.stringify({ ...localJson('generic/order.json'), orderDate });
      // Act
      const event = onlyEvent(handle(body));
      // Assess
      expect(event).toMatchObject({ type: 'OrderPlaced', orderDate });
    },
  );

  it('requires an amount and currency on a partial refund', () => {
    // Prepare
    const body = JSON.stringify({ type: 'refund', orderId: '1', refundId: 'r1' });
    // Act
    const error = thrown(() => handle(body));
    // Assess
    expect(error.field).toBe('amount');
  });

  it("refuses a refund id in the connector's own namespace, naming refundId", () => {
    // Prepare
    const body = JSON.stringify({
      type: 'refund',
      orderId: '1',
      refundId: 'connector:cancellation',
      full: true,
    });
    // Act
    const error = thrown(() => handle(body));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('refundId');
    expect(error.message).toContain('reserved');
  });

  it('checks the signature first, with the timestamp tolerance', () => {
    // Prepare
    const raw = sampleRaw('generic/order.json');
    const stale = delivery(raw, NOW_S - 301);
    const rotated = request(raw, {
      'x-connector-timestamp': String(NOW_S),
      'x-connector-signature': signGeneric(raw, 'previous-secret', NOW_S),
    });
    // Act / Assess
    expect(thrown(() => genericAdapter.handle(stale, context))).toBeInstanceOf(UnauthorizedError);
    expect(thrown(() => genericAdapter.handle(rotated, context))).toBeInstanceOf(UnauthorizedError);
    expect(
      onlyEvent(genericAdapter.handle(rotated, contextOf(sourceOf('generic'), [SECRET, 'previous-secret'])))
        .type,
    ).toBe('OrderPlaced');
  });
});

describe('generic: a body whose fields belong to another type', () => {
  // `type` is signed with the body, but a module that sets the wrong type (a partial refund sent as
  // `cancel`) would refuse the whole conversion, which cannot be undone.

  it('refuses a refund sent as cancel, naming refundId', () => {
    // Prepare
    const body = JSON.stringify({ ...localJson('generic/refund.json'), type: 'cancel' });
    // Act
    const error = thrown(() => handle(body));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('refundId');
  });

  it('refuses an order sent as cancel, naming amount', () => {
    // Prepare
    const body = JSON.stringify({ ...localJson('generic/order.json'), type: 'cancel' });
    // Act
    const error = thrown(() => handle(body));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('amount');
  });

  it('refuses a refund sent as order, naming refundId', () => {
    // Prepare
    const body = JSON.stringify({ ...localJson('generic/refund.json'), type: 'order' });
    // Act
    const error = thrown(() => handle(body));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('refundId');
  });

  it('refuses an order sent as refund, naming refundId', () => {
    // Prepare
    const body = JSON.stringify({ ...localJson('generic/order.json'), type: 'refund' });
    // Act
    const error = thrown(() => handle(body));
    // Assess
    expect(error).toBeInstanceOf(BadInputError);
    expect(error.field).toBe('refundId');
  });
});

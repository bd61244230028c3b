import { describe, expect, it } from 'vitest';
import { FinanceRefundRequest } from '../../shared/finance.ts';
import { firstIssue } from '../../shared/validation.ts';
import { ADAPTERS, contextOf, request, sampleJson, sourceOf, thrown } from './platforms/support.ts';

/**
 * The schemas the webhook and refunds functions load are zod/mini, as the worker's are
 * (infra/bundle-report.ts); mini has no messages of its own. This file imports none of classic zod,
 * as those bundles do not: the 400 a shop or finance receives must still name the field with the
 * English message classic zod gave (the same wording before and after the move, 2026-11-27).
 */
describe('door schemas on zod/mini', () => {
  function shopifyOrder(line: Record<string, unknown>): Error {
    const order = sampleJson('shopify/order_2026-07_docs_example.json') as { line_items: object[] };
    order.line_items[0] = { ...order.line_items[0], ...line };
    const delivery = request(JSON.stringify(order), { 'x-shopify-topic': 'orders/create' });
    return thrown(() => ADAPTERS.shopify.map(delivery, contextOf(sourceOf('shopify'), [])));
  }

  it.each([
    [1.5, 'line_items.0.quantity: Invalid input: expected int, received number'],
    [-1, 'line_items.0.quantity: Too small: expected number to be >=0'],
    ['2', 'line_items.0.quantity: Invalid input: expected number, received string'],
  ])('a Shopify order line with quantity %j is refused with "%s"', (quantity, message) => {
    const error = shopifyOrder({ quantity });

    expect(error.message).toBe(message);
    expect(error).toMatchObject({ failureClass: 'bad_input', field: 'line_items.0.quantity' });
  });

  it('a WooCommerce order with a string for prices_include_tax is refused naming the field', () => {
    const order = { ...sampleJson('woocommerce/order_v3_docs_example.json'), prices_include_tax: 'yes' };
    const delivery = request(JSON.stringify(order), { 'x-wc-webhook-topic': 'order.created' });

    const error = thrown(() => ADAPTERS.woocommerce.map(delivery, contextOf(sourceOf('woocommerce'), [])));

    expect(error.message).toBe('prices_include_tax: Invalid input: expected boolean, received string');
  });

  it.each([
    [{ amountCents: 1.5 }, 'amountCents', 'Invalid input: expected int, received number'],
    [{ amountCents: 0 }, 'amountCents', 'Too small: expected number to be >0'],
    [{ amount: '' }, 'amount', 'Too small: expected string to have >=1 characters'],
    [{ amount: '1.00', full: true }, 'amount', 'give exactly one of amount, amountCents or full: true'],
    [{ amount: '1.00', extra: 1 }, 'extra', 'extra is not allowed here'],
  ])('a finance refund %j is refused naming %s with "%s"', (fields, field, message) => {
    const result = FinanceRefundRequest.safeParse({ externalId: 'order-1', refundId: 'refund-1', ...fields });

    expect(result.success).toBe(false);
    expect(firstIssue(result.error!)).toMatchObject({ field, message });
  });
});

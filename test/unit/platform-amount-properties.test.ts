import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { OrderPlaced, OrderRefunded } from '../../shared/domain/events.ts';
import type { RefundRecord } from '../../shared/ledger.ts';
import { formatMoney } from '../../shared/money.ts';
import { shopifyAdapter } from '../../shared/platforms/shopify.ts';
import { stripeAdapter } from '../../shared/platforms/stripe.ts';
import { woocommerceAdapter } from '../../shared/platforms/woocommerce.ts';
import { netRefund } from '../../shared/worker/refund-net.ts';
import {
  base64Hmac,
  eventsOf,
  hexHmac,
  NOW_S,
  onlyEvent,
  SECRET,
  signedDeliveries,
} from './platforms/support.ts';

/**
 * The platforms' amount rules (docs/shop-platforms.md#money) as properties over generated orders in
 * currencies of 0, 2 and 3 decimals: the conversion amount is the lines' money after discounts and
 * without tax, whatever the shipping; the refund basis kept for refunds adds up to that amount; and
 * refunding every unit, in pieces, through the adapter and the worker's netting, ends at it exactly.
 */

const CURRENCIES = ['JPY', 'EUR', 'KWD'] as const;
const roundDiv = (a: number, b: number) => Math.floor((2 * a + b) / (2 * b));

const shopify = signedDeliveries(shopifyAdapter, (body, topic: string) => ({
  'x-shopify-topic': topic,
  'x-shopify-hmac-sha256': base64Hmac(SECRET, body),
  'x-shopify-event-id': 'prop-event',
}));
const woo = signedDeliveries(woocommerceAdapter, (body, topic: string) => ({
  'x-wc-webhook-topic': topic,
  'x-wc-webhook-signature': base64Hmac(SECRET, body),
  'x-wc-webhook-delivery-id': 'prop-delivery',
}));
const stripe = signedDeliveries(stripeAdapter, (body) => ({
  'stripe-signature': `t=${NOW_S},v1=${hexHmac(SECRET, `${NOW_S}.`, body)}`,
}));

const placedOf = (result: ReturnType<typeof shopify.handle>) => onlyEvent(result) as OrderPlaced;

/** Each unit of a line given to one of up to 4 refunds: quantities per refund per line. */
function split(quantities: readonly number[], owners: readonly (readonly number[])[]): number[][] {
  return [0, 1, 2, 3]
    .map((j) => quantities.map((q, i) => owners[i]!.slice(0, q).filter((o) => o % 4 === j).length))
    .filter((perLine) => perLine.some((q) => q > 0));
}
const owners = fc.array(fc.array(fc.nat(), { minLength: 5, maxLength: 5 }), { minLength: 4, maxLength: 4 });

function refundRecord(event: OrderRefunded, i: number): RefundRecord {
  return {
    refundId: event.refundId,
    amount: event.amount ?? 0,
    full: event.full,
    origin: event.origin,
    receivedAt: `2026-06-01T12:00:0${i}.000Z`,
    status: 'pending',
    ...(event.lines ? { lines: event.lines } : {}),
    ...(event.gross !== undefined ? { gross: event.gross } : {}),
  };
}

describe('Shopify', () => {
  const line = fc.record({
    price: fc.integer({ min: 1, max: 100_000 }),
    quantity: fc.integer({ min: 1, max: 5 }),
    discountPart: fc.integer({ min: 0, max: 40 }),
    rate: fc.constantFrom(0, 7, 19, 21),
  });

  it('takes Σ price × quantity − discounts (− tax when included), not shipping; its lines add up to it; refunds of every unit end at it', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...CURRENCIES),
        fc.array(line, { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 5_000 }),
        owners,
        (currency, lines, taxesIncluded, shipping, who) => {
          // Prepare
          const m = (minor: number) => formatMoney(minor, currency);
          const priced = lines.map((l, i) => {
            const discount = roundDiv(l.price * l.quantity * l.discountPart, 100);
            const money = l.price * l.quantity - discount;
            const tax = roundDiv(money * l.rate, taxesIncluded ? 100 + l.rate : 100);
            return { ...l, id: `${11_000_000_000_000 + i}`, discount, money, tax };
          });
          const expected = priced.reduce((s, l) => s + l.money - (taxesIncluded ? l.tax : 0), 0);
          const order = (shippingPrice: number) => ({
            id: '5900000000000000001',
            currency,
            taxes_included: taxesIncluded,
            line_items: priced.map((l) => ({
              id: l.id,
              price: m(l.price),
              quantity: l.quantity,
              tax_lines: [{ price: m(l.tax) }],
              discount_allocations: l.discount > 0 ? [{ amount: m(l.discount) }] : [],
            })),
            shipping_lines: [{ price: m(shippingPrice), tax_lines: [] }],
          });
          // Act
          const placed = placedOf(shopify.handle(JSON.stringify(order(shipping)), 'orders/create'));
          const noShipping = placedOf(shopify.handle(JSON.stringify(order(0)), 'orders/create'));
          const refunds = split(
            priced.map((l) => l.quantity),
            who,
          ).map((perLine, j) => {
            const body = {
              id: `77${j}`,
              order_id: '5900000000000000001',
              refund_line_items: priced.flatMap((l, i) => {
                const q = perLine[i]!;
                if (q === 0) return [];
                const money = { amount: m(roundDiv(l.money * q, l.quantity)), currency_code: currency };
                const tax = { amount: m(roundDiv(l.tax * q, l.quantity)), currency_code: currency };
                return [
                  {
                    line_item_id: l.id,
                    quantity: q,
                    subtotal_set: { shop_money: money },
                    total_tax_set: { shop_money: tax },
                  },
                ];
              }),
            };
            return onlyEvent(shopify.handle(JSON.stringify(body), 'refunds/create')) as OrderRefunded;
          });
          const done: RefundRecord[] = [];
          for (const [i, event] of refunds.entries()) {
            const next = refundRecord(event, i);
            netRefund(placed.basis, next, done);
            done.push(next);
          }
          // Assess
          expect(placed.amount).toBe(expected);
          expect(noShipping.amount).toBe(expected);
          expect(placed.basis?.net).toBe(expected);
          expect(done.reduce((s, r) => s + r.amount, 0)).toBe(expected);
        },
      ),
      { numRuns: 200, seed: 1911 },
    );
  });
});

describe('WooCommerce', () => {
  const line = fc.record({
    unitNet: fc.integer({ min: 1, max: 100_000 }),
    quantity: fc.integer({ min: 1, max: 5 }),
    rate: fc.constantFrom(0, 5, 10, 20),
  });

  it('takes Σ line totals net of tax, whatever the shipping, fees and price mode; refunds of every unit by their gross end at it', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...CURRENCIES),
        fc.uniqueArray(line, { minLength: 1, maxLength: 4, selector: (l) => l.unitNet * (100 + l.rate) }),
        fc.boolean(),
        fc.integer({ min: 0, max: 5_000 }),
        fc.integer({ min: 0, max: 2_000 }),
        owners,
        (currency, lines, pricesIncludeTax, shipping, fee, who) => {
          // Prepare: per-unit prices, so that a refund's gross is a whole number of units
          const m = (minor: number) => formatMoney(minor, currency);
          const priced = lines.map((l, i) => {
            const unitTax = roundDiv(l.unitNet * l.rate, 100);
            return { ...l, id: 40 + i, unitTax, net: l.unitNet * l.quantity, tax: unitTax * l.quantity };
          });
          const net = priced.reduce((s, l) => s + l.net, 0);
          const tax = priced.reduce((s, l) => s + l.tax, 0);
          const body = (refunds: unknown[]) => ({
            id: 7001,
            status: refunds.length > 0 ? 'completed' : 'processing',
            currency,
            prices_include_tax: pricesIncludeTax,
            total: m(net + tax + shipping + fee),
            total_tax: m(tax),
            shipping_total: m(shipping),
            fee_lines: [{ total: m(fee) }],
            line_items: priced.map((l) => ({
              id: l.id,
              quantity: l.quantity,
              total: m(l.net),
              total_tax: m(l.tax),
            })),
            refunds,
          });
          // Act
          const placed = placedOf(woo.handle(JSON.stringify(body([])), 'order.created'));
          const parts = split(
            priced.map((l) => l.quantity),
            who,
          ).flatMap((perLine) =>
            priced.flatMap((l, i) => (perLine[i]! > 0 ? [(l.unitNet + l.unitTax) * perLine[i]!] : [])),
          );
          const entries = parts.map((gross, j) => ({ id: 900 + j, total: m(-gross) }));
          const done: RefundRecord[] = [];
          for (const [j, _] of entries.entries()) {
            const events = eventsOf(
              woo.handle(JSON.stringify(body(entries.slice(0, j + 1))), 'order.updated'),
            );
            const event = events.find(
              (e) => (e as OrderRefunded).refundId === String(900 + j),
            ) as OrderRefunded;
            const next = refundRecord(event, j);
            netRefund(placed.basis, next, done);
            done.push(next);
          }
          // Assess
          expect(placed.amount).toBe(net);
          expect(placed.basis?.net).toBe(net);
          expect(done.reduce((s, r) => s + r.amount, 0)).toBe(net);
        },
      ),
      { numRuns: 150, seed: 1912 },
    );
  });
});

describe('Stripe', () => {
  it('takes amount_total − tax − shipping, and the session’s lines add up to it', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('jpy', 'eur', 'kwd'),
        fc.array(
          fc.record({
            net: fc.integer({ min: 1, max: 200_000 }),
            tax: fc.integer({ min: 1, max: 40_000 }),
            quantity: fc.integer({ min: 1, max: 5 }),
          }),
          { minLength: 1, maxLength: 4 },
        ),
        fc.integer({ min: 0, max: 5_000 }),
        (currency, lines, shipping) => {
          // Prepare
          const net = lines.reduce((s, l) => s + l.net, 0);
          const tax = lines.reduce((s, l) => s + l.tax, 0);
          const session = {
            id: 'evt_prop',
            type: 'checkout.session.completed',
            data: {
              object: {
                id: 'cs_prop',
                object: 'checkout.session',
                mode: 'payment',
                payment_status: 'paid',
                amount_total: net + tax + shipping,
                currency,
                total_details: { amount_tax: tax, amount_shipping: shipping },
                metadata: { order_id: 'A-1' },
                line_items: {
                  object: 'list',
                  has_more: false,
                  data: lines.map((l, i) => ({
                    id: `li_${i}`,
                    object: 'item',
                    quantity: l.quantity,
                    amount_subtotal: l.net,
                    amount_tax: l.tax,
                    amount_total: l.net + l.tax,
                  })),
                },
              },
            },
          };
          // Act
          const placed = placedOf(stripe.handle(JSON.stringify(session)));
          // Assess
          expect(placed.amount).toBe(net);
          expect(placed.basis?.net).toBe(net);
          expect(placed.basis?.shipping).toBe(shipping);
        },
      ),
      { numRuns: 150, seed: 1913 },
    );
  });
});

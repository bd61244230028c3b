import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backendFor } from '../../functions/worker.ts';
import { DEFAULT_SEED, type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import { CurrentApiBackend } from '../../shared/affiliate/backend.ts';
import { AffiliateClient } from '../../shared/affiliate/client.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { countedRefunds, ledgerKey } from '../../shared/ledger.ts';
import { formatMoney } from '../../shared/money.ts';
import { shopifyAdapter } from '../../shared/platforms/shopify.ts';
import { stripeAdapter } from '../../shared/platforms/stripe.ts';
import type { PlatformAdapter } from '../../shared/platforms/types.ts';
import { woocommerceAdapter } from '../../shared/platforms/woocommerce.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { type SignedPlatform, signedHeaders } from '../support/webhooks.ts';

/**
 * Issue 19, the property on each platform: whatever the order (lines, quantities, discounts, tax
 * rates, tax mode, shipping) and however its lines are split into refunds, delivered in any order
 * with the order itself anywhere among them, the refunds' net amounts add up to the order's amount
 * and the conversion ends refused (or is never added, when every refund came before the order).
 * Real adapters (signed payloads), the worker and the sandbox on port 0.
 */

const SECRET = 'refund-properties-secret-0123456789';
const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';
const RUNS = 40;

let sandbox: RunningSandbox;
let deps: WorkerDeps;
let ledger: MemoryLedger;
let orderNo = 0;

const sourceFor = (platform: SignedPlatform) =>
  SourceConfig.parse({
    id: platform,
    platform,
    program: DEFAULT_SEED.programs[0]!,
    rule: DEFAULT_SEED.rules[0]!,
    secretRef: 'SECRET',
  });

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
  ledger = new MemoryLedger();
  const client = new AffiliateClient({ baseUrl: sandbox.url, token: sandbox.token, timeoutMs: 5_000 });
  deps = {
    ledger,
    sources: new Map((['shopify', 'woocommerce', 'stripe'] as const).map((p) => [p, sourceFor(p)])),
    backendFor: backendFor({ current: new CurrentApiBackend(client) }),
    now: Date.now,
    workerId: 'property-worker',
    leaseMs: 60_000,
  };
});
afterAll(async () => {
  await sandbox?.close();
});

interface Delivery {
  readonly body: unknown;
  readonly topic: string;
}

/** Signs and maps each delivery, then hands its events to the worker, one after the other. */
async function deliver(adapter: PlatformAdapter, deliveries: readonly Delivery[]): Promise<void> {
  const platform = adapter.platform as SignedPlatform;
  const context = { source: sourceFor(platform), secrets: [SECRET], now: new Date() };
  for (const { body, topic } of deliveries) {
    const raw = Buffer.from(JSON.stringify(body));
    const headers = signedHeaders(platform, SECRET, raw, { topic });
    const result = adapter.handle({ rawBody: raw, headers }, context);
    if (result.kind !== 'events') continue;
    for (const event of result.events) await processEvent(deps, event as ConnectorEvent);
  }
}

/** What the property asserts once every delivery is through. */
async function expectWhollyRefunded(externalId: string, orderAmount: number, orderLast: boolean) {
  const record = await ledger.get(ledgerKey(DEFAULT_SEED.programs[0]!, externalId));
  expect(record?.originalAmount).toBe(orderAmount);
  const refunds = countedRefunds(record!);
  expect(refunds.every((r) => r.status === 'applied' && !r.full)).toBe(true);
  expect(refunds.reduce((sum, r) => sum + r.amount, 0)).toBe(orderAmount);
  const conversions = sandbox.control.conversions().filter((c) => c.externalId === externalId);
  if (orderLast) {
    // Every refund came first: the order was refunded in full before it arrived, never added.
    expect(record?.state).toBe('skipped');
    expect(conversions).toHaveLength(0);
  } else {
    expect(record?.state).toBe('refused');
    expect(conversions.map((c) => c.status)).toEqual(['refused']);
  }
}

const TAX_RATES = [0, 5, 7, 10, 19, 20] as const;
const eur = (minor: number) => formatMoney(minor, 'EUR');
const roundDiv = (a: number, b: number) => Math.floor((2 * a + b) / (2 * b));

/** Each unit of a line goes to one of `refunds` refunds: the split, as quantities per refund. */
function splitOf(quantities: readonly number[], owners: readonly (readonly number[])[], refunds: number) {
  return Array.from({ length: refunds }, (_, j) =>
    quantities.map((_, i) => owners[i]!.filter((o) => o % refunds === j).length),
  ).filter((perLine) => perLine.some((q) => q > 0));
}

/** Where the order goes among the refund deliveries. */
function withOrderAt<T>(refunds: readonly T[], order: T, at: number): T[] {
  const i = at % (refunds.length + 1);
  return [...refunds.slice(0, i), order, ...refunds.slice(i)];
}

const shopifyLine = fc.record({
  price: fc.integer({ min: 100, max: 50_000 }),
  quantity: fc.integer({ min: 1, max: 4 }),
  discountPart: fc.integer({ min: 0, max: 33 }),
  rate: fc.constantFrom(...TAX_RATES),
});

describe('Σ refunds of every line = the order’s amount, conversion refused', () => {
  it('holds on Shopify, for either tax mode, with shipping paid back alongside', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(shopifyLine, { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.array(fc.nat(), { minLength: 4, maxLength: 4 }), { minLength: 4, maxLength: 4 }),
        fc.nat(),
        fc.boolean(),
        async (lines, taxesIncluded, refundCount, owners, orderAt, shippingBack) => {
          const orderId = `${5_900_000_000_000_000_000n + BigInt(++orderNo)}`;
          const priced = lines.map((l, i) => {
            const gross = l.price * l.quantity;
            const discount = Math.floor((gross * l.discountPart) / 100);
            const money = gross - discount;
            const tax = taxesIncluded
              ? roundDiv(money * l.rate, 100 + l.rate)
              : roundDiv(money * l.rate, 100);
            return {
              ...l,
              id: `${14_000_000_000 + i}`,
              discount,
              money,
              tax,
              net: taxesIncluded ? money - tax : money,
            };
          });
          const order = {
            id: orderId,
            currency: 'EUR',
            taxes_included: taxesIncluded,
            browser_ip: IP,
            note_attributes: [{ name: 'aecid', value: CLICK }],
            line_items: priced.map((l) => ({
              id: l.id,
              product_id: 632910392,
              price: eur(l.price),
              quantity: l.quantity,
              tax_lines: [{ title: 'VAT', rate: l.rate / 100, price: eur(l.tax) }],
              discount_allocations: l.discount > 0 ? [{ amount: eur(l.discount) }] : [],
            })),
            shipping_lines: [{ price: '4.90', tax_lines: [{ price: taxesIncluded ? '0.78' : '0.93' }] }],
          };
          const split = splitOf(
            priced.map((l) => l.quantity),
            priced.map((l, i) => owners[i]!.slice(0, l.quantity)),
            refundCount,
          );
          const refunds = split.map((perLine, j) => {
            const refundLines = priced.flatMap((l, i) => {
              const q = perLine[i]!;
              if (q === 0) return [];
              const subtotal = roundDiv(l.money * q, l.quantity);
              const tax = roundDiv(l.tax * q, l.quantity);
              return [
                {
                  line_item_id: l.id,
                  quantity: q,
                  subtotal_set: { shop_money: { amount: eur(subtotal), currency_code: 'EUR' } },
                  total_tax_set: { shop_money: { amount: eur(tax), currency_code: 'EUR' } },
                  subtotal,
                  tax,
                },
              ];
            });
            const paid =
              refundLines.reduce((s, r) => s + r.subtotal + (taxesIncluded ? 0 : r.tax), 0) +
              (shippingBack && j === 0 ? 490 : 0);
            return {
              body: {
                id: `${orderId}${j}`,
                order_id: orderId,
                refund_line_items: refundLines.map(({ subtotal: _s, tax: _t, ...line }) => line),
                transactions: [{ kind: 'refund', status: 'success', amount: eur(paid), currency: 'EUR' }],
              },
              topic: 'refunds/create',
            };
          });
          const at = orderAt % (refunds.length + 1);
          await deliver(
            shopifyAdapter,
            withOrderAt<Delivery>(refunds, { body: order, topic: 'orders/create' }, at),
          );
          await expectWhollyRefunded(
            orderId,
            priced.reduce((s, l) => s + l.net, 0),
            at === refunds.length,
          );
        },
      ),
      { numRuns: RUNS, seed: 19001 },
    );
  });

  /** Lines priced per unit (as WooCommerce and Stripe store them), with distinct unit grosses. */
  const unitLines = fc.uniqueArray(
    fc.record({
      unitNet: fc.integer({ min: 100, max: 20_000 }),
      quantity: fc.integer({ min: 1, max: 4 }),
      rate: fc.constantFrom(...TAX_RATES),
    }),
    {
      minLength: 1,
      maxLength: 4,
      selector: (l) => l.unitNet + roundDiv(l.unitNet * l.rate, 100),
    },
  );
  const perUnit = (l: { unitNet: number; quantity: number; rate: number }, i: number) => {
    const unitTax = roundDiv(l.unitNet * l.rate, 100);
    return { ...l, id: `${315 + i}`, unitTax, net: l.unitNet * l.quantity, tax: unitTax * l.quantity };
  };

  it('holds on WooCommerce, refunds listing their lines or stating only their gross', async () => {
    await fc.assert(
      fc.asyncProperty(
        unitLines,
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.array(fc.nat(), { minLength: 4, maxLength: 4 }), { minLength: 4, maxLength: 4 }),
        fc.nat(),
        fc.array(fc.boolean(), { minLength: 16, maxLength: 16 }),
        async (lines, refundCount, owners, orderAt, grossOnly) => {
          const orderId = String(70_000 + ++orderNo);
          const priced = lines.map(perUnit);
          const net = priced.reduce((s, l) => s + l.net, 0);
          const tax = priced.reduce((s, l) => s + l.tax, 0);
          const split = splitOf(
            priced.map((l) => l.quantity),
            priced.map((l, i) => owners[i]!.slice(0, l.quantity)),
            refundCount,
          );
          // A refund of one line may state only its gross (refunds[] as WooCommerce sends it).
          const refundEntries = split.map((perLine, j) => {
            const refunded = priced.flatMap((l, i) => (perLine[i]! > 0 ? [{ l, q: perLine[i]! }] : []));
            const gross = refunded.reduce((s, { l, q }) => s + (l.unitNet + l.unitTax) * q, 0);
            const withLines = refunded.length > 1 || !grossOnly[j];
            return {
              id: 9000 + j,
              refund: '',
              total: eur(-gross),
              ...(withLines
                ? {
                    line_items: refunded.map(({ l, q }, k) => ({
                      id: 500 + k,
                      quantity: -q,
                      total: eur(-l.unitNet * q),
                      total_tax: eur(-l.unitTax * q),
                      meta_data: [{ id: 1, key: '_refunded_item_id', value: l.id }],
                    })),
                  }
                : {}),
            };
          });
          const orderBody = (refunds: unknown[], step: number) => ({
            id: orderId,
            status: 'processing',
            currency: 'EUR',
            date_created_gmt: '2026-03-02T09:00:00',
            date_modified_gmt: `2026-03-02T10:00:${String(step).padStart(2, '0')}`,
            prices_include_tax: false,
            total: eur(net + tax + 500 + 100),
            total_tax: eur(tax + 100),
            shipping_total: '5.00',
            customer_ip_address: IP,
            meta_data: [{ id: 1, key: '_aecid', value: CLICK }],
            line_items: priced.map((l) => ({
              id: Number(l.id),
              product_id: 93,
              quantity: l.quantity,
              total: eur(l.net),
              total_tax: eur(l.tax),
            })),
            refunds,
          });
          const updates = refundEntries.map((_, j) => ({
            body: orderBody(refundEntries.slice(0, j + 1).reverse(), j + 1),
            topic: 'order.updated',
          }));
          const at = orderAt % (updates.length + 1);
          await deliver(
            woocommerceAdapter,
            withOrderAt<Delivery>(updates, { body: orderBody([], 0), topic: 'order.created' }, at),
          );
          await expectWhollyRefunded(orderId, net, at === updates.length);
        },
      ),
      { numRuns: RUNS, seed: 19002 },
    );
  });

  it('holds on Stripe when the session lists its line items with tax, each refund a few units of a line', async () => {
    await fc.assert(
      fc.asyncProperty(
        unitLines.filter((lines) => lines.some((l) => l.rate > 0)),
        fc.array(fc.array(fc.nat(), { minLength: 4, maxLength: 4 }), { minLength: 4, maxLength: 4 }),
        fc.nat(),
        async (lines, owners, orderAt) => {
          const orderId = `A-${++orderNo}`;
          const priced = lines.map(perUnit);
          const net = priced.reduce((s, l) => s + l.net, 0);
          const tax = priced.reduce((s, l) => s + l.tax, 0);
          // Stripe refunds name no line: each is a few units of one line (its gross), refunds of
          // different lines never merged.
          const parts = priced.flatMap((l, i) => {
            const owner = owners[i]!.slice(0, l.quantity);
            return [...new Set(owner.map((o) => o % 3))].map((g) => ({
              l,
              q: owner.filter((o) => o % 3 === g).length,
            }));
          });
          const refunds = parts.map(({ l, q }, j) => ({
            body: {
              id: `evt_${orderId}_${j}`,
              type: 'refund.created',
              data: {
                object: {
                  id: `re_${orderId}_${j}`,
                  object: 'refund',
                  amount: (l.unitNet + l.unitTax) * q,
                  currency: 'eur',
                  status: 'succeeded',
                  metadata: { order_id: orderId },
                  payment_intent: `pi_${orderId}`,
                },
              },
            },
            topic: 'refund.created',
          }));
          const session = {
            id: `evt_${orderId}_session`,
            type: 'checkout.session.completed',
            data: {
              object: {
                id: `cs_${orderId}`,
                object: 'checkout.session',
                mode: 'payment',
                payment_status: 'paid',
                amount_total: net + tax + 700,
                currency: 'eur',
                total_details: { amount_tax: tax, amount_shipping: 700 },
                metadata: { order_id: orderId, aecid: CLICK, buyer_ip: IP },
                payment_intent: `pi_${orderId}`,
                line_items: {
                  object: 'list',
                  has_more: false,
                  data: priced.map((l) => ({
                    id: `li_${l.id}`,
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
          const at = orderAt % (refunds.length + 1);
          await deliver(
            stripeAdapter,
            withOrderAt<Delivery>(refunds, { body: session, topic: 'checkout.session.completed' }, at),
          );
          await expectWhollyRefunded(orderId, net, at === refunds.length);
        },
      ),
      { numRuns: RUNS, seed: 19003 },
    );
  });
});

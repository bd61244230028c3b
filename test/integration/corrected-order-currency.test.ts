import { describe, expect, it } from 'vitest';
import { compareOrder } from '../../cli/compare.ts';
import { DEFAULT_SEED } from '../../sandbox/server.ts';
import { CurrentApiBackend } from '../../shared/affiliate/backend.ts';
import { AffiliateClient } from '../../shared/affiliate/client.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEventInput } from '../../shared/domain/events.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { deliverInBatch } from '../support/batch-delivery.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { sandboxForTests } from '../support/sandbox.ts';

/**
 * An order parked because the platform's conversion for it is in another currency (the pixel's, in
 * the buyer's USD, for an EUR order), then sent again by the shop, corrected, under the same
 * externalId: the worker judges the conversion against the order as the correction states it. One
 * now in the conversion's currency is adopted; one still in another is parked naming the currencies
 * of now, not the ones the record held before.
 */

/** Program 0 of the sandbox's seed (EUR). */
const PROGRAM = DEFAULT_SEED.programs[0]!;
const SHOP = SourceConfig.parse({
  id: 'shop',
  platform: 'generic',
  program: PROGRAM,
  rule: DEFAULT_SEED.rules[0]!,
  secretRef: 'SHOP_SECRET',
});
const KEY = ledgerKey(PROGRAM, '9601');

const sandbox = sandboxForTests({ duplicates: 'reject' });

let sequence = 0;

/** Order 9601 of the shop, tracked, at `amount` minor units of `currency`. */
const order = (amount: number, currency: string): ConnectorEventInput => ({
  type: 'OrderPlaced',
  eventId: `evt-${++sequence}`,
  source: 'shop',
  platform: 'generic',
  externalId: '9601',
  receivedAt: new Date().toISOString(),
  amount,
  currency,
  clickIds: ['c1c1c1c1c1c1c1c1c1c1c1c1'],
  buyerIp: '203.0.113.7',
});

/** A refund of order 9601 of `amount` minor units of `currency`. */
const refund = (refundId: string, amount: number, currency: string): ConnectorEventInput => ({
  type: 'OrderRefunded',
  eventId: `evt-${++sequence}`,
  source: 'shop',
  platform: 'generic',
  externalId: '9601',
  receivedAt: new Date().toISOString(),
  refundId,
  amount,
  currency,
});

/** One worker and its ledger: each `deliver` is one message through a batch, as the Lambda runs it. */
function connector() {
  const ledger = new MemoryLedger();
  const current = new CurrentApiBackend(new AffiliateClient({ baseUrl: sandbox.url, token: sandbox.token }));
  return {
    ledger,
    async deliver(event: ConnectorEventInput) {
      const { answer, parked } = await deliverInBatch(event, {
        ledger,
        source: SHOP,
        current,
        messageId: event.eventId,
      });
      expect(answer.batchItemFailures).toEqual([]);
      return parked;
    },
  };
}

/** The pixel's conversion of order 9601, USD 49.90, and the shop's EUR 49.90 order parked on it. */
async function parkedOnUsd() {
  const pixel = sandbox.control.seedConversion({
    program: PROGRAM,
    externalId: '9601',
    amount: 4_990,
    currency: 'USD',
  });
  const shop = connector();
  const parked = await shop.deliver(order(4_990, 'EUR'));
  expect(parked.map((p) => p.reason)).toEqual([expect.stringContaining('the order in EUR (EUR 49.90)')]);
  return { pixel, shop };
}

describe('an order parked on a conversion in another currency, corrected by the shop', () => {
  it('is processed when the correction is in the conversion’s currency: adopted, not parked again', async () => {
    // Prepare: the shop finds it took the order in USD and sends it again, USD 49.90
    const { pixel, shop } = await parkedOnUsd();

    // Act
    const parked = await shop.deliver(order(4_990, 'USD'));

    // Assess: the pixel's conversion is the order's; the ledger holds the corrected order
    expect(parked).toEqual([]);
    const record = await shop.ledger.get(KEY);
    expect(record).toMatchObject({
      state: 'added',
      conversionId: pixel.id,
      currency: 'USD',
      originalAmount: 4_990,
      currentAmount: 4_990,
    });
    expect(record?.lastError).toBeUndefined();
    const conversions = sandbox.control.conversions();
    expect(conversions).toEqual([
      expect.objectContaining({ id: pixel.id, amount: 4_990, currency: 'USD', status: 'pending' }),
    ]);
    // status and reconcile, reading Conversion info, see the ledger and the platform agree
    const client = new AffiliateClient({ baseUrl: sandbox.url, token: sandbox.token });
    const listed = await client.conversionInfo({ program: PROGRAM, externalId: '9601' });
    expect(compareOrder(PROGRAM, '9601', record, listed ? [listed] : [])).toEqual([]);
  });

  it('takes a later refund in the corrected currency', async () => {
    // Prepare
    const { pixel, shop } = await parkedOnUsd();
    await shop.deliver(order(4_990, 'USD'));

    // Act
    const parked = await shop.deliver(refund('r1', 990, 'USD'));

    // Assess
    expect(parked).toEqual([]);
    expect(sandbox.control.conversions()).toEqual([
      expect.objectContaining({ id: pixel.id, amount: 4_000, currency: 'USD' }),
    ]);
    expect((await shop.ledger.get(KEY))?.refunds['r1']?.status).toBe('applied');
  });

  it('does not apply a refund held in the old currency to the adopted conversion: it is rejected', async () => {
    // Prepare: a EUR 10.00 refund came while the order was parked
    const { pixel, shop } = await parkedOnUsd();
    expect(await shop.deliver(refund('r-eur', 1_000, 'EUR'))).toEqual([]);

    // Act
    const parked = await shop.deliver(order(4_990, 'USD'));

    // Assess: USD 49.90 stands on the platform; the EUR refund is other money
    expect(parked).toEqual([]);
    expect(sandbox.control.conversions()).toEqual([
      expect.objectContaining({ id: pixel.id, amount: 4_990, currency: 'USD', status: 'pending' }),
    ]);
    const record = await shop.ledger.get(KEY);
    expect(record).toMatchObject({ state: 'added', currency: 'USD', currentAmount: 4_990 });
    expect(record?.refunds['r-eur']).toMatchObject({
      status: 'rejected',
      outcome: "refund currency EUR differs from the order's USD",
    });
  });

  it('is parked again naming the corrected currency when it still differs from the conversion’s', async () => {
    // Prepare
    const { pixel, shop } = await parkedOnUsd();

    // Act: corrected to GBP 45.00, the platform's conversion still in USD
    const parked = await shop.deliver(order(4_500, 'GBP'));

    // Assess
    expect(parked).toEqual([
      expect.objectContaining({
        failureClass: 'permanent',
        reason: expect.stringContaining(
          `the platform's conversion ${pixel.id} for order 9601 is in USD (USD 49.90), the order in GBP (GBP 45.00): not adopted`,
        ),
      }),
    ]);
    expect(await shop.ledger.get(KEY)).toMatchObject({
      state: 'failed',
      currency: 'GBP',
      originalAmount: 4_500,
    });
    expect(sandbox.control.conversions()).toEqual([
      expect.objectContaining({ id: pixel.id, amount: 4_990, currency: 'USD' }),
    ]);
  });
});

import { describe, expect, it } from 'vitest';
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
 * The worker against the sandbox over the real client: a conversion the platform already has for an
 * order, in another currency than the order's (the pixel's, in the buyer's USD), is not adopted when
 * the add is answered 409 or `lookupBeforeAdd` finds it. The order goes to the DLQ with the reason.
 */

/** Program 0 of the sandbox's seed: its currency is EUR. */
const PROGRAM = DEFAULT_SEED.programs[0]!;
const source = (extra: Record<string, unknown> = {}) =>
  SourceConfig.parse({
    id: 'shop',
    platform: 'generic',
    program: PROGRAM,
    rule: DEFAULT_SEED.rules[0]!,
    secretRef: 'SHOP_SECRET',
    ...extra,
  });

const sandbox = sandboxForTests({ duplicates: 'reject' });

/** Order `externalId` of the shop: EUR 49.90, tracked. */
function orderPlaced(externalId: string): ConnectorEventInput {
  return {
    type: 'OrderPlaced',
    eventId: `evt-${externalId}`,
    source: 'shop',
    platform: 'generic',
    externalId,
    receivedAt: new Date().toISOString(),
    amount: 4_990,
    currency: 'EUR',
    clickIds: ['c1c1c1c1c1c1c1c1c1c1c1c1'],
    buyerIp: '203.0.113.7',
  };
}

async function run(shop: SourceConfig, externalId: string) {
  const client = new AffiliateClient({ baseUrl: sandbox.url, token: sandbox.token });
  const ledger = new MemoryLedger();
  const { answer, parked } = await deliverInBatch(orderPlaced(externalId), {
    ledger,
    source: shop,
    current: new CurrentApiBackend(client),
    messageId: 'm1',
  });
  return { answer, parked, record: await ledger.get(ledgerKey(PROGRAM, externalId)) };
}

describe('a conversion in USD on the platform for an EUR order', () => {
  it.each([
    ['the add is answered 409', {}],
    ['lookupBeforeAdd finds it', { lookupBeforeAdd: true }],
  ])('is not adopted when %s: the order is parked with the reason', async (_case, extra) => {
    // Prepare: the pixel's conversion of order 9501 at USD 49.90
    const pixel = sandbox.control.seedConversion({
      program: PROGRAM,
      externalId: '9501',
      amount: 4_990,
      currency: 'USD',
    });

    // Act
    const { answer, parked, record } = await run(source(extra), '9501');

    // Assess: one conversion, untouched; the ledger holds the order as failed, not as the USD one
    expect(answer.batchItemFailures).toEqual([]);
    expect(parked).toEqual([
      expect.objectContaining({
        failureClass: 'permanent',
        reason: expect.stringContaining(
          `the platform's conversion ${pixel.id} for order 9501 is in USD (USD 49.90), the order in EUR (EUR 49.90): not adopted`,
        ),
      }),
    ]);
    expect(sandbox.control.conversions()).toEqual([
      expect.objectContaining({ id: pixel.id, amount: 4_990, currency: 'USD', status: 'pending' }),
    ]);
    expect(record).toMatchObject({ state: 'failed', currency: 'EUR', currentAmount: 4_990 });
    expect(record?.conversionId).toBeUndefined();
  });

  it('is adopted when it is in EUR, as before', async () => {
    // Prepare
    const pixel = sandbox.control.seedConversion({
      program: PROGRAM,
      externalId: '9502',
      amount: 4_500,
      currency: 'EUR',
    });

    // Act
    const { parked, record } = await run(source(), '9502');

    // Assess
    expect(parked).toEqual([]);
    expect(record).toMatchObject({ state: 'added', conversionId: pixel.id, currentAmount: 4_500 });
  });
});

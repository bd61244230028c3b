import { describe, expect, it } from 'vitest';
import { compareOrder } from '../../cli/compare.ts';
import type { Conversion } from '../../shared/affiliate/schemas.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { PermanentError } from '../../shared/errors.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import type { ConversionBackend, PlatformConversion } from '../../shared/ports.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { trackedOrder } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * The worker decides whether the platform's conversion for an order is in the order's currency (and
 * may be adopted) or is other money (parked); `connector status` and `reconcile` (`compareOrder`)
 * decide the same of a ledger record and the platform's conversion. One rule for both: a currency
 * written in another letter case or with spaces around it is the same one, and a side that names no
 * currency is not other money. Otherwise an order the worker adopted shows up as an
 * `amount_mismatch` in another currency, or one it parked as agreeing.
 */

const PROGRAM = '5ad000000000000000000101';
const NOW = Date.parse('2026-05-01T10:00:00.000Z');
const SHOP = SourceConfig.parse({
  id: 'shop',
  platform: 'generic',
  program: PROGRAM,
  rule: '5ad000000000000000000201',
  secretRef: 'SHOP_SECRET',
});
const CONVERSION_ID = 'c00000000000000000000001';

/** The platform with one conversion for order 1001, EUR 50.00 in figures, in `currency`. */
function platformWith(currency: string | undefined): ConversionBackend {
  const conversion: PlatformConversion = {
    id: CONVERSION_ID,
    externalId: '1001',
    amount: 5_000,
    status: 'pending',
    ...(currency === undefined ? {} : { currency }),
  };
  return {
    add: async () => {
      throw new PermanentError('conversions.add answered 409: already exists', { status: 409 });
    },
    find: async () => conversion,
    updateAmount: async () => {},
    refuse: async () => {},
    accept: async () => {},
  };
}

/** What the worker makes of shop order 1001 (EUR 50.00) on that platform: its ledger record. */
async function workerDecides(currency: string | undefined): Promise<OrderRecord | undefined> {
  const ledger = new MemoryLedger(() => NOW);
  const deps: WorkerDeps = {
    ledger,
    sources: new Map([[SHOP.id, SHOP]]),
    backendFor: () => platformWith(currency),
    now: () => NOW,
    workerId: 'w1',
    leaseMs: 60_000,
  };
  await processEvent(deps, trackedOrder('shop')).catch((error: unknown) => {
    if (!(error instanceof PermanentError)) throw error;
  });
  return ledger.get(ledgerKey(PROGRAM, '1001'));
}

/** The conversion as `status`/`reconcile` read it from the platform. */
const listed = (currency: string | undefined): Conversion => ({
  id: CONVERSION_ID,
  externalId: '1001',
  amount: 5_000,
  status: 'pending',
  ...(currency === undefined ? {} : { currency }),
});

describe('status and reconcile judge a conversion’s currency as the worker does', () => {
  it.each([
    ['upper case', 'EUR'],
    ['lower case', 'eur'],
    ['a space before it', ' EUR'],
    ['a space after it', 'EUR '],
    ['no currency given', undefined],
    ['an empty currency', ''],
    ['a blank currency', '  '],
  ])('a conversion the worker adopts (%s) agrees with the ledger', async (_case, currency) => {
    // Act
    const record = await workerDecides(currency);
    const differences = compareOrder(PROGRAM, '1001', record, [listed(currency)]);

    // Assess: adopted by the worker, and nothing to report
    expect(record).toMatchObject({ state: 'added', conversionId: CONVERSION_ID, currency: 'EUR' });
    expect(differences).toEqual([]);
  });

  it.each([
    ['upper case', 'USD'],
    ['lower case', 'usd'],
    ['spaces around it', ' USD '],
  ])(
    'a conversion the worker parks as other money (%s) is an amount_mismatch in its own currency',
    async (_case, currency) => {
      // Prepare: the worker parks it; a record as versions before that check adopted it
      const parked = await workerDecides(currency);
      const adoptedBefore: OrderRecord = {
        ...(parked as OrderRecord),
        state: 'added',
        conversionId: CONVERSION_ID,
      };

      // Act
      const differences = compareOrder(PROGRAM, '1001', adoptedBefore, [listed(currency)]);

      // Assess
      expect(parked).toMatchObject({ state: 'failed', lastError: expect.stringContaining('is in USD') });
      expect(differences).toEqual([
        expect.objectContaining({
          kind: 'amount_mismatch',
          currency: 'EUR',
          platformCurrency: currency,
          detail: expect.stringMatching(/^ledger EUR 50\.00, platform /),
        }),
      ]);
    },
  );
});

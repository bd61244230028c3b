import { describe, expect, it } from 'vitest';
import { repairStuckAdd, STUCK_ADD_AFTER_MS } from '../../cli/stuck.ts';
import type { Conversion } from '../../shared/affiliate/schemas.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * `reconcile --repair` decides a stuck add by the platform's conversion of the order. One in another
 * currency than the order's is not the order's add (the pixel's in the buyer's currency, another
 * shop's order with the same id): taking it recorded USD 49.90 as the order's EUR 49.90, and marked
 * the refunds the add carried applied on the bare number. The worker does not adopt such a
 * conversion (shared/worker/flow.ts `otherCurrencyReason`); the repair leaves the record as it is,
 * saying why.
 */

const PROGRAM = '0123456789abcdef01234567';
const NOW = Date.parse('2026-11-28T12:00:00Z');

async function stuckOrder(ledger: MemoryLedger): Promise<OrderRecord> {
  const at = new Date(NOW - STUCK_ADD_AFTER_MS - 60_000).toISOString();
  const record: OrderRecord = {
    key: ledgerKey(PROGRAM, '9601'),
    program: PROGRAM,
    externalId: '9601',
    source: 'generic',
    state: 'adding',
    version: 0,
    kind: 'tracking',
    originalAmount: 4990,
    currentAmount: 3990,
    currency: 'EUR',
    refunds: {
      'RF-1': {
        refundId: 'RF-1',
        amount: 1000,
        full: false,
        status: 'pending',
        origin: 'shop',
        receivedAt: at,
      },
    },
    createdAt: at,
    updatedAt: at,
  };
  await ledger.create(record);
  return (await ledger.get(record.key)) as OrderRecord;
}

function platformWith(conversion: Partial<Conversion>) {
  return {
    conversionInfo: async () =>
      ({ id: 'c'.repeat(24), externalId: '9601', status: 'pending', ...conversion }) as Conversion,
  };
}

describe('reconcile --repair of a stuck add whose platform conversion is in another currency', () => {
  it('leaves the record stuck, naming both currencies, instead of taking the conversion as the order', async () => {
    // Prepare
    const ledger = new MemoryLedger();
    const record = await stuckOrder(ledger);
    // Act
    const repair = await repairStuckAdd(
      ledger,
      platformWith({ amount: 3990, currency: 'USD' }),
      record,
      NOW,
      true,
    );
    // Assess
    expect(repair).toMatchObject({ action: 'unchanged', why: expect.stringMatching(/USD.*EUR|EUR.*USD/) });
    const after = await ledger.get(record.key);
    expect(after?.state).toBe('adding');
    expect(after?.conversionId).toBeUndefined();
    expect(after?.refunds['RF-1']?.status).toBe('pending');
  });

  it('still takes a conversion in the same currency, however the platform cases it', async () => {
    // Prepare
    const ledger = new MemoryLedger();
    const record = await stuckOrder(ledger);
    // Act
    const repair = await repairStuckAdd(
      ledger,
      platformWith({ amount: 3990, currency: 'eur' }),
      record,
      NOW,
      true,
    );
    // Assess
    expect(repair).toMatchObject({ action: 'added' });
    const after = await ledger.get(record.key);
    expect(after?.state).toBe('added');
    expect(after?.refunds['RF-1']?.status).toBe('applied');
  });
});

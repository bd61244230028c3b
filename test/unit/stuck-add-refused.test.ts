import { describe, expect, it } from 'vitest';
import { compareOrder } from '../../cli/compare.ts';
import { repairStuckAdd, STUCK_ADD_AFTER_MS } from '../../cli/stuck.ts';
import type { Conversion } from '../../shared/affiliate/schemas.ts';
import { awaitsAccept, ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * `reconcile --repair` of a stuck add whose conversion the platform shows refused (the advertiser
 * refused the pixel's, or the add that went through): taken as the worker adopts such a conversion
 * (docs/exactly-once.md), `refused`, never accepted, its held refunds closed, nothing left to send
 * to it. Taken as `added`, every later reconcile told a status_mismatch, the accept job sent an
 * accept the platform refuses, and the refund held for the order went to an update the platform
 * refuses too.
 */

const PROGRAM = '0123456789abcdef01234567';
const NOW = Date.parse('2026-11-28T12:00:00Z');
const CONVERSION: Conversion = {
  id: 'c'.repeat(24),
  externalId: '9701',
  status: 'refused',
  amount: 4990,
  currency: 'EUR',
} as Conversion;

async function stuckOrder(ledger: MemoryLedger): Promise<OrderRecord> {
  const at = new Date(NOW - STUCK_ADD_AFTER_MS - 60_000).toISOString();
  const record: OrderRecord = {
    key: ledgerKey(PROGRAM, '9701'),
    program: PROGRAM,
    externalId: '9701',
    source: 'generic',
    state: 'adding',
    version: 0,
    kind: 'tracking',
    originalAmount: 4990,
    currentAmount: 3990,
    currency: 'EUR',
    acceptDueAt: '2026-12-12T12:00:00.000Z',
    refunds: {
      'RF-1': {
        refundId: 'RF-1',
        amount: 1000,
        full: false,
        status: 'pending',
        origin: 'finance',
        receivedAt: at,
      },
    },
    awaitingSince: at,
    createdAt: at,
    updatedAt: at,
  };
  await ledger.create(record);
  return (await ledger.get(record.key)) as OrderRecord;
}

describe('reconcile --repair of a stuck add the platform shows refused', () => {
  it('records it refused, closes the refunds held for it, and leaves nothing to accept or send', async () => {
    // Prepare
    const ledger = new MemoryLedger();
    const record = await stuckOrder(ledger);
    // Act
    const repair = await repairStuckAdd(
      ledger,
      { conversionInfo: async () => CONVERSION },
      record,
      NOW,
      true,
    );
    // Assess
    const after = await ledger.get(record.key);
    expect(after).toMatchObject({ state: 'refused', conversionId: CONVERSION.id });
    expect(after?.refunds['RF-1']).toMatchObject({
      status: 'skipped',
      outcome: 'conversion already refused',
    });
    expect(after && awaitsAccept(after)).toBe(false);
    expect(after && compareOrder(PROGRAM, '9701', after, [CONVERSION])).toEqual([]);
    expect(repair).toMatchObject({ action: 'added', conversionId: CONVERSION.id });
  });

  it('plans the same in a dry run, writing nothing', async () => {
    // Prepare
    const ledger = new MemoryLedger();
    const record = await stuckOrder(ledger);
    // Act
    const plan = await repairStuckAdd(ledger, { conversionInfo: async () => CONVERSION }, record, NOW, false);
    // Assess
    expect(plan.action === 'added' && plan.record.state).toBe('refused');
    expect((await ledger.get(record.key))?.state).toBe('adding');
  });
});

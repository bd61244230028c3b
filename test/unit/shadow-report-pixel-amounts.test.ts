import { describe, expect, it } from 'vitest';
import { shadowReport } from '../../cli/shadow-report.ts';
import type { Conversion, ConversionsListQuery } from '../../shared/affiliate/schemas.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/** What the pixel's side of an order adds up to: every conversion it fired, and none it gave no amount. */

const PROGRAM = '5ad000000000000000000101';
const FROM = new Date('2026-05-01T00:00:00.000Z');
const TO = new Date('2026-05-31T23:59:59.999Z');
const PILOT = SourceConfig.parse({
  id: 'pilot',
  platform: 'generic',
  program: PROGRAM,
  rule: '5ad000000000000000000201',
  secretRef: 'S',
  mode: 'shadow',
});
const hex = (n: number) => n.toString(16).padStart(24, '0');
const pixel = (n: number, externalId: string, amount?: number): Conversion => ({
  id: hex(n),
  externalId,
  ...(amount === undefined ? {} : { amount }),
  currency: 'EUR',
  status: 'pending',
});

/** The platform's list, one page. */
const platformWith = (all: Conversion[]) => ({
  async listConversions(_query: ConversionsListQuery) {
    return { total: all.length, data: all };
  },
  async conversionInfo() {
    return undefined;
  },
});

/** Shadow records of 100.00 EUR each, created in the period. */
async function shadowOrders(...externalIds: string[]): Promise<MemoryLedger> {
  const ledger = new MemoryLedger();
  for (const externalId of externalIds) {
    await ledger.create({
      key: ledgerKey(PROGRAM, externalId),
      program: PROGRAM,
      externalId,
      source: 'pilot',
      shadow: true,
      state: 'shadowed',
      version: 0,
      originalAmount: 10_000,
      currentAmount: 10_000,
      currency: 'EUR',
      refunds: {},
      createdAt: '2026-05-10T00:00:00.000Z',
      updatedAt: '2026-05-10T00:00:00.000Z',
    } as OrderRecord);
  }
  return ledger;
}

describe('shadowReport, the pixel’s amounts', () => {
  it('adds up every pixel conversion of one order: a duplicate fire is a difference naming the count', async () => {
    // Prepare: the pixel fired twice for order d1, 100.00 each; the connector has it once.
    const platform = platformWith([pixel(1, 'd1', 10_000), pixel(2, 'd1', 10_000)]);
    const ledger = await shadowOrders('d1');
    // Act
    const report = await shadowReport(ledger, platform, [PILOT], FROM, TO);
    // Assess
    expect(report.rows).toHaveLength(1);
    expect(report.rows[0]).toMatchObject({
      kind: 'amount_differs',
      externalId: 'd1',
      pixelAmount: 20_000,
      connectorAmount: 10_000,
      difference: -10_000,
    });
    expect(report.rows[0]?.detail).toContain('2 pixel conversions for one order');
    expect(report.rows[0]?.detail).toContain('EUR 200.00');
    expect(report.atStake).toEqual({ EUR: 10_000 });
  });

  it('reports a pixel conversion without an amount as amount unknown, not as money at stake', async () => {
    // Prepare: the platform gave no amount for u1's conversion.
    const platform = platformWith([pixel(1, 'u1')]);
    const ledger = await shadowOrders('u1');
    // Act
    const report = await shadowReport(ledger, platform, [PILOT], FROM, TO);
    // Assess
    expect(report.rows).toHaveLength(1);
    expect(report.rows[0]).toMatchObject({
      kind: 'amount_unknown',
      externalId: 'u1',
      connectorAmount: 10_000,
    });
    expect(report.rows[0]?.difference).toBeUndefined();
    expect(report.rows[0]?.pixelAmount).toBeUndefined();
    expect(report.atStake).toEqual({});
    expect(report.totals).toEqual([
      { kind: 'amount_unknown', currency: 'EUR', count: 1, connectorAmount: 10_000, pixelAmount: 0 },
    ]);
  });
});

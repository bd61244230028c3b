import { describe, expect, it } from 'vitest';
import { shadowCsv, shadowReport } from '../../cli/shadow-report.ts';
import type { Conversion, ConversionsListQuery } from '../../shared/affiliate/schemas.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * Money in two currencies is never added up or compared by its minor units: a pixel conversion in the
 * buyer's USD for an EUR order is what the worker parks at the switch (`otherCurrency`), and the
 * pixel's money of an order only it saw is counted in its own currency.
 */

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
const pixel = (n: number, externalId: string, amount: number, currency: string): Conversion => ({
  id: hex(n),
  externalId,
  amount,
  currency,
  status: 'pending',
});
const platformWith = (all: Conversion[]) => ({
  async listConversions(_query: ConversionsListQuery) {
    return { total: all.length, data: all };
  },
  async conversionInfo() {
    return undefined;
  },
});

/** Records of the shadow source in EUR, created in the period. */
async function ledgerWith(records: Pick<OrderRecord, 'externalId' | 'state' | 'originalAmount'>[]) {
  const ledger = new MemoryLedger();
  for (const r of records) {
    await ledger.create({
      key: ledgerKey(PROGRAM, r.externalId),
      program: PROGRAM,
      source: 'pilot',
      shadow: true,
      version: 0,
      currentAmount: r.originalAmount,
      currency: 'EUR',
      refunds: {},
      createdAt: '2026-05-10T00:00:00.000Z',
      updatedAt: '2026-05-10T00:00:00.000Z',
      ...r,
    });
  }
  return ledger;
}

describe('shadowReport, currencies', () => {
  it('names a pixel conversion in another currency, whatever its number, and counts it in no money at stake', async () => {
    // Prepare: u1 and u2 are EUR orders; the pixel recorded both in USD, u1 at the same number.
    // Lower case and spaces make no other currency (e1).
    const platform = platformWith([
      pixel(1, 'u1', 4_990, 'USD'),
      pixel(2, 'u2', 6_000, 'USD'),
      pixel(3, 'e1', 4_990, ' eur '),
    ]);
    const ledger = await ledgerWith([
      { externalId: 'u1', state: 'shadowed', originalAmount: 4_990 },
      { externalId: 'u2', state: 'shadowed', originalAmount: 5_000 },
      { externalId: 'e1', state: 'shadowed', originalAmount: 4_990 },
    ]);
    // Act
    const report = await shadowReport(ledger, platform, [PILOT], FROM, TO);
    // Assess
    expect(report.rows.map((r) => [r.kind, r.externalId, r.pixelCurrency, r.difference])).toEqual([
      ['currency_differs', 'u1', 'USD', undefined],
      ['currency_differs', 'u2', 'USD', undefined],
      ['same', 'e1', undefined, 0],
    ]);
    expect(report.rows[0]?.detail).toContain('in USD (USD 49.90), the order in EUR');
    expect(report.rows[0]?.pixelAmount).toBeUndefined();
    expect(report.totals).toContainEqual({
      kind: 'currency_differs',
      currency: 'EUR',
      count: 2,
      connectorAmount: 9_990,
      pixelAmount: 0,
    });
    expect(report.atStake).toEqual({});
    expect(shadowCsv(report)).toContain('\ncurrency_differs,5ad000000000000000000101,u1,');
  });

  it("counts an order only the pixel saw in the pixel's currency, not the skipped order's", async () => {
    // Prepare: s1 reached the connector without a click id (skipped, EUR); the pixel has it in USD.
    const platform = platformWith([pixel(1, 's1', 7_000, 'USD')]);
    const ledger = await ledgerWith([{ externalId: 's1', state: 'skipped', originalAmount: 6_500 }]);
    // Act
    const report = await shadowReport(ledger, platform, [PILOT], FROM, TO);
    // Assess
    expect(report.rows).toEqual([
      expect.objectContaining({ kind: 'only_pixel', externalId: 's1', pixelAmount: 7_000, currency: 'USD' }),
    ]);
    expect(report.atStake).toEqual({ USD: 7_000 });
  });
});

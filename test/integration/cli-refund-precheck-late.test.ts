import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ledgerKey, type OrderRecord, type RefundRecord } from '../../shared/ledger.ts';
import { localStackForCli, runCli } from '../support/cli.ts';

/**
 * `connector refund --csv` checks every row against the ledger before it sends one, with the door's
 * rules: a late refund (the platform could no longer apply it; the buyer got it back) takes from what
 * is left of its order there too, so a file cannot refund more than an order's amount.
 */

const local = localStackForCli();
const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });
const program = () => local.stack.sources.get('generic')?.program ?? '';

function csvFile(name: string, rows: readonly string[]): string {
  const path = join(local.dir, name);
  writeFileSync(path, `externalId,refundId,amount,full,source\n${rows.join('\n')}\n`);
  return path;
}

function lateRefund(refundId: string, amount: number, full: boolean): RefundRecord {
  return {
    refundId,
    amount,
    full,
    origin: 'finance',
    receivedAt: '2026-06-25T10:00:00.000Z',
    status: 'late',
    late: { because: 'locked', conversionId: 'c'.repeat(24), conversionAmount: 4_990, commission: 499 },
  };
}

/** A EUR 49.90 Generic order added and locked since, with `refund` recorded late. */
function lockedOrder(externalId: string, refund: RefundRecord): OrderRecord {
  return {
    key: ledgerKey(program(), externalId),
    program: program(),
    externalId,
    source: 'generic',
    state: 'added',
    version: 0,
    kind: 'tracking',
    conversionId: 'c'.repeat(24),
    originalAmount: 4_990,
    currentAmount: 4_990,
    currency: 'EUR',
    refunds: { [refund.refundId]: refund },
    createdAt: '2026-06-01T09:00:00.000Z',
    updatedAt: '2026-06-25T10:00:00.000Z',
  };
}

describe('connector refund --csv of orders with late refunds', () => {
  it('refuses, before sending anything, a row past what the late refund left, and one behind a late full refund', async () => {
    // Prepare: 8C01 EUR 30.00 refunded late (EUR 19.90 left); 8C02 refunded in full, late
    await local.stack.ledger.create(lockedOrder('8C01', lateRefund('RF-8C01-1', 3_000, false)));
    await local.stack.ledger.create(lockedOrder('8C02', lateRefund('RF-8C02-1', 0, true)));
    const csv = csvFile('late.csv', ['8C01,RF-8C01-2,25.00,,generic', '8C02,RF-8C02-2,1.00,,generic']);

    // Act
    const checked = await cli('refund', '--csv', csv, '--dry-run');

    // Assess
    expect(checked.code, checked.stdout + checked.stderr).toBe(2);
    expect(checked.stderr).toContain(
      'line 2: amount: EUR 25.00 is more than is left of order 8C01: EUR 19.90 remains, with late refund ' +
        'RF-8C01-1 (EUR 30.00) counted: the buyer got it back, though the platform could not apply it.',
    );
    expect(checked.stderr).toContain(
      'line 3: amount: order 8C02 is refunded in full (refund RF-8C02-1, late): a partial refund of it would ' +
        'never be applied; the full refund gives back all of it',
    );
    expect(checked.stdout).not.toContain('would POST');
  });

  it('passes a row of what the late refund left', async () => {
    // Prepare
    const csv = csvFile('late-fits.csv', ['8C01,RF-8C01-3,19.90,,generic']);

    // Act
    const checked = await cli('refund', '--csv', csv, '--dry-run');

    // Assess
    expect(checked.code, checked.stdout + checked.stderr).toBe(0);
    expect(checked.stdout).toContain('would POST');
  });
});

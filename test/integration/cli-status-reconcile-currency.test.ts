import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { localStateDir, runCli } from '../support/cli.ts';

/**
 * An order whose conversion on the platform is in another currency than the ledger's: the pixel
 * recorded it in the buyer's (presentment) currency before the connector, which adopted it when its
 * add was answered 409 (as connector versions before the worker checked the currency did; it now
 * parks such an order, test/unit/worker-adopt-currency.test.ts). 4990 minor units of USD are not
 * 4990 of EUR: status and reconcile must show each side in its own currency and call them
 * different, not "agree".
 */

let stack: LocalStack;
let state: { dir: string; remove(): void };
let program: string;
const startedAt = new Date(Date.now() - 60_000).toISOString();

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 } });
  state = localStateDir(stack);
  program = stack.sources.get('generic')?.program ?? '';
  const control = stack.sandbox!.control;
  // The pixel's conversion of order 9501: USD 49.90; the shop's order, as such a version adopted it:
  // EUR 49.90.
  const pixel = control.seedConversion({ program, externalId: '9501', amount: 4990, currency: 'USD' });
  const at = new Date().toISOString();
  const created = await stack.ledger.create({
    key: ledgerKey(program, '9501'),
    program,
    externalId: '9501',
    source: 'generic',
    state: 'added',
    version: 0,
    kind: 'tracking',
    conversionId: pixel.id,
    originalAmount: 4990,
    currentAmount: 4990,
    currency: 'EUR',
    refunds: {},
    createdAt: at,
    updatedAt: at,
  });
  if (!created) throw new Error('order 9501 is in the ledger already');
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const cli = (...argv: string[]) => runCli(argv, { cwd: state.dir });

describe('a conversion in another currency than the ledger', () => {
  it('is shown in its own currency by status, which exits 1 naming the difference', async () => {
    // Act
    const shown = await cli('status', '9501');
    const json = await cli('status', '9501', '--json');

    // Assess
    expect(shown.stdout).toMatch(/amount\s+EUR 49\.90\s+USD 49\.90/);
    expect(shown.stdout).not.toContain('✓ ledger and platform agree');
    expect(shown.stdout).toContain('✗ amount_mismatch: ledger EUR 49.90, platform USD 49.90');
    expect(shown.code).toBe(1);
    expect(JSON.parse(json.stdout).differences).toEqual([
      expect.objectContaining({ kind: 'amount_mismatch', currency: 'EUR', platformCurrency: 'USD' }),
    ]);
  });

  it('is an amount_mismatch for reconcile, with the platform amount in its own currency', async () => {
    // Act
    const table = await cli('reconcile', '--from', startedAt);
    const csv = await cli('reconcile', '--from', startedAt, '--csv');

    // Assess
    expect(table.code).toBe(1);
    expect(table.stdout).toMatch(/amount_mismatch\s+9501\s+\S+\s+added EUR 49\.90\s+pending USD 49\.90/);
    expect(csv.stdout).toContain('ledger EUR 49.90, platform USD 49.90');
  });
});

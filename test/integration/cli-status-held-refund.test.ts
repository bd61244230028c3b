import { describe, expect, it } from 'vitest';
import { localStackForCli, runCli } from '../support/cli.ts';
import { postRefund } from '../support/finance-refunds.ts';

/**
 * A refund that comes before its order is held in the ledger (state `awaiting`) until the order
 * arrives. Finance checks it with `connector status`: the refund's money is the refund's own currency
 * (the order has none yet), and the order's amounts are not known, not zero.
 */

const local = localStackForCli();
const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });

describe('connector status: a refund held for an order that has not arrived', () => {
  it('shows the refund in its own currency and no amount for the order it waits for', async () => {
    // Prepare: finance refunds USD 5.00 of order 9501, which the shop has not sent
    const answer = await postRefund(local.stack, {
      externalId: '9501',
      refundId: 'RF-9501-1',
      amount: '5.00',
      source: 'shopify',
      currency: 'USD',
    });
    await local.stack.waitForIdle();
    // Act
    const shown = await cli('status', '9501');
    // Assess
    expect(answer.status, answer.text).toBe(202);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/state\s+awaiting\s+-/);
    expect(shown.stdout).toMatch(/RF-9501-1\s+finance\s+USD 5\.00\s+pending/);
    expect(shown.stdout).toMatch(/\namount\s+-\s+-\n/);
    expect(shown.stdout).toMatch(/\noriginal amount\s+-\s+-\n/);
    expect(shown.stdout).not.toContain('currency unknown');
  });
});

import { describe, expect, it } from 'vitest';
import { emptyDir, runCli } from '../support/cli.ts';

describe('connector refund without access to the ledger', () => {
  it('does not hold a partial refund back, and says its amount was not checked against the ledger', async () => {
    // Prepare: no .local-stack.json, no LEDGER_TABLE
    const dir = emptyDir();
    try {
      // Act
      const result = await runCli(
        ['refund', '--external-id', '1001', '--refund-id', 'RF-1', '--amount', '1000.00', '--dry-run'],
        { cwd: dir.dir },
      );
      // Assess
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain('would POST /refunds');
      expect(result.stderr).toContain(
        'amounts not checked against the ledger (missing the ledger table name',
      );
      expect(result.stderr).toContain('the connector checks them when they arrive');
    } finally {
      dir.remove();
    }
  });

  it('says nothing about the ledger for full refunds, which have no amount to check', async () => {
    // Prepare
    const dir = emptyDir();
    try {
      // Act
      const result = await runCli(
        ['refund', '--external-id', '1001', '--refund-id', 'RF-2', '--full', '--dry-run'],
        {
          cwd: dir.dir,
        },
      );
      // Assess
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).not.toContain('ledger');
    } finally {
      dir.remove();
    }
  });
});

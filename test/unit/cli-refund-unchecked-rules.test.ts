import { describe, expect, it } from 'vitest';
import { emptyDir, runCli } from '../support/cli.ts';

describe('connector refund without access to the ledger', () => {
  it('sends as before, and says which of the connector’s rules about the order were not checked', async () => {
    // Prepare: no .local-stack.json, no LEDGER_TABLE
    const dir = emptyDir();
    try {
      // Act
      const result = await runCli(
        ['refund', '--external-id', '1001', '--refund-id', 'RF-1', '--amount', '10.00', '--dry-run'],
        { cwd: dir.dir },
      );
      // Assess
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain('would POST /refunds');
      expect(result.stderr).toContain(
        'amounts not checked against the ledger (missing the ledger table name',
      );
      expect(result.stderr).toContain('refunds requested and not yet applied');
      expect(result.stderr).toContain('an order being refunded in full');
      expect(result.stderr).toContain('the connector checks them when they arrive');
    } finally {
      dir.remove();
    }
  });
});

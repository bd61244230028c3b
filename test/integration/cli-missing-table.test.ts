import { describe, expect, it } from 'vitest';
import { localStackForCli, runCli } from '../support/cli.ts';

/**
 * A ledger table that does not exist (a typo in --ledger-table, the wrong region): DynamoDB answers
 * ResourceNotFoundException, "Requested resource not found", and the CLI printed just that (exit 1),
 * naming neither the table nor the setting. It is a setting to fix: exit 2, naming both.
 */
const ctx = localStackForCli();

describe('a ledger table that does not exist', () => {
  it('is a usage error naming the table and where it comes from', async () => {
    // Act
    const result = await runCli(['status', '1001', '--ledger-table', 'nope'], { cwd: ctx.dir });

    // Assess
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('error: ledger table "nope" not found');
    expect(result.stderr).toContain('--ledger-table');
  });
});

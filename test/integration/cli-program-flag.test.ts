import { describe, expect, it } from 'vitest';
import { localStackForCli, runCli } from '../support/cli.ts';

/**
 * `--program` takes the platform's program id, 24 hexadecimal characters. A mistyped one is a usage
 * error naming the flag (exit 2), before anything is read: `late-refunds` would otherwise answer
 * "✓ no late refunds" (exit 0) for a program that cannot exist, and status and reconcile would fail
 * as if the platform had (exit 1).
 */
const ctx = localStackForCli();
const cli = (...argv: string[]) => runCli(argv, { cwd: ctx.dir });

describe('--program', () => {
  it.each([
    [['late-refunds', '--program', '5ad00000000000000000010']],
    [['status', '1001', '--program', 'shopify']],
    [['reconcile', '--from', '1d', '--program', '5ad0000000000000000001O1']],
  ])('refuses a value that is no program id, naming the flag: %j', async (argv) => {
    // Act
    const result = await cli(...argv);

    // Assess
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain('error: --program: ');
    expect(result.stderr).toContain('24 hexadecimal characters');
  });
});

import { describe, expect, it } from 'vitest';
import { run } from '../../cli/program.ts';
import { localStackForCli } from '../support/cli.ts';

/**
 * `reconcile` over a long period pages through thousands of conversions and the whole ledger: on a
 * terminal it shows how far it is, as `shadow-report` does over the same list, instead of nothing
 * for minutes. The bar goes to stderr only, so the report on stdout stays the report.
 */
const ctx = localStackForCli();

describe('connector reconcile on a terminal', () => {
  it('shows a progress bar on stderr while it pages through the conversions, and none on a pipe', async () => {
    // Prepare: 1,500 conversions of the period, two pages of the list
    const program = ctx.stack.sources.get('generic')?.program ?? '';
    for (let i = 0; i < 1_500; i++) {
      ctx.stack.sandbox?.control.seedConversion({ program, externalId: `px-${i}`, amount: 1_000 });
    }
    const reconcile = async (isTTY: boolean) => {
      let stdout = '';
      let stderr = '';
      const code = await run(['reconcile', '--from', '1h', '--program', program, '--json'], {
        stdout: { write: (t: string) => (stdout += t) },
        stderr: { isTTY, write: (t: string) => (stderr += t) },
        env: {},
        cwd: ctx.dir,
      });
      return { code, stdout, stderr };
    };

    // Act
    const terminal = await reconcile(true);
    const pipe = await reconcile(false);

    // Assess
    expect(terminal.code).toBe(1);
    expect(terminal.stderr).toContain('conversions [');
    expect(terminal.stderr).toContain('1500/1500');
    expect(JSON.parse(terminal.stdout).platformConversions).toBe(1_500);
    expect(pipe.stderr).toBe('');
    expect(JSON.parse(pipe.stdout).platformConversions).toBe(1_500);
  });
});

import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { firstMessage } from '../support/child-process.ts';

/**
 * A bench stopped early (Ctrl-C, `timeout`, a cancelled job) leaves nothing behind: its temporary
 * folders go, and its worker instances, forked with an IPC channel, exit once their parent is gone
 * instead of polling dead emulators for ever, on the cores the next run measures with. Both helpers
 * are run here in a process of their own, as the bench and its instances run them.
 */
const HELPERS = new URL('../bench/leftovers.ts', import.meta.url).href;
const dir = mkdtempSync(join(tmpdir(), 'bench-leftovers-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function script(name: string, body: string): string {
  const file = join(dir, name);
  writeFileSync(file, `import { exitWithParent, scratchDir } from ${JSON.stringify(HELPERS)};\n${body}\n`);
  return file;
}

function exit(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null)
      resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

describe('a bench stopped early', () => {
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
  ] as const) {
    it(`removes its temporary folders on ${signal} and exits with ${code}`, async () => {
      const child = fork(
        script(
          `scratch-${signal}.ts`,
          "const d = scratchDir('bench-x-'); process.send?.(d); setInterval(() => {}, 1000);",
        ),
        { stdio: 'ignore' },
      );
      const scratch = String(await firstMessage(child));
      expect(existsSync(scratch)).toBe(true);
      child.kill(signal);
      expect(await exit(child)).toEqual({ code, signal: null });
      expect(existsSync(scratch)).toBe(false);
    });
  }

  it('removes them on a normal exit too', async () => {
    const child = fork(script('scratch-exit.ts', "process.send?.(scratchDir('bench-x-'));"), {
      stdio: 'ignore',
    });
    const scratch = String(await firstMessage(child));
    expect(await exit(child)).toEqual({ code: 0, signal: null });
    expect(existsSync(scratch)).toBe(false);
  });

  it('takes its worker instances with it: an instance exits once its IPC channel closes', async () => {
    const child = fork(
      script('instance.ts', "exitWithParent(); process.send?.('ready'); setInterval(() => {}, 1000);"),
      { stdio: 'ignore' },
    );
    expect(await firstMessage(child)).toBe('ready');
    child.disconnect(); // what the parent's death does to the channel
    expect(await exit(child)).toEqual({ code: 1, signal: null });
  });
});

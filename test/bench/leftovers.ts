import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * What a bench stopped early (Ctrl-C, `timeout`, a cancelled job) leaves behind: nothing. Without
 * these, a killed bench left its worker instances running (reparented, polling emulators that were
 * gone, on the cores the next run measures with) and its bundles in the temporary folder.
 */

const scratch = new Set<string>();
/** The exit and signal handlers below are in place (once per process). */
let handlersInstalled = false;

/** A temporary folder, removed when this process exits: normally, or on SIGINT, SIGTERM or SIGHUP. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  scratch.add(dir);
  if (!handlersInstalled) {
    handlersInstalled = true;
    process.once('exit', () => {
      for (const path of scratch) rmSync(path, { recursive: true, force: true });
    });
    // A handler replaces Node's default (exit at once, with no 'exit' event): exit as the shell
    // expects (128 + the signal's number), which runs the removal above.
    for (const [signal, code] of [
      ['SIGINT', 130],
      ['SIGTERM', 143],
      ['SIGHUP', 129],
    ] as const)
      process.once(signal, () => process.exit(code));
  }
  return dir;
}

/**
 * For a process forked with an IPC channel (a worker instance): exit once the channel closes,
 * which is what the parent's exit, however it ends, does to it.
 */
export function exitWithParent(): void {
  process.once('disconnect', () => process.exit(1));
}

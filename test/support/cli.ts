import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { type LocalStack, localState } from '../../infra/local/stack.ts';
import { run } from '../../shared/cli/program.ts';

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CliRunOptions {
  /** Directory searched for `.local-stack.json`. */
  readonly cwd: string;
  /** The whole environment of the command (nothing leaks in from the test process). */
  readonly env?: Record<string, string>;
  /** Text typed at a prompt; without it there is no stdin. */
  readonly input?: string;
  readonly now?: () => Date;
}

/** Runs `connector <argv>` in process, capturing stdout and stderr (neither is a TTY). */
export async function runCli(argv: readonly string[], options: CliRunOptions): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const code = await run(argv, {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    ...(options.input === undefined ? {} : { stdin: Readable.from([options.input]) }),
    env: options.env ?? {},
    cwd: options.cwd,
    ...(options.now ? { now: options.now } : {}),
  });
  return { code, stdout, stderr };
}

/** A temporary directory holding the `.local-stack.json` that `npm start` would write for `stack`. */
export function localStateDir(stack: LocalStack): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'connector-cli-'));
  writeFileSync(join(dir, '.local-stack.json'), JSON.stringify(localState(stack)));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** An empty directory: no local state file. */
export function emptyDir(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'connector-cli-empty-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

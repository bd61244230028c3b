import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect } from 'vitest';
import type { CliIo } from '../../cli/io.ts';
import { run } from '../../cli/program.ts';
import { type LocalStack, localState, startLocalStack } from '../../infra/local/stack.ts';
import { LOCAL_STATE_FILE } from '../../local/defaults.ts';
import { CLICK } from './events.ts';

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
  /** The command's waits (`connector refund`'s retries): asked of this instead of a timer. */
  readonly sleep?: CliIo['sleep'];
  /** Draws in [0, 1) for the command's jitter, instead of Math.random. */
  readonly random?: () => number;
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
    ...(options.sleep ? { sleep: options.sleep } : {}),
    ...(options.random ? { random: options.random } : {}),
  });
  return { code, stdout, stderr };
}

/** A temporary directory holding the `.local-stack.json` that `npm start` would write for `stack`. */
export function localStateDir(stack: LocalStack): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'connector-cli-'));
  writeFileSync(join(dir, LOCAL_STATE_FILE), JSON.stringify(localState(stack)));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** An empty directory: no local state file. */
export function emptyDir(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'connector-cli-empty-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

const BIN = fileURLToPath(new URL('../../bin/connector.ts', import.meta.url));

export interface CliProcessResult extends CliResult {
  /** The signal that ended the process, if one did. */
  readonly signal: NodeJS.Signals | null;
}

export interface CliProcess {
  readonly done: Promise<CliProcessResult>;
  /** SIGKILL: no handler runs, as when a laptop is closed or a container is stopped hard. */
  kill(): Promise<void>;
}

/**
 * Runs `npx connector <argv>` as its own process (the `bin/connector.ts` a user runs, on this Node),
 * with exactly `env` as its environment: AWS settings such as AWS_ENDPOINT_URL_SQS reach the SDK as
 * they would from a shell.
 */
export function spawnCli(
  argv: readonly string[],
  options: { cwd: string; env?: Record<string, string> },
): CliProcess {
  const child = spawn(process.execPath, [BIN, ...argv], {
    cwd: options.cwd,
    env: options.env ?? {},
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const done = new Promise<CliProcessResult>((resolve) =>
    child.once('close', (code, signal) => resolve({ code: code ?? -1, signal, stdout, stderr })),
  );
  return {
    done,
    kill: async () => {
      child.kill('SIGKILL');
      await done;
    },
  };
}

/**
 * The local stack for one test file (started before its tests, closed after), with its state file in
 * a temporary directory that the CLI runs in, as an operator's checkout would hold it.
 */
export function localStackForCli(): { readonly stack: LocalStack; readonly dir: string } {
  let stack: LocalStack | undefined;
  let state: { dir: string; remove(): void } | undefined;
  beforeAll(async () => {
    stack = await startLocalStack({ port: 0, sandbox: { port: 0 } });
    state = localStateDir(stack);
  });
  afterAll(async () => {
    state?.remove();
    await stack?.close();
  });
  return {
    get stack() {
      if (!stack) throw new Error('the local stack is started in beforeAll');
      return stack;
    },
    get dir() {
      if (!state) throw new Error('the state directory is made in beforeAll');
      return state.dir;
    },
  };
}

const BUYER_IP = '203.0.113.7';

/**
 * `connector send <platform>` of the built-in sample as order `orderId`, tracked by a click id and the
 * buyer's IP, run where `local` keeps its state; then the stack idle: the order is a conversion.
 */
export async function placeSampleOrder(
  local: { readonly stack: LocalStack; readonly dir: string },
  platform: string,
  orderId: string,
): Promise<void> {
  const argv = ['send', platform, '--order-id', orderId, '--click-id', CLICK, '--ip', BUYER_IP];
  const sent = await runCli(argv, { cwd: local.dir });
  expect(sent.code, sent.stderr).toBe(0);
  await local.stack.waitForIdle();
}

/**
 * `connector status 1001` against the given ledger endpoint and platform, with no local state: the
 * arguments the tests of the CLI's outbound calls (timeouts, errors quoted) run it with.
 */
export function statusOf1001(program: string, dynamoEndpoint: string, affiliateUrl: string): string[] {
  return [
    'status',
    '1001',
    '--program',
    program,
    '--ledger-table',
    'connector-ledger',
    '--dynamodb-endpoint',
    dynamoEndpoint,
    '--affiliate-url',
    affiliateUrl,
  ];
}

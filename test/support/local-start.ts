import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { LOCAL_SECRETS } from '../../local/defaults.ts';
import { genericWebhook, post } from './webhooks.ts';

/**
 * `npm start` (infra/local/start.ts) as a child process, the way a user runs it, on ports of its own
 * (PORT and SANDBOX_PORT 0) and with nothing of this process's environment but PATH.
 */

const START = fileURLToPath(new URL('../../infra/local/start.ts', import.meta.url));

/** The line that ends the banner: the stack serves, its state file is written. */
const READY = 'Ctrl-C stops everything.';

export interface LocalStart {
  readonly child: ChildProcessWithoutNullStreams;
  /** How it ended: an exit code, or the signal that killed it. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything it printed so far, stdout and stderr together. */
  output(): string;
}

/** A started `npm start` whose banner came: the URLs it printed. */
export interface LocalServing extends LocalStart {
  readonly url: string;
  readonly platformUrl: string;
}

/** Spawns `npm start` in `cwd` with `env`; `--quiet` unless `quiet` is false. */
export function spawnLocalStart(
  cwd: string,
  env: Record<string, string> = {},
  { quiet = true }: { quiet?: boolean } = {},
): LocalStart {
  const child = spawn(process.execPath, [START, ...(quiet ? ['--quiet'] : [])], {
    cwd,
    env: { PATH: process.env['PATH'] ?? '', PORT: '0', SANDBOX_PORT: '0', ...env },
    stdio: 'pipe',
  });
  let out = '';
  const collect = (chunk: Buffer) => {
    out += chunk.toString();
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, output: () => out };
}

/** Resolves once the banner is out, with the URLs it names; rejects with the output if it exits first. */
export function untilServing(run: LocalStart): Promise<LocalServing> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const out = run.output();
      if (!out.includes(READY)) return;
      run.child.stdout.off('data', check);
      run.child.stderr.off('data', check);
      resolve({
        ...run,
        url: /ingest API\s+(\S+)/.exec(out)?.[1] ?? '',
        platformUrl: /platform\s+(\S+)/.exec(out)?.[1] ?? '',
      });
    };
    run.child.stdout.on('data', check);
    run.child.stderr.on('data', check);
    check();
    void run.exited.then(() => reject(new Error(`npm start exited:\n${run.output()}`)));
  });
}

/**
 * Resolves once `text` appears in what `npm start` printed (stdout or stderr), as it is printed;
 * rejects with the output if the process exits first. Match ASCII: a chunk may end inside a
 * multibyte character.
 */
export function untilPrinted(run: LocalStart, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (!run.output().includes(text)) return;
      run.child.stdout.off('data', check);
      run.child.stderr.off('data', check);
      resolve();
    };
    run.child.stdout.on('data', check);
    run.child.stderr.on('data', check);
    check();
    // 'close', not 'exit': what it printed last may still be in its pipes when it exits.
    const gone = () => {
      check();
      reject(new Error(`npm start exited before printing "${text}":\n${run.output()}`));
    };
    if (run.child.stdout.closed && run.child.stderr.closed) gone();
    else run.child.once('close', gone);
  });
}

/** The click id of `postLocalOrder`'s orders. */
export const LOCAL_ORDER_CLICK = 'a1b2c3d4e5f6a7b8c9d0e1f2';

/**
 * Posts a signed generic order of EUR 19.90 (`orderId`, tracked by `LOCAL_ORDER_CLICK`) to a running
 * `npm start`, signed with its default generic secret; resolves with the answer's status.
 */
export async function postLocalOrder(url: string, orderId: string): Promise<number> {
  const body = JSON.stringify({
    type: 'order',
    orderId,
    amount: '19.90',
    currency: 'EUR',
    clickIds: [LOCAL_ORDER_CLICK],
    buyerIp: '198.51.100.4',
  });
  const answer = await post(
    `${url}/webhooks/generic`,
    genericWebhook(body, LOCAL_SECRETS.GENERIC_WEBHOOK_SECRET),
  );
  return answer.status;
}

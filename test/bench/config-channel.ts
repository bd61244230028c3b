import { type ChildProcess, type ForkOptions, fork } from 'node:child_process';

/**
 * How the bench hands the processes it forks their settings: over the IPC channel, not on their
 * command line. The settings carry secrets (a worker instance's platform token and legacy API key,
 * for the env secret store; the ingest load generator's webhook signing secret), and a process's
 * command line is anyone's to read on the machine (`ps`, /proc/<pid>/cmdline), where its IPC
 * messages are not. Until 2026-11-27 both took them as their first argument.
 */

interface ConfigMessage {
  readonly type: 'config';
  readonly config: unknown;
}

function isConfigMessage(message: unknown): message is ConfigMessage {
  return typeof message === 'object' && message !== null && (message as { type?: unknown }).type === 'config';
}

/**
 * Forks `module` with no arguments and sends it `config`, its first message, at once: Node holds a
 * message the child has no listener for yet until it adds one (nodejs/node#41221, for ES module
 * children that load for a while before they listen), so no handshake is needed first.
 */
export function forkWithConfig(module: string, config: unknown, options: ForkOptions = {}): ChildProcess {
  const child = fork(module, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], ...options });
  child.send({ type: 'config', config } satisfies ConfigMessage);
  return child;
}

/** In the forked process: the settings `forkWithConfig` sent. Rejects at once without an IPC channel. */
export function receiveConfig<T>(): Promise<T> {
  return new Promise((resolve, reject) => {
    if (process.send === undefined) {
      reject(
        new Error('this process takes its settings from the bench over IPC: run it with `npm run bench`'),
      );
      return;
    }
    const onMessage = (message: unknown) => {
      if (!isConfigMessage(message)) return;
      process.off('message', onMessage);
      resolve(message.config as T);
    };
    process.on('message', onMessage);
  });
}

/**
 * Sends `message` (if any) to `child` and resolves its first answer of type `type`; rejects if the
 * child exits with a failure first, naming it as `who`.
 */
export function ask<T>(
  child: ChildProcess,
  type: string,
  message?: unknown,
  who = 'a bench instance',
): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: { type?: string; report?: unknown }) => {
      if (m.type !== type) return;
      child.off('message', onMessage);
      resolve(m.report as T);
    };
    child.on('message', onMessage);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`${who} exited with ${code}`));
    });
    if (message !== undefined) child.send(message as object);
  });
}

import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ForeignLoad } from '../../sandbox/rate-limit.ts';
import type { CallCount, SandboxOptions, StoredConversion } from '../../sandbox/types.ts';
import { ask, forkWithConfig } from './config-channel.ts';
import type { SandboxProcessConfig, SandboxProcessCpu, SandboxProcessReady } from './sandbox-process.ts';

/**
 * The multi-instance drain's side of the sandbox in its own process (sandbox-process.ts): where it
 * listens, its credentials and seed, and what the drain asks of it, through the sandbox's own
 * control routes (`/_sandbox/…`, the routes a user of `npm run sandbox` has) and its CPU over IPC.
 */
export interface SandboxProcess extends SandboxProcessReady {
  setForeignLoad(load: ForeignLoad): Promise<void>;
  calls(): Promise<Record<string, CallCount>>;
  conversions(): Promise<StoredConversion[]>;
  /** Starts counting its CPU (and profiling it, if started with `profile`) from now. */
  cpuStart(): Promise<void>;
  /** Its CPU since `cpuStart`, and where it went with `profile`; ends the profile. */
  cpu(): Promise<SandboxProcessCpu>;
  close(): Promise<void>;
}

/** Control calls are local and small: a sandbox that takes this long has hung. */
const CONTROL_TIMEOUT_MS = 30_000;
const WHO = 'the bench sandbox';

async function control<T>(url: string, method: 'GET' | 'PUT', body?: unknown): Promise<T> {
  const response = await fetch(url, {
    method,
    signal: AbortSignal.timeout(CONTROL_TIMEOUT_MS),
    ...(body === undefined
      ? {}
      : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  if (!response.ok)
    throw new Error(`${WHO}: ${method} ${url} answered ${response.status}: ${await response.text()}`);
  return (await response.json()) as T;
}

/** Forks the sandbox with `options` in a process of its own and resolves once it listens. */
export async function startSandboxProcess(options: SandboxOptions, profile = false): Promise<SandboxProcess> {
  const module = fileURLToPath(new URL('./sandbox-process.ts', import.meta.url));
  const child: ChildProcess = forkWithConfig(module, { options, profile } satisfies SandboxProcessConfig);
  let ready: SandboxProcessReady;
  try {
    ready = await ask<SandboxProcessReady>(child, 'ready', undefined, WHO);
  } catch (error) {
    child.kill();
    throw error;
  }
  const at = (path: string) => `${ready.url}/_sandbox/${path}`;
  return {
    ...ready,
    async setForeignLoad(load) {
      await control(at('foreign-load'), 'PUT', load);
    },
    calls: async () => (await control<{ calls: Record<string, CallCount> }>(at('calls'), 'GET')).calls,
    conversions: async () =>
      (await control<{ conversions: StoredConversion[] }>(at('conversions'), 'GET')).conversions,
    async cpuStart() {
      await ask(child, 'cpu-started', { type: 'cpu-start' }, WHO);
    },
    cpu: () => ask<SandboxProcessCpu>(child, 'cpu', { type: 'cpu' }, WHO),
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.send({ type: 'stop' });
      const timer = setTimeout(() => child.kill(), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

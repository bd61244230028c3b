import { startSandbox } from '../../sandbox/server.ts';
import type { SandboxOptions, SeedIds } from '../../sandbox/types.ts';
import { receiveConfig } from './config-channel.ts';
import { exitWithParent } from './leftovers.ts';
import { type CpuProfile, projectShares, startProfiler } from './profile.ts';

/**
 * The sandbox of the multi-instance drain, in a process of its own (`sandbox-host.ts` starts it), as
 * the platform is its own server for the deployed workers. In the bench's process it shared one event
 * loop with fauxqs and dynalite: while ten workers booted, their receives and ledger writes held up
 * its answers, so the platform's round trip at the start of a drain measured 200 to 460 ms at the
 * median against the 50 to 150 ms it is set to (2026-11-27, on a machine twice as slow as the one
 * before). Started with IPC (`forkWithConfig`), which sends it `SandboxProcessConfig` first; it says
 * `ready` with where it listens, and answers `cpu` with its CPU time (and its profile's shares, when
 * asked to profile) until `stop`.
 */
export interface SandboxProcessConfig {
  readonly options: SandboxOptions;
  /** Run V8's profiler from `cpu-start` to `cpu`, and answer with the busy time by owner. */
  readonly profile: boolean;
}

export interface SandboxProcessReady {
  readonly url: string;
  readonly token: string;
  readonly legacy: { readonly userCode: string; readonly apiKey: string };
  readonly seed: SeedIds;
}

export interface SandboxProcessCpu {
  /** CPU time of this process since `cpu-start`, user + system. */
  readonly cpuMs: number;
  /** With `profile`: its busy CPU by package or project file, largest first (share 0–1). */
  readonly byOwner?: [string, number][];
}

async function main(): Promise<void> {
  exitWithParent();
  const config = await receiveConfig<SandboxProcessConfig>();
  const sandbox = await startSandbox(config.options);
  let from = process.cpuUsage();
  let profiler: { stop(): Promise<CpuProfile> } | undefined;
  const ready: SandboxProcessReady = {
    url: sandbox.url,
    token: sandbox.token,
    legacy: sandbox.legacy,
    seed: sandbox.seed,
  };
  process.on('message', (message: { type?: string }) => {
    if (message.type === 'cpu-start') {
      void (async () => {
        if (config.profile) profiler = await startProfiler();
        from = process.cpuUsage();
        process.send?.({ type: 'cpu-started' });
      })();
    }
    if (message.type === 'cpu') {
      const used = process.cpuUsage(from);
      void (async () => {
        const profile = await profiler?.stop();
        profiler = undefined;
        const report: SandboxProcessCpu = {
          cpuMs: (used.user + used.system) / 1000,
          ...(profile === undefined ? {} : { byOwner: projectShares(profile) }),
        };
        process.send?.({ type: 'cpu', report });
      })();
    }
    if (message.type === 'stop') void sandbox.close().then(() => process.exit(0));
  });
  process.send?.({ type: 'ready', report: ready });
}

await main();

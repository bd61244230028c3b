import type { ChildProcess } from 'node:child_process';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleEntryAs, codeFileName } from '../../infra/bundle-report.ts';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ask, forkWithConfig } from './config-channel.ts';
import type { InstanceConfig, InstanceReport } from './instance.ts';
import { lambdaProcessEnv } from './lambda-process.ts';
import { callsByPhase, type DrainPhase, drainPhases, type PhaseCalls } from './phases.ts';
import { type CpuProfile, projectShares, startProfiler } from './profile.ts';
import { startSandboxProcess } from './sandbox-host.ts';
import { check, LIMIT_PER_SECOND, PLATFORM_FAULTS, postBurst } from './workload.ts';

/**
 * The bench's multi-instance drain, the proof of issue 16: one row is a fleet of worker processes
 * (instance.ts, bundled as the worker function is) draining one burst through the emulators and
 * the sandbox (in a process of its own, sandbox-process.ts), and what the row measured. run.ts runs
 * the rows and prints them; test/integration/bench-multi-drain.test.ts runs a small one.
 */

export interface MultiDrainResult {
  /** The processes booted before any polled (`--warm`), not one after another as the drain ran. */
  readonly warm: boolean;
  readonly pacing: 'static' | 'adaptive';
  readonly instances: number;
  /** Batches each instance holds at once, and their size (`test/bench/fleet.ts`). */
  readonly pollers: number;
  readonly batchSize: number;
  /** Requests per second a foreign client of the same token takes on conversions.add. */
  readonly foreignPerSecond: number;
  readonly orders: number;
  readonly drainSeconds: number;
  readonly addsPerSecond: number;
  readonly calls: number;
  readonly share429: number;
  readonly lost: number;
  readonly duplicated: number;
  readonly wrongAmounts: number;
  /**
   * Where the time went. Per route (info, add, update): the mean wait the client-side limiter imposed
   * per attempt and the mean platform round trip. Adds second by second from the first add, and the
   * mean over the full seconds after the first three (the ramp) and before the last (the tail).
   * CPU of the instances, of the parent (fauxqs, dynalite) and of the sandbox as a share of the cores
   * over the drain.
   */
  readonly routes: Record<
    string,
    { readonly calls: number; readonly waitMs: number; readonly platformMs: number }
  >;
  readonly addsBySecond: number[];
  readonly steadyAddsPerSecond: number;
  /**
   * The start and the tail: per instance, its adds, how long after the drain's first add it made its
   * own first one (the processes boot one after another on the shared cores), and how long before
   * the drain's last add it made its own last one (an instance paced below its siblings still holds
   * messages when they run dry).
   */
  readonly instanceAdds: number[];
  readonly instanceStartS: number[];
  readonly instanceDoneBeforeEndS: number[];
  /** The start, the middle and the tail against the route's budget, its limit less the foreign client (`test/bench/phases.ts`). */
  readonly phases: DrainPhase[];
  /**
   * The instances' calls to DynamoDB (the ledger, the pacing record: dynalite) and to SQS (fauxqs)
   * by phase, with the mean time each took: both emulators run in the bench's process, on the
   * cores the instances share, and answer far slower while the instances start than later on. A
   * receive from an empty queue long-polls (up to a second): the tail's SQS times are those.
   */
  readonly awsByPhase: { readonly dynamodb: PhaseCalls[]; readonly sqs: PhaseCalls[] };
  readonly cpuInstances: number;
  readonly cpuParent: number;
  readonly cpuSandbox: number;
  /** With `--profile`: the workers' busy CPU by package or project file, largest first (share 0–1). */
  readonly cpuByOwner?: [string, number][];
  /** With `--profile`: the same for this process over the drain (fauxqs, dynalite). */
  readonly parentCpuByOwner?: [string, number][];
  /** With `--profile`: the same for the sandbox's process over the drain. */
  readonly sandboxCpuByOwner?: [string, number][];
}

/** Counts of sorted epoch-ms `times` per whole second from the first. */
function perSecond(times: readonly number[]): number[] {
  const first = times[0];
  if (first === undefined) return [];
  const counts: number[] = [];
  for (const t of times) {
    const i = Math.floor((t - first) / 1000);
    while (counts.length <= i) counts.push(0);
    counts[i] = (counts[i] ?? 0) + 1;
  }
  return counts;
}

/** Per route over every instance: attempts, mean limiter wait and mean round trip per attempt, ms. */
function routeProfiles(reports: readonly InstanceReport[]): MultiDrainResult['routes'] {
  const out: Record<string, { calls: number; waitMs: number; platformMs: number }> = {};
  const names = new Set(reports.flatMap((r) => Object.keys(r.routes)));
  for (const name of names) {
    const each = reports.flatMap((r) => (r.routes[name] ? [r.routes[name]] : []));
    const calls = each.reduce((n, p) => n + p.requests, 0);
    const per = (pick: (p: (typeof each)[number]) => number) =>
      calls > 0 ? each.reduce((n, p) => n + pick(p), 0) / calls : 0;
    out[name] = { calls, waitMs: per((p) => p.waitMs), platformMs: per((p) => p.requestMs) };
  }
  return out;
}

/**
 * Bundles instance.ts with the worker function's esbuild settings into `dir`: each instance loads
 * one module, as a Lambda container loads the worker's bundle, instead of a few hundred TypeScript
 * sources through Node's type stripping (a second of CPU and more per process, which ten processes
 * booting together took from the drain's first seconds on the shared cores).
 */
export async function bundleInstance(dir: string, profile: boolean): Promise<string> {
  const outfile = join(dir, codeFileName().replace(/^index/, 'instance'));
  await bundleEntryAs(
    'worker',
    fileURLToPath(new URL('./instance.ts', import.meta.url)),
    outfile,
    // A profile names a line of the bundle: unminified, each module keeps the comment naming its path.
    profile ? { minify: false, sourcemap: false } : {},
  );
  return outfile;
}

/** One row of the multi-instance drain: its pacing, its fleet and its workload. */
export interface MultiDrainOptions {
  readonly pacing: 'static' | 'adaptive';
  readonly instances: number;
  readonly orders: number;
  readonly pollers: number;
  readonly batchSize: number;
  readonly initialRatePerSecond: number;
  readonly foreignPerSecond: number;
  readonly warm: boolean;
  /** The program each instance runs: the bundle of instance.ts (`bundleInstance`). */
  readonly instanceModule: string;
  /** Where each instance writes its V8 CPU profile (`--cpu-prof`); none without `--profile`. */
  readonly profileDir?: string;
}

/**
 * The deployed drain: `instances` worker processes that share nothing but the queue, the ledger
 * and the platform token, as Lambda containers, holding `pollers` batches of `batchSize` each
 * (`fleetShape`).
 * `static`: each at 80% of the limit ÷ instances (the stack before adaptive pacing). `adaptive`:
 * each from `initialRatePerSecond` up to the limit, paced by the platform's headers. `warm`: every
 * process boots before any polls (containers already warm when the backlog arrives), so no
 * process's boot takes the shared cores from the drain.
 */
export async function multiDrain(options: MultiDrainOptions): Promise<MultiDrainResult> {
  const { pacing, instances, orders, pollers, batchSize, foreignPerSecond, warm } = options;
  const sandbox = await startSandboxProcess(
    { port: 0, faults: PLATFORM_FAULTS },
    options.profileDir !== undefined,
  );
  const children: ChildProcess[] = [];
  let parentProfiler: { stop(): Promise<CpuProfile> } | undefined;
  let stack: LocalStack | undefined;
  try {
    stack = await startLocalStack({
      port: 0,
      sandbox: { external: { url: sandbox.url, token: sandbox.token } },
      env: { PROGRAM_ID: sandbox.seed.programs[0], RULE_ID: sandbox.seed.rules[0] },
      pollers: 0,
      autoPoll: false,
      emulators: { visibilityTimeoutSeconds: 120 },
    });
    const prefix = `${pacing}-${instances}-${Date.now()}`;
    await postBurst(stack, orders, prefix);
    const add = stack.sources.get('generic');
    const share = Math.max(1, Math.floor((LIMIT_PER_SECOND * 0.8) / instances));
    // The settings the stack gives the worker function (infra/connector-stack.ts), pointing at the
    // emulators and the sandbox; the secrets ride along for the env secret store.
    const env = {
      SOURCES: JSON.stringify(add ? [{ ...add }] : []),
      QUEUE_URL: stack.emulators.queueUrl,
      DLQ_URL: stack.emulators.dlqUrl,
      LEDGER_TABLE: stack.emulators.tableName,
      ...(pacing === 'adaptive' ? { PACING_TABLE: stack.emulators.pacingTableName } : {}),
      AFFILIATE_BASE_URL: sandbox.url,
      AFFILIATE_TOKEN_SECRET: 'AFFILIATE_TOKEN',
      AFFILIATE_TOKEN: sandbox.token,
      LEGACY_BASE_URL: sandbox.url,
      LEGACY_CREDENTIALS_SECRET: 'LEGACY_CREDENTIALS',
      LEGACY_CREDENTIALS: `${sandbox.legacy.userCode}:${sandbox.legacy.apiKey}`,
      ...(pacing === 'static'
        ? { AFFILIATE_RATE_PER_SECOND: String(share) }
        : {
            AFFILIATE_RATE_PER_SECOND: String(LIMIT_PER_SECOND),
            AFFILIATE_INITIAL_RATE_PER_SECOND: String(options.initialRatePerSecond),
          }),
    };
    const config: InstanceConfig = {
      sqsEndpoint: stack.emulators.sqsEndpoint,
      dynamoEndpoint: stack.emulators.dynamoEndpoint,
      queueName: stack.emulators.queueName,
      env,
      pollers,
      batchSize,
      startOnGo: warm,
    };
    parentProfiler = options.profileDir === undefined ? undefined : await startProfiler();
    await sandbox.cpuStart();
    const started = Date.now();
    const parentCpu = process.cpuUsage();
    if (foreignPerSecond > 0)
      await sandbox.setForeignLoad({ route: '/advertiser/conversions.add', perSecond: foreignPerSecond });
    for (let i = 0; i < instances; i++) {
      // Its settings, secrets included, go over IPC, not on its command line (`ps` shows that).
      const child = forkWithConfig(options.instanceModule, config, {
        // Node as Lambda starts the worker (no NODE_OPTIONS), the bundle's map beside it.
        env: lambdaProcessEnv(process.env),
        execArgv: [
          ...process.execArgv,
          ...(options.profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${options.profileDir}`]),
        ],
      });
      children.push(child);
    }
    await Promise.all(children.map((c) => ask(c, 'ready')));
    if (warm) for (const child of children) child.send({ type: 'go' });
    await stack.waitForIdle(15 * 60_000);
    const drainSeconds = (Date.now() - started) / 1000;
    const parent = process.cpuUsage(parentCpu);
    const sandboxCpu = await sandbox.cpu();
    const parentProfile = await parentProfiler?.stop();
    const reports = await Promise.all(
      children.map((c) => ask<InstanceReport>(c, 'report', { type: 'stop' })),
    );
    const adds = reports.flatMap((r) => r.adds).sort((a, b) => a - b);
    const span = adds.length > 1 ? ((adds.at(-1) ?? 0) - (adds[0] ?? 0)) / 1000 : 0;
    const calls = Object.values(await sandbox.calls());
    const total = calls.reduce((n, c) => n + c.total, 0);
    const platform429 = calls.reduce((n, c) => n + (c.byStatus['429'] ?? 0), 0);
    const coreSeconds = cpus().length * drainSeconds * 1000;
    const addsBySecond = perSecond(adds);
    const steady = addsBySecond.slice(3, -1);
    return {
      warm,
      pacing,
      instances,
      pollers,
      batchSize,
      foreignPerSecond,
      orders,
      drainSeconds,
      addsPerSecond: span > 0 ? (adds.length - 1) / span : 0,
      calls: total,
      share429: total > 0 ? platform429 / total : 0,
      ...check(await sandbox.conversions(), orders, prefix),
      routes: routeProfiles(reports),
      addsBySecond,
      instanceAdds: reports.map((r) => r.adds.length),
      instanceStartS: reports.map((r) => ((r.adds[0] ?? 0) - (adds[0] ?? 0)) / 1000),
      instanceDoneBeforeEndS: reports.map((r) => ((adds.at(-1) ?? 0) - (r.adds.at(-1) ?? 0)) / 1000),
      phases: drainPhases(
        reports.map((r) => r.adds),
        LIMIT_PER_SECOND - foreignPerSecond,
      ),
      awsByPhase: {
        dynamodb: callsByPhase(
          reports.map((r) => r.adds),
          reports.flatMap((r) => r.awsCalls.dynamodb),
        ),
        sqs: callsByPhase(
          reports.map((r) => r.adds),
          reports.flatMap((r) => r.awsCalls.sqs),
        ),
      },
      steadyAddsPerSecond: steady.length > 0 ? steady.reduce((a, b) => a + b, 0) / steady.length : 0,
      cpuInstances: reports.reduce((n, r) => n + r.cpuMs, 0) / coreSeconds,
      cpuParent: (parent.user + parent.system) / 1000 / coreSeconds,
      cpuSandbox: sandboxCpu.cpuMs / coreSeconds,
      ...(parentProfile === undefined ? {} : { parentCpuByOwner: projectShares(parentProfile) }),
      ...(sandboxCpu.byOwner === undefined ? {} : { sandboxCpuByOwner: sandboxCpu.byOwner }),
    };
  } finally {
    await parentProfiler?.stop().catch(() => undefined);
    // An instance writes its profile as it exits, after its report: wait for that (a bounded wait).
    if (options.profileDir !== undefined) await exited(children, 15_000);
    for (const child of children) if (child.exitCode === null) child.kill();
    await stack?.close();
    await sandbox.close();
  }
}

/** Resolves once every child has exited, or after `ms`. */
async function exited(children: readonly ChildProcess[], ms: number): Promise<void> {
  const each = children.map((c) =>
    c.exitCode !== null || c.signalCode !== null
      ? undefined
      : new Promise<void>((resolve) => c.once('exit', () => resolve())),
  );
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(each),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}

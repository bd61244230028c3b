import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Command, InvalidArgumentError, Option } from 'commander';
import { bundleFunction, codeFileName } from '../../infra/bundle-report.ts';
import type { ConnectorFunctionName } from '../../infra/connector-stack.ts';
import { isWorkerBatchSize, WORKER_DEFAULTS } from '../../infra/deploy-config.ts';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { runBaseline } from './baseline.ts';
import { forkWithConfig } from './config-channel.ts';
import { fleetShape } from './fleet.ts';
import type { IngestLoadAnswer, IngestLoadConfig } from './ingest-load.ts';
import { importTimes } from './lambda-process.ts';
import { scratchDir } from './leftovers.ts';
import { bundleInstance, type MultiDrainResult, multiDrain } from './multi-drain.ts';
import { callsLine, phasesLine } from './phases.ts';
import {
  addBusy,
  bundleOwner,
  busyByOwner,
  type CpuProfile,
  type ImportPhase,
  type ImportPhases,
  importPhases,
  ingestParts,
  mappedBundleOwner,
  moduleStarts,
  projectShares,
  shares,
  startProfiler,
} from './profile.ts';
import { CLICK, check, LIMIT_PER_SECOND, PLATFORM_FAULTS, postBurst } from './workload.ts';

/**
 * `npm run bench`: drain throughput against the sandbox at the platform's real limit (100 requests
 * per second per route) and 50–150 ms latency, ingest latency under autocannon, and the bundles'
 * cold-start cost; `--baseline` adds the same drain through the simplest possible connector.
 * Prints figures only, no assertions; writes reports/bench-<date>.{json,md}.
 */

interface DrainResult {
  readonly connector: string;
  readonly orders: number;
  readonly refunds: number;
  readonly postSeconds: number;
  readonly drainSeconds: number;
  readonly addsPerSecond: number;
  readonly platform429: number;
  readonly lost: number;
  readonly duplicated: number;
  readonly wrongAmounts: number;
}

export interface IngestResult {
  readonly connections: number;
  readonly seconds: number;
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  readonly errors: number;
  /** CPU of the serving process (user and system, all its threads) over the load's seconds: % of one core. */
  readonly servingCpuPercent: number;
  readonly servingCpuMicrosPerRequest: number;
  /** CPU of the load generator's process over its run: % of one core. */
  readonly loadCpuPercent: number;
  /** `--profile`: the serving process's busy time by package or project file (`projectShares`). */
  readonly servingCpuByOwner?: [string, number][];
}

interface ColdStartResult {
  readonly fn: ConnectorFunctionName;
  readonly bundleBytes: number;
  readonly gzipBytes: number;
  readonly runs: number;
  /** Each import installed the bundle's own stack formatter, which reads the map on the first stack. */
  readonly mapsStacks: boolean;
  readonly initMedianMs: number;
  readonly initMinMs: number;
  readonly initMaxMs: number;
  /** Where the import's time goes, from `--cold-profile-runs` more imports with V8's profiler on. */
  readonly profile?: ColdStartProfile;
}

interface ColdStartProfile {
  readonly runs: number;
  /** The profiled imports' median: the profiler's own cost is in it. */
  readonly importMedianMs: number;
  /** Mean ms per import by phase, largest first, each with its parts (a built-in, a package), largest first. */
  readonly phases: readonly {
    readonly phase: ImportPhase;
    readonly ms: number;
    readonly parts: readonly (readonly [string, number])[];
  }[];
}

/** V8's sampling interval for the cold start's profiles: about 500 samples of an import here. */
const COLD_PROFILE_INTERVAL_US = 200;

function queueEmpty(stack: LocalStack): boolean {
  const c = stack.emulators.counts(stack.emulators.queueName);
  return c.ready + c.inflight + c.delayed === 0;
}

async function drain(kind: 'connector' | 'baseline', orders: number, pollers: number): Promise<DrainResult> {
  const adds: number[] = [];
  const stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0, faults: PLATFORM_FAULTS },
    pollers,
    // One process's reference row: its pollers take batches of ten, as in every round before.
    batchSize: 10,
    autoPoll: false,
    client: {
      ratePerSecond: LIMIT_PER_SECOND,
      onEvent: (e) => {
        if (e.type === 'request' && e.route === 'conversions.add' && e.status === 200) adds.push(Date.now());
      },
    },
    emulators: { visibilityTimeoutSeconds: 120 },
  });
  try {
    const prefix = `${kind}-${Date.now()}`;
    const posted = Date.now();
    const refunds = await postBurst(stack, orders, prefix);
    const started = Date.now();
    const postSeconds = (started - posted) / 1000;
    if (kind === 'connector') {
      stack.startPolling();
      await stack.waitForIdle(15 * 60_000);
    } else {
      const program = stack.sources.get('generic')?.program ?? '';
      const rule = stack.sources.get('generic')?.rule ?? '';
      await runBaseline(
        {
          sqs: stack.emulators.sqs,
          queueUrl: stack.emulators.queueUrl,
          platformUrl: stack.platformUrl,
          token: stack.sandbox?.token ?? '',
          program,
          rule,
          onAdded: (_id, at) => adds.push(at),
        },
        () => queueEmpty(stack),
      );
    }
    const drainSeconds = (Date.now() - started) / 1000;
    const { lost, duplicated, wrongAmounts } = check(
      stack.sandbox?.control.conversions() ?? [],
      orders,
      prefix,
    );
    const calls = Object.values(stack.sandbox?.control.calls() ?? {});
    const platform429 = calls.reduce((n, c) => n + (c.byStatus['429'] ?? 0), 0);
    const span = adds.length > 1 ? ((adds.at(-1) ?? 0) - (adds[0] ?? 0)) / 1000 : 0;
    return {
      connector: kind === 'connector' ? `connector (${pollers} pollers)` : 'baseline (1 loop)',
      orders,
      refunds,
      postSeconds,
      drainSeconds,
      addsPerSecond: span > 0 ? (adds.length - 1) / span : 0,
      platform429,
      lost,
      duplicated,
      wrongAmounts,
    };
  } finally {
    await stack.close();
  }
}

/** The workers' busy CPU by owner, from the profiles their `--cpu-prof` wrote into `dir`. */
function profileShares(dir: string, instanceModule: string): [string, number][] {
  const starts = moduleStarts(readFileSync(instanceModule, 'utf8'));
  const bundleUrl = pathToFileURL(instanceModule).href;
  const busy = new Map<string, number>();
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
    addBusy(
      busy,
      busyByOwner(
        profile,
        bundleOwner((url) => url === bundleUrl || url === instanceModule, starts),
      ),
    );
  }
  return shares(busy);
}

/**
 * autocannon against the local stack's `POST /webhooks/generic` from a process of its own, with the
 * CPU of the serving process (the ingress server, the webhook handler and its SQS client, fauxqs)
 * and of the load generator over the run; with `profile`, V8's profiler in the serving process says
 * where its busy time went.
 */
async function ingest(seconds: number, connections: number, profile: boolean): Promise<IngestResult> {
  const stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, autoPoll: false });
  const secret = stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '';
  try {
    const config: IngestLoadConfig = { url: stack.url, secret, seconds, connections, clickId: CLICK };
    const profiler = profile ? await startProfiler() : undefined;
    const cpuAtStart = process.cpuUsage();
    // Its settings, the signing secret included, go over IPC, not on its command line.
    const child = forkWithConfig(fileURLToPath(new URL('./ingest-load.ts', import.meta.url)), config);
    const { result, loadCpuMicros, loadMs } = await new Promise<IngestLoadAnswer>((resolve, reject) => {
      child.once('message', (message) => resolve(message as IngestLoadAnswer));
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`the load generator exited with code ${code}`)));
    });
    const cpu = process.cpuUsage(cpuAtStart);
    const servingCpuMicros = cpu.user + cpu.system;
    const busy = profiler === undefined ? undefined : projectShares(await profiler.stop());
    return {
      connections,
      seconds,
      requests: result.requests.total,
      requestsPerSecond: result.requests.average,
      p50Ms: result.latency.p50,
      p99Ms: result.latency.p99,
      non2xx: result.non2xx,
      errors: result.errors + result.timeouts,
      // Over the load's own seconds: the serving process is all but idle while the generator boots.
      servingCpuPercent: servingCpuMicros / 10 / loadMs,
      servingCpuMicrosPerRequest: servingCpuMicros / Math.max(1, result.requests.total),
      loadCpuPercent: loadCpuMicros / 10 / loadMs,
      ...(busy === undefined ? {} : { servingCpuByOwner: busy }),
    };
  } finally {
    await stack.close();
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/**
 * Bundles each function as the stack does and imports the bundle, its map beside it, in a fresh
 * Node process `runs` times, started as Lambda starts it (`importTimes`): the module-initialisation
 * part of a Lambda cold start (the handlers wire their clients lazily on the first event, so the
 * import is all that runs at init). Then `profileRuns` more imports with V8's profiler on, so that the
 * report says where that time goes (`importPhases`), the bundle's packages named through esbuild's
 * whole source map.
 */
async function coldStart(runs: number, profileRuns: number): Promise<ColdStartResult[]> {
  const dir = scratchDir('bench-bundles-');
  const results: ColdStartResult[] = [];
  try {
    for (const fn of ['webhook', 'refunds', 'worker'] as const) {
      const bundle = await bundleFunction(fn);
      const file = join(dir, fn, codeFileName());
      mkdirSync(join(dir, fn), { recursive: true });
      writeFileSync(file, bundle.code);
      if (bundle.sourceMap !== undefined) writeFileSync(`${file}.map`, bundle.sourceMap);
      const { times, mapsStacks } = importTimes(file, runs);
      results.push({
        fn,
        bundleBytes: bundle.codeBytes,
        gzipBytes: bundle.gzipBytes,
        runs,
        mapsStacks,
        initMedianMs: median(times),
        initMinMs: Math.min(...times),
        initMaxMs: Math.max(...times),
        ...(profileRuns > 0 && bundle.esbuildSourceMap !== undefined
          ? { profile: profileImports(file, profileRuns, new SourceMap(JSON.parse(bundle.esbuildSourceMap))) }
          : {}),
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}

function profileImports(file: string, runs: number, map: SourceMap): ColdStartProfile {
  const { times, profiles } = importTimes(file, runs, { profileIntervalUs: COLD_PROFILE_INTERVAL_US });
  const url = pathToFileURL(file).href;
  const owner = mappedBundleOwner((u) => u === url, map);
  const phases: ImportPhases = new Map();
  for (const profile of profiles) importPhases(profile, owner, phases);
  const perImport = (us: number) => us / 1000 / Math.max(1, profiles.length);
  return {
    runs: profiles.length,
    importMedianMs: median(times),
    phases: [...phases]
      .map(([phase, parts]) => ({
        phase,
        ms: perImport([...parts.values()].reduce((a, b) => a + b, 0)),
        parts: [...parts]
          .filter(([part]) => part !== '')
          .map(([part, us]) => [part, perImport(us)] as const)
          .sort((a, b) => b[1] - a[1]),
      }))
      .sort((a, b) => b.ms - a.ms),
  };
}

const f1 = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 1 });
const kib = (bytes: number) => `${f1(bytes / 1024)} KiB`;
const trip = (m: MultiDrainResult, route: string) => {
  const r = m.routes[route];
  return r ? `${Math.round(r.waitMs)} / ${Math.round(r.platformMs)}` : '–';
};

const PHASE_LABELS: Readonly<Record<ImportPhase, string>> = {
  compile: 'V8 compiling the bundle',
  evaluation: 'running its top level',
  'built-in': "Node's built-ins",
  loader: 'the module loader (reading, decoding, linking)',
  'source map': 'reading the source map',
  'garbage collection': 'garbage collection',
  other: 'other',
};

/** A cold start's profile: `V8 compiling the bundle 38.1 · running its top level 27.3 (zod 11.0, …) · …`. */
function coldProfileLine(profile: ColdStartProfile | undefined, most = 6): string {
  if (profile === undefined) return '';
  const phases = profile.phases
    .map(({ phase, ms, parts }) => {
      const named = parts
        .slice(0, most)
        .map(([part, partMs]) => `${part} ${f1(partMs)}`)
        .join(', ');
      return `${PHASE_LABELS[phase]} ${f1(ms)}${named === '' ? '' : ` (${named})`}`;
    })
    .join(' · ');
  return `${profile.runs} imports, median ${f1(profile.importMedianMs)} ms with the profiler: ${phases}`;
}

function markdown(
  report: Record<string, unknown>,
  drains: DrainResult[],
  multi: MultiDrainResult[],
  ing: IngestResult | undefined,
  cold: ColdStartResult[],
): string {
  const lines: string[] = [
    `# Bench ${String(report['date'])}`,
    '',
    `Machine: ${String(report['machine'])}`,
    '',
  ];
  if (drains.length > 0) {
    lines.push(
      `## Drain (sandbox ${LIMIT_PER_SECOND} req/s per route, latency 50–150 ms)`,
      '',
      '| connector | orders | refunds | post burst s | drain s | adds/s (limit 100) | 429s | lost | duplicated | wrong amount |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...drains.map(
        (d) =>
          `| ${d.connector} | ${d.orders} | ${d.refunds} | ${f1(d.postSeconds)} | ${f1(d.drainSeconds)} | ${f1(d.addsPerSecond)} | ${d.platform429} | ${d.lost} | ${d.duplicated} | ${d.wrongAmounts} |`,
      ),
      '',
    );
  }
  if (multi.length > 0) {
    lines.push(
      `## Multi-instance drain (separate worker processes${multi.some((m) => m.warm) ? ', booted before the drain (--warm)' : ''}, sandbox ${LIMIT_PER_SECOND} req/s per route, latency 50–150 ms)`,
      '',
      'Where the time goes: per route, the mean wait the client-side limiter imposed on an attempt and the mean platform round trip (ms); steady = adds/s over the full seconds after the first three and before the last; CPU of the worker processes, of the parent (fauxqs, dynalite) and of the sandbox (a process of its own, as the platform is its own server) as a share of all cores over the drain.',
      '',
      '| pacing | instances | batches each | foreign req/s | orders | drain s | adds/s | steady adds/s | calls | 429s % | lost | duplicated | wrong amount | info wait / trip ms | add wait / trip ms | cpu workers % | cpu parent % | cpu sandbox % |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...multi.map(
        (m) =>
          `| ${m.pacing} | ${m.instances} | ${m.pollers} × ${m.batchSize} | ${m.foreignPerSecond} | ${m.orders} | ${f1(m.drainSeconds)} | ${f1(m.addsPerSecond)} | ${f1(m.steadyAddsPerSecond)} | ${m.calls} | ${(m.share429 * 100).toFixed(2)} | ${m.lost} | ${m.duplicated} | ${m.wrongAmounts} | ${trip(m, 'conversions.info')} | ${trip(m, 'conversions.add')} | ${f1(m.cpuInstances * 100)} | ${f1(m.cpuParent * 100)} | ${f1(m.cpuSandbox * 100)} |`,
      ),
      '',
      'Adds second by second from the first add:',
      '',
      ...multi.map((m) => `- ${rowLabel(m)}: ${m.addsBySecond.join(' ')}`),
      '',
      "The start and the tail: each instance's adds, how many seconds after the drain's first add it made its first one, and how many before the drain's last add it made its last one:",
      '',
      ...multi.map((m) => `- ${rowLabel(m)}: ${instanceLine(m)}`),
      '',
      `Where the time goes against the route's budget (its limit, ${LIMIT_PER_SECOND}/s, less what a foreign client takes): the start, until the last instance made its first add; all adding; the tail, from the first instance's last add. A phase loses its length less the time its adds take at the budget (negative: it ran over), and the losses add up to the drain's:`,
      '',
      ...multi.map((m) => `- ${rowLabel(m)}: ${phasesLine(m.phases)}`),
      '',
      "How fast the emulators answered the workers, by the phase each call began in (mean ms, and calls): DynamoDB is dynalite (the ledger's leases and settles, the pacing record), SQS is fauxqs (receives, deletes; a receive from an empty queue waits up to a second for a message, as the tail's do); both run in the bench process, on the cores the workers share, where AWS answers in milliseconds. A phase where they answered slowly is missing the adds that waited on them:",
      '',
      ...multi.map((m) => `- ${rowLabel(m)}: ${awsLine(m)}`),
      '',
    );
    const profiled = multi.filter((m) => m.cpuByOwner !== undefined);
    if (profiled.length > 0) {
      lines.push(
        "Where the workers' busy CPU went (`--profile`: V8 CPU profiles of every worker process, each sample given to the nearest frame of the bundle, so Node's own code counts for the package that called it):",
        '',
        ...profiled.map((m) => `- ${rowLabel(m)}: ${ownersLine(m.cpuByOwner ?? [])}`),
        '',
        "And the bench process's over the drain (fauxqs and dynalite, which share the cores with the workers; V8's profiler in the process, each sample given to the nearest frame of a package or project file):",
        '',
        ...profiled.map((m) => `- ${rowLabel(m)}: ${ownersLine(m.parentCpuByOwner ?? [])}`),
        '',
        "And the sandbox's process over the drain (the same profiler, in its process):",
        '',
        ...profiled.map((m) => `- ${rowLabel(m)}: ${ownersLine(m.sandboxCpuByOwner ?? [])}`),
        '',
      );
    }
  }
  if (ing) {
    lines.push(
      '## Ingest (autocannon, POST /webhooks/generic, signed, distinct order ids)',
      '',
      "The serving process is the bench's: the local HTTP server in front of the webhook handler (API Gateway's part in AWS), the handler with its SQS client, and fauxqs, on one event loop; its CPU is all its threads' (V8's garbage collector, libuv's), as a share of one core. The load generator runs in a process of its own.",
      '',
      '| connections | seconds | requests | req/s | p50 ms | p99 ms | non-2xx | errors | serving CPU % of a core | serving CPU µs per request | load generator CPU % |',
      '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      `| ${ing.connections} | ${ing.seconds} | ${ing.requests} | ${f1(ing.requestsPerSecond)} | ${ing.p50Ms} | ${ing.p99Ms} | ${ing.non2xx} | ${ing.errors} | ${Math.round(ing.servingCpuPercent)} | ${Math.round(ing.servingCpuMicrosPerRequest)} | ${Math.round(ing.loadCpuPercent)} |`,
      '',
    );
    if (ing.servingCpuByOwner) {
      lines.push(
        "Where the serving process's busy time went (`--profile`: V8's profiler in the process, each sample given to the nearest frame of a package or project file, so Node's own code counts for the package that called it; by what it works for):",
        '',
        `- ${ingestPartsLine(ing.servingCpuByOwner)}`,
        '',
      );
    }
  }
  if (cold.length > 0) {
    lines.push(
      `## Cold start (esbuild bundle as deployed; import in a fresh node process${cold.every((c) => c.mapsStacks) ? ', its map beside it, read on the first stack trace as deployed' : ''})`,
      '',
      '| function | bundle | gzip | runs | init median ms | min | max |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...cold.map(
        (c) =>
          `| ${c.fn} | ${kib(c.bundleBytes)} | ${kib(c.gzipBytes)} | ${c.runs} | ${f1(c.initMedianMs)} | ${f1(c.initMinMs)} | ${f1(c.initMaxMs)} |`,
      ),
      '',
    );
    const profiled = cold.filter((c) => c.profile !== undefined);
    if (profiled.length > 0) {
      lines.push(
        `Where each import's time goes (\`--cold-profile-runs\`: more imports of the same bundle with V8's profiler on, sampling every ${COLD_PROFILE_INTERVAL_US} µs; mean ms per import, the profiler's own cost included; the code of a package counts the Node code it calls, a built-in the built-ins it loads):`,
        '',
        ...profiled.map((c) => `- ${c.fn}: ${coldProfileLine(c.profile)}`),
        '',
      );
    }
  }
  return lines.join('\n');
}

/** Commander's parser of a whole number of at least `min`: the bench cannot run a fraction or a NaN. */
function wholeNumber(min: number): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value) || Number(value) < min)
      throw new InvalidArgumentError(`a whole number of at least ${min} is needed.`);
    return Number(value);
  };
}

/** Commander's parser of a comma-separated list of whole numbers of at least `min`. */
function wholeNumbers(min: number): (value: string) => number[] {
  const one = wholeNumber(min);
  return (value) => value.split(',').map(one);
}

/** Commander's parser of a comma-separated subset of `allowed`. */
function subsetOf<T extends string>(allowed: readonly T[]): (value: string) => T[] {
  return (value) => {
    const parts = value.split(',');
    const unknown = parts.filter((part) => !(allowed as readonly string[]).includes(part));
    if (unknown.length > 0)
      throw new InvalidArgumentError(`${unknown.join(', ')}: not one of ${allowed.join(', ')}.`);
    return parts as T[];
  };
}

const PARTS = ['drain', 'multi', 'ingest', 'cold'] as const;
const PACINGS = ['static', 'adaptive'] as const;

/** The options as the parsers above leave them. */
interface BenchOptions {
  readonly orders: number;
  readonly pollers: number;
  readonly baseline?: true;
  readonly baselineOrders: number;
  readonly ingestSeconds: number;
  readonly connections: number;
  readonly coldRuns: number;
  readonly coldProfileRuns: number;
  readonly instances: readonly number[];
  readonly multiOrders: number;
  readonly multiPollers?: number;
  readonly warm?: true;
  readonly profile?: true;
  readonly maxConcurrency: number;
  readonly batchSize: string;
  readonly foreign: number;
  readonly foreignInstances: number;
  readonly pacing: readonly (typeof PACINGS)[number][];
  readonly only: readonly (typeof PARTS)[number][];
}

async function main(): Promise<void> {
  const program = new Command()
    .name('bench')
    .option('--orders <n>', 'orders in the drain (plus refunds for a tenth)', wholeNumber(1), 2000)
    .option(
      '--pollers <n>',
      'concurrent pollers of the one-process drain (10 records each)',
      wholeNumber(1),
      10,
    )
    .option('--baseline', 'also drain through the simplest connector (test/bench/baseline.ts)')
    .option(
      '--baseline-orders <n>',
      'orders for the baseline drain (it runs about 10 calls per second)',
      wholeNumber(1),
      300,
    )
    .option('--ingest-seconds <n>', 'autocannon duration', wholeNumber(1), 10)
    .option('--connections <n>', 'autocannon connections', wholeNumber(1), 20)
    .option('--cold-runs <n>', 'fresh processes per bundle', wholeNumber(1), 10)
    .option(
      '--cold-profile-runs <n>',
      "more fresh processes per bundle that import it with V8's CPU profiler on, to report where the import's time goes (0: none)",
      wholeNumber(0),
      5,
    )
    .addOption(
      new Option('--instances <list>', 'worker processes of the multi-instance drain')
        .argParser(wholeNumbers(1))
        .default([1, 2, 5, 10], '1,2,5,10'),
    )
    .option(
      '--multi-orders <n>',
      'orders per multi-instance drain (plus refunds for a tenth)',
      wholeNumber(1),
      2000,
    )
    .option(
      '--multi-pollers <n>',
      'pollers (batches held at once) per worker process (default: its part of --max-concurrency, rounded up)',
      wholeNumber(1),
    )
    .option('--warm', 'boot every worker process before any polls (warm containers), not one after another')
    .option(
      '--profile',
      'CPU-profile every worker process of the multi-instance drain, the bench process over it (fauxqs, dynalite) and the sandbox process, and the process that serves the ingest run, and print where their busy time goes, by package (an unminified bundle: compare shares, not adds/s)',
    )
    .option(
      '--max-concurrency <n>',
      "batches the worker fleet holds at once, as the event source maxConcurrency: the instances share them, and each starts at their containers' share of 80% of the limit (the deployed default)",
      wholeNumber(1),
      WORKER_DEFAULTS.maxConcurrency,
    )
    .option(
      '--batch-size <n>',
      'messages per batch of the multi-instance drain, as the event source batchSize (1 to 10; the deployed default)',
      String(WORKER_DEFAULTS.batchSize),
    )
    .option(
      '--foreign <n>',
      'req/s a foreign client takes of conversions.add in the extra rows (0: no such rows)',
      wholeNumber(0),
      30,
    )
    .option('--foreign-instances <n>', 'worker processes in the foreign-consumer rows', wholeNumber(1), 5)
    .addOption(
      new Option('--pacing <list>', `pacings of the multi-instance drain (${PACINGS.join(', ')})`)
        .argParser(subsetOf(PACINGS))
        .default([...PACINGS], PACINGS.join(',')),
    )
    .addOption(
      new Option('--only <parts>', `the parts to run, comma-separated (${PARTS.join(', ')})`)
        .argParser(subsetOf(PARTS))
        .default([...PARTS], PARTS.join(',')),
    )
    .parse();
  const o = program.opts<BenchOptions>();
  const only = new Set(o.only);
  const batchSize = Number(o.batchSize);
  if (!isWorkerBatchSize(batchSize))
    program.error(
      `--batch-size must be a whole number from 1 to 10 (the event source's range), got ${o.batchSize}`,
    );

  const date = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
  const cpu = cpus();
  const machine = `${cpu.length} cores (${cpu[0]?.model.trim() ?? 'unknown'}), ${f1(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
  console.log(`bench on ${machine}`);

  const drains: DrainResult[] = [];
  if (only.has('drain')) {
    console.log(`drain: ${o.orders} orders through the connector…`);
    drains.push(await drain('connector', o.orders, o.pollers));
    if (o.baseline) {
      console.log(`drain: ${o.baselineOrders} orders through the baseline…`);
      drains.push(await drain('baseline', o.baselineOrders, 1));
    }
    console.table(drains);
  }
  const multi: MultiDrainResult[] = [];
  if (only.has('multi')) {
    const bundleDir = scratchDir('bench-instance-');
    const profiling = o.profile === true;
    const instanceModule = await bundleInstance(bundleDir, profiling);
    const runs = o.instances.map((instances) => ({
      instances,
      foreignPerSecond: 0,
    }));
    if (o.foreign > 0) runs.push({ instances: o.foreignInstances, foreignPerSecond: o.foreign });
    for (const run of runs) {
      const fleet = fleetShape({
        instances: run.instances,
        maxConcurrency: o.maxConcurrency,
        batchSize,
        limitPerSecond: LIMIT_PER_SECOND,
        ...(o.multiPollers === undefined ? {} : { pollers: o.multiPollers }),
      });
      for (const pacing of o.pacing) {
        console.log(
          `multi-instance drain: ${run.instances} instances of ${fleet.pollers} pollers (batches of ${fleet.batchSize}), ${pacing}${run.foreignPerSecond > 0 ? `, foreign ${run.foreignPerSecond}/s` : ''}${o.warm ? ', warm' : ''}…`,
        );
        const profileDir = profiling ? mkdtempSync(join(bundleDir, 'profile-')) : undefined;
        const drained = await multiDrain({
          pacing,
          ...run,
          ...fleet,
          orders: o.multiOrders,
          warm: o.warm === true,
          instanceModule,
          ...(profileDir === undefined ? {} : { profileDir }),
        });
        const result: MultiDrainResult =
          profileDir === undefined
            ? drained
            : { ...drained, cpuByOwner: profileShares(profileDir, instanceModule) };
        const {
          routes,
          addsBySecond,
          instanceAdds,
          instanceStartS,
          instanceDoneBeforeEndS,
          cpuByOwner,
          parentCpuByOwner,
          sandboxCpuByOwner,
          awsByPhase: _awsByPhase,
          ...summary
        } = result;
        console.table([summary]);
        console.log(
          `  per route (wait / round trip ms): ${Object.entries(routes)
            .map(
              ([name, r]) => `${name} ${r.calls} calls ${Math.round(r.waitMs)} / ${Math.round(r.platformMs)}`,
            )
            .join(
              ', ',
            )}\n  AWS calls by phase, mean ms (calls): ${awsLine(result)}\n  adds by second: ${addsBySecond.join(' ')}\n  per instance, adds (first add s after the drain's first, last add s before its end): ${instanceLine(result)}${cpuByOwner ? `\n  workers' busy CPU by owner: ${ownersLine(cpuByOwner)}` : ''}${parentCpuByOwner ? `\n  the bench process's busy CPU by owner (fauxqs, dynalite): ${ownersLine(parentCpuByOwner)}` : ''}${sandboxCpuByOwner ? `\n  the sandbox process's busy CPU by owner: ${ownersLine(sandboxCpuByOwner)}` : ''}`,
        );
        multi.push(result);
      }
    }
  }
  let ing: IngestResult | undefined;
  if (only.has('ingest')) {
    console.log(`ingest: autocannon ${o.connections} connections for ${o.ingestSeconds} s…`);
    ing = await ingest(o.ingestSeconds, o.connections, o.profile === true);
    const { servingCpuByOwner, ...row } = ing;
    console.table([row]);
    if (servingCpuByOwner)
      console.log(`  where the serving process's time went: ${ingestPartsLine(servingCpuByOwner)}`);
  }
  let cold: ColdStartResult[] = [];
  if (only.has('cold')) {
    console.log(`cold start: bundling and importing each function ${o.coldRuns} times…`);
    cold = await coldStart(o.coldRuns, o.coldProfileRuns);
    console.table(cold.map(({ profile, ...row }) => row));
    for (const c of cold)
      if (c.profile) console.log(`  ${c.fn}, where an import's time goes: ${coldProfileLine(c.profile)}`);
  }

  const report = {
    date,
    machine,
    options: o,
    drains,
    multiInstanceDrains: multi,
    ingest: ing,
    coldStart: cold,
  };
  mkdirSync('reports', { recursive: true });
  writeFileSync(join('reports', `bench-${date}.json`), `${JSON.stringify(report, null, 2)}\n`);
  const md = markdown(report, drains, multi, ing, cold);
  writeFileSync(join('reports', `bench-${date}.md`), md);
  console.log(`\n${md}\nwritten reports/bench-${date}.json and .md`);
}

await main();

/** A multi-instance row as the report names it: `adaptive, 5 instances, foreign 30/s`. */
function rowLabel(m: Pick<MultiDrainResult, 'pacing' | 'instances' | 'foreignPerSecond'>): string {
  return `${m.pacing}, ${m.instances} instances${m.foreignPerSecond > 0 ? `, foreign ${m.foreignPerSecond}/s` : ''}`;
}

/** The owners taking the most of the workers' busy CPU, `name share%`. */
function ownersLine(cpuByOwner: readonly [string, number][], most = 12): string {
  return cpuByOwner
    .slice(0, most)
    .map(([owner, share]) => `${owner} ${f1(share * 100)}%`)
    .join(', ');
}

/** `the webhook function 58% (@smithy/core 25%, …) · the local stand-ins 27% (…) · …`, from `ingestParts`. */
function ingestPartsLine(busy: readonly [string, number][], most = 6): string {
  return ingestParts(busy)
    .map(({ part, share, owners }) => `${part} ${f1(share * 100)}% (${ownersLine(owners, most)})`)
    .join(' · ');
}

/** `DynamoDB before the first add 420 ms (40); … · SQS …`. */
function awsLine(m: Pick<MultiDrainResult, 'awsByPhase'>): string {
  return `DynamoDB ${callsLine(m.awsByPhase.dynamodb)} · SQS ${callsLine(m.awsByPhase.sqs)}`;
}

/** Each instance's adds, when it made its first (after the drain's first) and its last (before the end). */
function instanceLine(
  m: Pick<MultiDrainResult, 'instanceAdds' | 'instanceStartS' | 'instanceDoneBeforeEndS'>,
): string {
  return m.instanceAdds
    .map(
      (n, i) =>
        `${n} (+${(m.instanceStartS[i] ?? 0).toFixed(1)} s, −${(m.instanceDoneBeforeEndS[i] ?? 0).toFixed(1)} s)`,
    )
    .join(', ');
}

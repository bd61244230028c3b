import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type autocannon from 'autocannon';
import { Command } from 'commander';
import { build } from 'esbuild';
import { bundleFunction, esbuildOptionsFor } from '../../infra/bundle-report.ts';
import type { ConnectorFunctionName } from '../../infra/connector-stack.ts';
import { isWorkerBatchSize, WORKER_DEFAULTS } from '../../infra/deploy-config.ts';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { genericWebhook } from '../support/webhooks.ts';
import { runBaseline } from './baseline.ts';
import { forkWithConfig } from './config-channel.ts';
import { fleetShape } from './fleet.ts';
import type { IngestLoadConfig } from './ingest-load.ts';
import type { InstanceConfig, InstanceReport } from './instance.ts';
import { importTimes, lambdaProcessEnv } from './lambda-process.ts';
import { scratchDir } from './leftovers.ts';
import { type DrainPhase, drainPhases, phasesLine } from './phases.ts';
import {
  addBusy,
  bundleOwner,
  busyByOwner,
  type CpuProfile,
  fileOwner,
  moduleStarts,
  shares,
} from './profile.ts';

/**
 * `npm run bench`: drain throughput against the sandbox at the platform's real limit (100 requests
 * per second per route) and 50–150 ms latency, ingest latency under autocannon, and the bundles'
 * cold-start cost; `--baseline` adds the same drain through the simplest possible connector.
 * Prints figures only, no assertions; writes reports/bench-<date>.{json,md}.
 */

const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const PLATFORM_FAULTS = { latencyMs: 50, jitterMs: 100, seed: 1 };
const LIMIT_PER_SECOND = 100;

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

interface MultiDrainResult {
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
   * CPU of the instances and of the parent (sandbox, fauxqs, dynalite) as a share of the cores over
   * the drain.
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
  readonly cpuInstances: number;
  readonly cpuParent: number;
  /** With `--profile`: the workers' busy CPU by package or project file, largest first (share 0–1). */
  readonly cpuByOwner?: [string, number][];
  /** With `--profile`: the same for this process over the drain (the sandbox, fauxqs, dynalite). */
  readonly parentCpuByOwner?: [string, number][];
}

interface IngestResult {
  readonly connections: number;
  readonly seconds: number;
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  readonly errors: number;
}

interface ColdStartResult {
  readonly fn: ConnectorFunctionName;
  readonly bundleBytes: number;
  readonly gzipBytes: number;
  readonly runs: number;
  /** Imported with the functions' NODE_OPTIONS: source maps on, the map read at init. */
  readonly sourceMaps: boolean;
  readonly initMedianMs: number;
  readonly initMinMs: number;
  readonly initMaxMs: number;
}

const orderAmount = (i: number) => 1_000 + (i % 500) * 13;
const refundAmount = (i: number) => 100 + (i % 7) * 11;
const decimal = (minor: number) => `${Math.trunc(minor / 100)}.${String(minor % 100).padStart(2, '0')}`;

/** Runs `work` over `items` with at most `limit` in flight. */
async function pool<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        await work(item);
      }
    }),
  );
}

/** Every order, then a refund for every tenth, as one burst; the queue holds them all before the drain. */
async function postBurst(stack: LocalStack, orders: number, prefix: string): Promise<number> {
  const secret = stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '';
  const orderBodies: string[] = [];
  const refundBodies: string[] = [];
  for (let i = 0; i < orders; i++) {
    orderBodies.push(
      JSON.stringify({
        type: 'order',
        orderId: `${prefix}-${i}`,
        amount: decimal(orderAmount(i)),
        currency: 'EUR',
        clickIds: [CLICK],
        buyerIp: '198.51.100.4',
      }),
    );
  }
  for (let i = 0; i < orders; i += 10) {
    refundBodies.push(
      JSON.stringify({
        type: 'refund',
        orderId: `${prefix}-${i}`,
        refundId: `r-${i}`,
        amount: decimal(refundAmount(i)),
        currency: 'EUR',
      }),
    );
  }
  let failed = 0;
  const send = async (body: string) => {
    const signed = genericWebhook(body, secret);
    const res = await fetch(`${stack.url}/webhooks/generic`, {
      method: 'POST',
      headers: signed.headers,
      body: signed.body,
    });
    await res.arrayBuffer();
    if (res.status !== 202) failed += 1;
  };
  // Refunds only once every order is queued: a refund queued before its order is parked today.
  await pool(orderBodies, 32, send);
  await pool(refundBodies, 32, send);
  if (failed > 0) throw new Error(`${failed} webhooks were not accepted`);
  return refundBodies.length;
}

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
    const { lost, duplicated, wrongAmounts } = check(stack, orders, prefix);
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

/** Lost, duplicated and wrongly refunded conversions of the orders posted under `prefix`. */
function check(
  stack: LocalStack,
  orders: number,
  prefix: string,
): { lost: number; duplicated: number; wrongAmounts: number } {
  const conversions = stack.sandbox?.control.conversions() ?? [];
  const byOrder = new Map<string, (typeof conversions)[number][]>();
  for (const c of conversions) byOrder.set(c.externalId, [...(byOrder.get(c.externalId) ?? []), c]);
  let lost = 0;
  let duplicated = 0;
  let wrongAmounts = 0;
  for (let i = 0; i < orders; i++) {
    const found = byOrder.get(`${prefix}-${i}`) ?? [];
    if (found.length === 0) lost += 1;
    if (found.length > 1) duplicated += found.length - 1;
    const expected = orderAmount(i) - (i % 10 === 0 ? refundAmount(i) : 0);
    if (found.length === 1 && found[0]?.amount !== expected) wrongAmounts += 1;
  }
  return { lost, duplicated, wrongAmounts };
}

/** Sends `message` to `child` and resolves its first answer of type `type`. */
function ask<T>(child: ChildProcess, type: string, message?: unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: { type?: string; report?: unknown }) => {
      if (m.type !== type) return;
      child.off('message', onMessage);
      resolve(m.report as T);
    };
    child.on('message', onMessage);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`a bench instance exited with ${code}`));
    });
    if (message !== undefined) child.send(message as object);
  });
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
async function bundleInstance(dir: string, profile: boolean): Promise<string> {
  const outfile = join(dir, 'instance.mjs');
  await build({
    ...esbuildOptionsFor('worker'),
    entryPoints: [fileURLToPath(new URL('./instance.ts', import.meta.url))],
    outfile,
    write: true,
    metafile: false,
    // A profile names a line of the bundle: unminified, each module keeps the comment naming its path.
    ...(profile ? { minify: false, sourcemap: false } : {}),
  });
  return outfile;
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
 * V8's CPU profiler on this process, as `--cpu-prof` runs it in the workers: where the sandbox and
 * the emulators spend the cores the workers share with them.
 */
async function startProfiler(): Promise<{ stop(): Promise<CpuProfile> }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  let stopped: Promise<CpuProfile> | undefined;
  return {
    stop() {
      stopped ??= session.post('Profiler.stop').then(({ profile }) => {
        session.disconnect();
        return profile as unknown as CpuProfile;
      });
      return stopped;
    },
  };
}

/** The project's root, under which a source file's owner is its path. */
const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * The deployed drain: `instances` worker processes that share nothing but the queue, the ledger
 * and the platform token, as Lambda containers, holding `pollers` batches of `batchSize` each
 * (`fleetShape`).
 * `static`: each at 80% of the limit ÷ instances (the stack before adaptive pacing). `adaptive`:
 * each from `initialRatePerSecond` up to the limit, paced by the platform's headers. `warm`: every
 * process boots before any polls (containers already warm when the backlog arrives), so no
 * process's boot takes the shared cores from the drain.
 */
async function multiDrain(options: {
  pacing: 'static' | 'adaptive';
  instances: number;
  orders: number;
  pollers: number;
  batchSize: number;
  initialRatePerSecond: number;
  foreignPerSecond: number;
  warm: boolean;
  /** The program each instance runs: the bundle of instance.ts (`bundleInstance`). */
  instanceModule: string;
  /** Where each instance writes its V8 CPU profile (`--cpu-prof`); none without `--profile`. */
  profileDir?: string;
}): Promise<MultiDrainResult> {
  const { pacing, instances, orders, pollers, batchSize, foreignPerSecond, warm } = options;
  const stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0, faults: PLATFORM_FAULTS },
    pollers: 0,
    autoPoll: false,
    emulators: { visibilityTimeoutSeconds: 120 },
  });
  const children: ChildProcess[] = [];
  let parentProfiler: { stop(): Promise<CpuProfile> } | undefined;
  try {
    const prefix = `${pacing}-${instances}-${Date.now()}`;
    await postBurst(stack, orders, prefix);
    const sandbox = stack.sandbox;
    if (!sandbox) throw new Error('the multi-instance drain needs the in-process sandbox');
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
      AFFILIATE_BASE_URL: stack.platformUrl,
      AFFILIATE_TOKEN_SECRET: 'AFFILIATE_TOKEN',
      AFFILIATE_TOKEN: sandbox.token,
      LEGACY_BASE_URL: stack.platformUrl,
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
    const started = Date.now();
    const parentCpu = process.cpuUsage();
    if (foreignPerSecond > 0)
      sandbox.control.setForeignLoad({ route: '/advertiser/conversions.add', perSecond: foreignPerSecond });
    for (let i = 0; i < instances; i++) {
      // Its settings, secrets included, go over IPC, not on its command line (`ps` shows that).
      const child = forkWithConfig(options.instanceModule, config, {
        // Node as Lambda starts the worker (the stack's NODE_OPTIONS), the bundle's map beside it.
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
    const parentProfile = await parentProfiler?.stop();
    const reports = await Promise.all(
      children.map((c) => ask<InstanceReport>(c, 'report', { type: 'stop' })),
    );
    const adds = reports.flatMap((r) => r.adds).sort((a, b) => a - b);
    const span = adds.length > 1 ? ((adds.at(-1) ?? 0) - (adds[0] ?? 0)) / 1000 : 0;
    const calls = Object.values(sandbox.control.calls());
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
      ...check(stack, orders, prefix),
      routes: routeProfiles(reports),
      addsBySecond,
      instanceAdds: reports.map((r) => r.adds.length),
      instanceStartS: reports.map((r) => ((r.adds[0] ?? 0) - (adds[0] ?? 0)) / 1000),
      instanceDoneBeforeEndS: reports.map((r) => ((adds.at(-1) ?? 0) - (r.adds.at(-1) ?? 0)) / 1000),
      phases: drainPhases(
        reports.map((r) => r.adds),
        LIMIT_PER_SECOND - foreignPerSecond,
      ),
      steadyAddsPerSecond: steady.length > 0 ? steady.reduce((a, b) => a + b, 0) / steady.length : 0,
      cpuInstances: reports.reduce((n, r) => n + r.cpuMs, 0) / coreSeconds,
      cpuParent: (parent.user + parent.system) / 1000 / coreSeconds,
      ...(parentProfile === undefined
        ? {}
        : { parentCpuByOwner: shares(busyByOwner(parentProfile, fileOwner(PROJECT_ROOT))) }),
    };
  } finally {
    await parentProfiler?.stop().catch(() => undefined);
    // An instance writes its profile as it exits, after its report: wait for that (a bounded wait).
    if (options.profileDir !== undefined) await exited(children, 15_000);
    for (const child of children) if (child.exitCode === null) child.kill();
    await stack.close();
  }
}

async function ingest(seconds: number, connections: number): Promise<IngestResult> {
  const stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, autoPoll: false });
  const secret = stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '';
  try {
    const config: IngestLoadConfig = { url: stack.url, secret, seconds, connections, clickId: CLICK };
    // Its settings, the signing secret included, go over IPC, not on its command line.
    const child = forkWithConfig(fileURLToPath(new URL('./ingest-load.ts', import.meta.url)), config);
    const result = await new Promise<autocannon.Result>((resolve, reject) => {
      child.once('message', (message) => resolve(message as autocannon.Result));
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`the load generator exited with code ${code}`)));
    });
    return {
      connections,
      seconds,
      requests: result.requests.total,
      requestsPerSecond: result.requests.average,
      p50Ms: result.latency.p50,
      p99Ms: result.latency.p99,
      non2xx: result.non2xx,
      errors: result.errors + result.timeouts,
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
 * import is all that runs at init).
 */
async function coldStart(runs: number): Promise<ColdStartResult[]> {
  const dir = scratchDir('bench-bundles-');
  const results: ColdStartResult[] = [];
  try {
    for (const fn of ['webhook', 'refunds', 'worker'] as const) {
      const bundle = await bundleFunction(fn);
      const file = join(dir, fn, 'index.mjs');
      mkdirSync(join(dir, fn), { recursive: true });
      writeFileSync(file, bundle.code);
      if (bundle.sourceMap !== undefined) writeFileSync(`${file}.map`, bundle.sourceMap);
      const { times, sourceMaps } = importTimes(file, runs);
      results.push({
        fn,
        bundleBytes: bundle.codeBytes,
        gzipBytes: bundle.gzipBytes,
        runs,
        sourceMaps,
        initMedianMs: median(times),
        initMinMs: Math.min(...times),
        initMaxMs: Math.max(...times),
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}

const f1 = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 1 });
const kib = (bytes: number) => `${f1(bytes / 1024)} KiB`;
const trip = (m: MultiDrainResult, route: string) => {
  const r = m.routes[route];
  return r ? `${Math.round(r.waitMs)} / ${Math.round(r.platformMs)}` : '–';
};

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
      'Where the time goes: per route, the mean wait the client-side limiter imposed on an attempt and the mean platform round trip (ms); steady = adds/s over the full seconds after the first three and before the last; CPU of the worker processes and of the parent (sandbox, fauxqs, dynalite) as a share of all cores over the drain.',
      '',
      '| pacing | instances | batches each | foreign req/s | orders | drain s | adds/s | steady adds/s | calls | 429s % | lost | duplicated | wrong amount | info wait / trip ms | add wait / trip ms | cpu workers % | cpu parent % |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...multi.map(
        (m) =>
          `| ${m.pacing} | ${m.instances} | ${m.pollers} × ${m.batchSize} | ${m.foreignPerSecond} | ${m.orders} | ${f1(m.drainSeconds)} | ${f1(m.addsPerSecond)} | ${f1(m.steadyAddsPerSecond)} | ${m.calls} | ${(m.share429 * 100).toFixed(2)} | ${m.lost} | ${m.duplicated} | ${m.wrongAmounts} | ${trip(m, 'conversions.info')} | ${trip(m, 'conversions.add')} | ${f1(m.cpuInstances * 100)} | ${f1(m.cpuParent * 100)} |`,
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
    );
    const profiled = multi.filter((m) => m.cpuByOwner !== undefined);
    if (profiled.length > 0) {
      lines.push(
        "Where the workers' busy CPU went (`--profile`: V8 CPU profiles of every worker process, each sample given to the nearest frame of the bundle, so Node's own code counts for the package that called it):",
        '',
        ...profiled.map((m) => `- ${rowLabel(m)}: ${ownersLine(m.cpuByOwner ?? [])}`),
        '',
        "And the bench process's over the drain (the sandbox, fauxqs and dynalite, which share the cores with the workers; V8's profiler in the process, each sample given to the nearest frame of a package or project file):",
        '',
        ...profiled.map((m) => `- ${rowLabel(m)}: ${ownersLine(m.parentCpuByOwner ?? [])}`),
        '',
      );
    }
  }
  if (ing) {
    lines.push(
      '## Ingest (autocannon, POST /webhooks/generic, signed, distinct order ids)',
      '',
      '| connections | seconds | requests | req/s | p50 ms | p99 ms | non-2xx | errors |',
      '|---:|---:|---:|---:|---:|---:|---:|---:|',
      `| ${ing.connections} | ${ing.seconds} | ${ing.requests} | ${f1(ing.requestsPerSecond)} | ${ing.p50Ms} | ${ing.p99Ms} | ${ing.non2xx} | ${ing.errors} |`,
      '',
    );
  }
  if (cold.length > 0) {
    lines.push(
      `## Cold start (esbuild bundle as deployed; import in a fresh node process${cold.every((c) => c.sourceMaps) ? ', source maps on as deployed' : ''})`,
      '',
      '| function | bundle | gzip | runs | init median ms | min | max |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...cold.map(
        (c) =>
          `| ${c.fn} | ${kib(c.bundleBytes)} | ${kib(c.gzipBytes)} | ${c.runs} | ${f1(c.initMedianMs)} | ${f1(c.initMinMs)} | ${f1(c.initMaxMs)} |`,
      ),
      '',
    );
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const program = new Command()
    .name('bench')
    .option('--orders <n>', 'orders in the drain (plus refunds for a tenth)', '2000')
    .option('--pollers <n>', 'concurrent pollers of the one-process drain (10 records each)', '10')
    .option('--baseline', 'also drain through the simplest connector (test/bench/baseline.ts)')
    .option(
      '--baseline-orders <n>',
      'orders for the baseline drain (it runs about 10 calls per second)',
      '300',
    )
    .option('--ingest-seconds <n>', 'autocannon duration', '10')
    .option('--connections <n>', 'autocannon connections', '20')
    .option('--cold-runs <n>', 'fresh processes per bundle', '10')
    .option('--instances <list>', 'worker processes of the multi-instance drain', '1,2,5,10')
    .option('--multi-orders <n>', 'orders per multi-instance drain (plus refunds for a tenth)', '2000')
    .option(
      '--multi-pollers <n>',
      'pollers (batches held at once) per worker process (default: its part of --max-concurrency, rounded up)',
    )
    .option('--warm', 'boot every worker process before any polls (warm containers), not one after another')
    .option(
      '--profile',
      'CPU-profile every worker process of the multi-instance drain, and the bench process over it (sandbox, fauxqs, dynalite), and print where their busy time goes, by package (an unminified bundle: compare shares, not adds/s)',
    )
    .option(
      '--max-concurrency <n>',
      "batches the worker fleet holds at once, as the event source maxConcurrency: the instances share them, and each starts at their containers' share of 80% of the limit (the deployed default)",
      String(WORKER_DEFAULTS.maxConcurrency),
    )
    .option(
      '--batch-size <n>',
      'messages per batch of the multi-instance drain, as the event source batchSize (1 to 10; the deployed default)',
      String(WORKER_DEFAULTS.batchSize),
    )
    .option('--foreign <n>', 'req/s a foreign client takes of conversions.add in the extra rows', '30')
    .option('--foreign-instances <n>', 'worker processes in the foreign-consumer rows', '5')
    .option('--pacing <list>', 'pacings of the multi-instance drain', 'static,adaptive')
    .option('--only <parts>', 'comma-separated subset of drain,multi,ingest,cold', 'drain,multi,ingest,cold')
    .parse();
  const o = program.opts<Record<string, string | boolean | undefined>>();
  const only = new Set(String(o['only']).split(','));
  // Commander stores `--baseline-orders` as `baselineOrders`.
  const int = (name: string) =>
    Number.parseInt(String(o[name.replace(/-(\w)/g, (_, c: string) => c.toUpperCase())]), 10);
  const batchSize = Number(o['batchSize']);
  if (!isWorkerBatchSize(batchSize))
    program.error(
      `--batch-size must be a whole number from 1 to 10 (the event source's range), got ${String(o['batchSize'])}`,
    );

  const date = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
  const cpu = cpus();
  const machine = `${cpu.length} cores (${cpu[0]?.model.trim() ?? 'unknown'}), ${f1(totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
  console.log(`bench on ${machine}`);

  const drains: DrainResult[] = [];
  if (only.has('drain')) {
    console.log(`drain: ${int('orders')} orders through the connector…`);
    drains.push(await drain('connector', int('orders'), int('pollers')));
    if (o['baseline']) {
      console.log(`drain: ${int('baseline-orders')} orders through the baseline…`);
      drains.push(await drain('baseline', int('baseline-orders'), 1));
    }
    console.table(drains);
  }
  const multi: MultiDrainResult[] = [];
  if (only.has('multi')) {
    const bundleDir = scratchDir('bench-instance-');
    const profiling = o['profile'] === true;
    const instanceModule = await bundleInstance(bundleDir, profiling);
    const pacings = String(o['pacing']).split(',') as ('static' | 'adaptive')[];
    const runs = String(o['instances'])
      .split(',')
      .map((n) => ({ instances: Number.parseInt(n, 10), foreignPerSecond: 0 }));
    if (int('foreign') > 0)
      runs.push({ instances: int('foreign-instances'), foreignPerSecond: int('foreign') });
    for (const run of runs) {
      const fleet = fleetShape({
        instances: run.instances,
        maxConcurrency: int('max-concurrency'),
        batchSize,
        limitPerSecond: LIMIT_PER_SECOND,
        ...(o['multiPollers'] === undefined ? {} : { pollers: int('multi-pollers') }),
      });
      for (const pacing of pacings) {
        console.log(
          `multi-instance drain: ${run.instances} instances of ${fleet.pollers} pollers (batches of ${fleet.batchSize}), ${pacing}${run.foreignPerSecond > 0 ? `, foreign ${run.foreignPerSecond}/s` : ''}${o['warm'] ? ', warm' : ''}…`,
        );
        const profileDir = profiling ? mkdtempSync(join(bundleDir, 'profile-')) : undefined;
        const drained = await multiDrain({
          pacing,
          ...run,
          ...fleet,
          orders: int('multi-orders'),
          warm: o['warm'] === true,
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
            )}\n  adds by second: ${addsBySecond.join(' ')}\n  per instance, adds (first add s after the drain's first, last add s before its end): ${instanceLine(result)}${cpuByOwner ? `\n  workers' busy CPU by owner: ${ownersLine(cpuByOwner)}` : ''}${parentCpuByOwner ? `\n  the bench process's busy CPU by owner (sandbox, fauxqs, dynalite): ${ownersLine(parentCpuByOwner)}` : ''}`,
        );
        multi.push(result);
      }
    }
  }
  let ing: IngestResult | undefined;
  if (only.has('ingest')) {
    console.log(`ingest: autocannon ${int('connections')} connections for ${int('ingest-seconds')} s…`);
    ing = await ingest(int('ingest-seconds'), int('connections'));
    console.table([ing]);
  }
  let cold: ColdStartResult[] = [];
  if (only.has('cold')) {
    console.log(`cold start: bundling and importing each function ${int('cold-runs')} times…`);
    cold = await coldStart(int('cold-runs'));
    console.table(cold);
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

/** The owners taking the most of the workers' busy CPU, `name share%`. */
function ownersLine(cpuByOwner: readonly [string, number][], most = 12): string {
  return cpuByOwner
    .slice(0, most)
    .map(([owner, share]) => `${owner} ${f1(share * 100)}%`)
    .join(', ');
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

import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gzipSync } from 'node:zlib';
import { Command } from 'commander';
import { scanQueue } from '../../cli/dlq-reader.ts';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { DEFAULT_SEED } from '../../sandbox/server.ts';
import type { SourceConfigInput } from '../../shared/config/sources.ts';
import { signedHeaders } from '../support/webhooks.ts';

/**
 * `npm run fuzz`: a seeded, bounded run of random and mutated signed requests against the whole local
 * stack (HTTP server, fauxqs, dynalite, workers, sandbox). Passes when no answer is a 5xx, none takes
 * over 5 s, and the DLQ holds no `bad_input` entry once the queue has drained: what the door accepts,
 * the worker can apply. `test/integration/fuzz.test.ts` runs a few hundred of the same requests.
 */

const here = dirname(fileURLToPath(import.meta.url));
const SAMPLES = join(here, '..', 'fixtures', 'samples');
const sample = (name: string): unknown => JSON.parse(readFileSync(join(SAMPLES, name), 'utf8'));

const HANG_MS = 5_000;
const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const PROGRAM_SOURCES = ['shopify', 'woocommerce', 'stripe', 'generic'] as const;
type Platform = (typeof PROGRAM_SOURCES)[number];

export interface FuzzOptions {
  readonly count: number;
  readonly seed: number;
  /** Requests in flight at once. @default 16 */
  readonly concurrency?: number;
  /** How long the queue may take to drain after the last request. @default 180 s */
  readonly drainTimeoutMs?: number;
  readonly stack?: LocalStack;
  readonly onProgress?: (done: number) => void;
}

export interface FuzzReport {
  readonly requests: number;
  readonly seed: number;
  readonly seconds: number;
  readonly byStatus: Record<string, number>;
  readonly byKind: Record<string, number>;
  readonly answers5xx: number;
  /** Answered after HANG_MS, or not at all. */
  readonly hangs: number;
  /** No answer at all (the connection dropped, or nothing within 2 × HANG_MS). */
  readonly unanswered: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly drained: boolean;
  readonly conversions: number;
  readonly dlqByClass: Record<string, number>;
  /** DLQ reasons with ids blanked, most frequent first in the JSON. */
  readonly dlqReasons: Record<string, number>;
  readonly badInputInDlq: number;
  /** A few of the requests that broke a rule, to replay by hand. */
  readonly failures: string[];
}

/** mulberry32: small, fast, and the same sequence for the same seed on every machine. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Fuzzer {
  readonly random: () => number;
  int(max: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
}

function fuzzer(seed: number): Fuzzer {
  const random = prng(seed);
  return {
    random,
    int: (max) => Math.floor(random() * max),
    pick: (items) => items[Math.floor(random() * items.length)] as never,
    chance: (p) => random() < p,
  };
}

/** Strings that broke, or could break, a door: encodings, limits, currencies, numbers as text. */
const NASTY_STRINGS = [
  '',
  ' ',
  'GIFT🎁',
  '\uffff',
  '\ufffe',
  '\u0000',
  'a\u0007b',
  '\ud83c',
  '\udc00x',
  '\u202eevil',
  'x'.repeat(256),
  'x'.repeat(257),
  '🎁'.repeat(300),
  'eur',
  'XTS',
  'XXX',
  'BTC',
  'ABC',
  'VES',
  'ZWG',
  '-1',
  '0',
  '1e9',
  '12.345',
  '99999999999999999999',
  '1,50',
  'NaN',
  'null',
  '__proto__',
  'connector:cancellation',
  '%',
  '../../etc/passwd',
  '9999-12-31T23:00:00-05:00',
  '2026-02-30T10:00:00Z',
  'fe80::1%eth0',
  '203.0.113.7',
  CLICK,
];
const NASTY_VALUES: unknown[] = [
  null,
  0,
  -1,
  1.5,
  1e308,
  Number.MAX_SAFE_INTEGER,
  true,
  {},
  [],
  ['GIFT🎁', '\uffff'],
  [CLICK, 'x'.repeat(300)],
];

function randomUnicode(f: Fuzzer, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) {
    const plane = f.int(4);
    const code =
      plane === 0
        ? 0x20 + f.int(0x5f)
        : plane === 1
          ? f.int(0xd800)
          : plane === 2
            ? 0xe000 + f.int(0x2000)
            : 0x10000 + f.int(0xfffff);
    out += String.fromCodePoint(code);
  }
  return out;
}

/** Paths of every leaf (and container) of a JSON value. */
function paths(value: unknown, prefix: (string | number)[] = [], out: (string | number)[][] = []) {
  if (prefix.length > 0) out.push(prefix);
  if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) paths(v, [...prefix, i], out);
  } else if (value && typeof value === 'object')
    for (const [k, v] of Object.entries(value)) paths(v, [...prefix, k], out);
  return out;
}

function mutate(f: Fuzzer, root: unknown, times: number): void {
  for (let n = 0; n < times; n++) {
    const all = paths(root);
    const path = f.pick(all);
    if (!path) return;
    let parent = root as Record<string | number, unknown>;
    for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
    const key = path[path.length - 1] as string | number;
    const roll = f.int(10);
    if (roll < 5) parent[key] = f.chance(0.7) ? f.pick(NASTY_STRINGS) : randomUnicode(f, 1 + f.int(40));
    else if (roll < 7) parent[key] = structuredClone(f.pick(NASTY_VALUES));
    else if (roll < 9 && !Array.isArray(parent)) delete parent[key];
    else
      parent[key] = typeof parent[key] === 'string' ? `${parent[key] as string}${f.pick(NASTY_STRINGS)}` : 7;
  }
}

interface FuzzRequest {
  readonly kind: string;
  readonly path: string;
  readonly method: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
  /** Send the headers and part of the body, never the rest. */
  readonly unfinished?: boolean;
}

const SECRET_NAMES: Record<Platform, string> = {
  shopify: 'SHOPIFY_WEBHOOK_SECRET',
  woocommerce: 'WOOCOMMERCE_WEBHOOK_SECRET',
  stripe: 'STRIPE_WEBHOOK_SECRET',
  generic: 'GENERIC_WEBHOOK_SECRET',
};

/** The topics the fuzzer sends under, valid ones more often; platforms without a topic header have none. */
const FUZZ_TOPICS: Partial<Record<Platform, string[]>> = {
  shopify: [
    'orders/create',
    'orders/create',
    'refunds/create',
    'orders/cancelled',
    'orders/paid',
    'app/uninstalled',
  ],
  woocommerce: ['order.created', 'order.created', 'order.updated', 'order.deleted'],
};

function fuzzHeaders(
  platform: Platform,
  secret: string,
  body: Buffer,
  f: Fuzzer,
  i: number,
): Record<string, string> {
  const topics = FUZZ_TOPICS[platform];
  return signedHeaders(platform, secret, body, {
    ...(topics ? { topic: f.pick(topics) } : {}),
    eventId: `fz-${i}`,
  });
}

/** A valid payload of `platform` for a fresh order `i`, before mutation. */
function payload(platform: Platform, f: Fuzzer, i: number, seed: number): Record<string, unknown> {
  const id = `${seed}${String(i).padStart(6, '0')}`;
  switch (platform) {
    case 'shopify': {
      const order = sample('shopify-order.json') as Record<string, unknown>;
      order['id'] = Number(id);
      return order;
    }
    case 'woocommerce': {
      const order = sample('woocommerce-order.json') as Record<string, unknown>;
      order['id'] = Number(id);
      return order;
    }
    case 'stripe': {
      const event = sample('stripe-checkout-session-completed.json') as Record<string, unknown>;
      event['id'] = `evt_fz_${id}`;
      return event;
    }
    case 'generic': {
      const kind = f.pick(['order', 'order', 'order', 'refund', 'cancel']);
      const orderId = `fz-${f.chance(0.5) ? id : `${seed}${String(f.int(i + 1)).padStart(6, '0')}`}`;
      if (kind === 'refund')
        return {
          type: 'refund',
          eventId: `e-${id}`,
          orderId,
          refundId: `r-${id}`,
          amount: '1.00',
          currency: 'EUR',
          reason: 'fuzz',
        };
      if (kind === 'cancel') return { type: 'cancel', eventId: `e-${id}`, orderId, reason: 'fuzz' };
      return {
        ...(sample('generic-order.json') as Record<string, unknown>),
        eventId: `e-${id}`,
        orderId,
        clickIds: [CLICK],
      };
    }
  }
}

function nextRequest(f: Fuzzer, stack: LocalStack, i: number, seed: number): FuzzRequest {
  const roll = f.random();
  const platform = f.pick(PROGRAM_SOURCES);
  const secret = stack.secrets[SECRET_NAMES[platform]] ?? '';
  const path = `/webhooks/${platform}`;
  if (roll < 0.6) {
    // Mutated, correctly signed: the signature is no defence against a buggy shop module.
    const json = payload(platform, f, i, seed);
    mutate(f, json, f.int(4));
    const body = Buffer.from(JSON.stringify(json));
    return {
      kind: 'signed-mutated',
      path,
      method: 'POST',
      headers: fuzzHeaders(platform, secret, body, f, i),
      body,
    };
  }
  if (roll < 0.7) {
    const body = Buffer.from(Array.from({ length: f.int(2048) }, () => f.int(256)));
    return {
      kind: 'signed-random-bytes',
      path,
      method: 'POST',
      headers: fuzzHeaders(platform, secret, body, f, i),
      body,
    };
  }
  if (roll < 0.8) {
    const json = payload(platform, f, i, seed);
    const body = Buffer.from(JSON.stringify(json));
    const headers = fuzzHeaders(platform, secret, body, f, i);
    const name = f.pick(Object.keys(headers));
    if (f.chance(0.5)) delete headers[name];
    else headers[name] = f.pick(NASTY_STRINGS).replace(/[^\x20-\x7e]/g, '?');
    return { kind: 'bad-headers', path, method: 'POST', headers, body };
  }
  if (roll < 0.9) {
    const json: Record<string, unknown> = {
      externalId: `fz-${seed}${String(f.int(i + 1)).padStart(6, '0')}`,
      refundId: `fin-${seed}-${i}`,
      amount: '1.00',
      currency: 'EUR',
      reason: 'fuzz',
      source: 'generic',
    };
    mutate(f, json, f.int(3));
    return {
      kind: 'refunds',
      path: '/refunds',
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': stack.secrets['FINANCE_API_KEY'] ?? '' },
      body: Buffer.from(JSON.stringify(json)),
    };
  }
  const edge = f.int(5);
  const body = Buffer.from(JSON.stringify(payload(platform, f, i, seed)));
  if (edge === 0)
    return {
      kind: 'edge-path',
      path: f.pick(['/webhooks/%', '/webhooks/%E0%A4%A', '/webhooks/unknown', '/webhooks/', '/nope']),
      method: 'POST',
      headers: {},
      body,
    };
  if (edge === 1) {
    const zipped = gzipSync(body);
    return {
      kind: 'edge-gzip',
      path,
      method: 'POST',
      headers: { ...fuzzHeaders(platform, secret, zipped, f, i), 'content-encoding': 'gzip' },
      body: zipped,
    };
  }
  if (edge === 2)
    return {
      kind: 'edge-method',
      path,
      method: f.pick(['GET', 'PUT', 'DELETE']),
      headers: {},
      body: Buffer.alloc(0),
    };
  if (edge === 3)
    return {
      kind: 'edge-oversized',
      path: f.pick([path, '/refunds']),
      method: 'POST',
      headers: fuzzHeaders(platform, secret, body, f, i),
      body: Buffer.alloc(1024 * 1024 + 1 + f.int(1000), 0x20),
    };
  // One in a few hundred: a body that never finishes.
  if (f.chance(0.1))
    return {
      kind: 'edge-unfinished',
      path,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
      unfinished: true,
    };
  return {
    kind: 'edge-empty',
    path,
    method: 'POST',
    headers: fuzzHeaders(platform, secret, Buffer.alloc(0), f, i),
    body: Buffer.alloc(0),
  };
}

/** Sends one request with node:http (fetch would refuse some of the bytes); the status, or 0 on no answer. */
function send(base: string, req: FuzzRequest): Promise<number> {
  const url = new URL(base);
  return new Promise((resolve) => {
    const headers: Record<string, string> = { ...req.headers };
    headers['content-length'] = String(req.unfinished ? req.body.byteLength + 100 : req.body.byteLength);
    const r = request(
      {
        host: url.hostname,
        port: url.port,
        method: req.method,
        path: req.path,
        headers,
        timeout: HANG_MS * 2,
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', () => resolve(res.statusCode ?? 0));
      },
    );
    r.on('timeout', () => r.destroy());
    r.on('error', () => resolve(0));
    if (req.unfinished) r.write(req.body);
    else r.end(req.body);
  });
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

/** Sources as the local stack's defaults, but unattributed orders credited in manual mode: every order reaches the platform. */
function fuzzSources(program: string, rule: string): SourceConfigInput[] {
  return PROGRAM_SOURCES.map((platform) => ({
    id: platform,
    platform,
    program,
    rule,
    secretRef: SECRET_NAMES[platform],
    unattributed: { mode: 'manual', affiliateTrackingId: DEFAULT_SEED.trackingIds[0] ?? 1 },
  }));
}

/** Starts a local stack fit for fuzzing: the sandbox on port 0, its rate limit out of the way. */
export function startFuzzStack(): Promise<LocalStack> {
  const program = DEFAULT_SEED.programs[0] ?? '';
  const rule = DEFAULT_SEED.rules[0] ?? '';
  return startLocalStack({
    port: 0,
    sandbox: { port: 0, ratePerSecond: 10_000 },
    sources: fuzzSources(program, rule),
    pollers: 4,
    visibilityBaseSeconds: 1,
  });
}

export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const started = Date.now();
  const stack = options.stack ?? (await startFuzzStack());
  try {
    const f = fuzzer(options.seed);
    // Drawn up front so the sequence depends on the seed only, not on the order answers arrive in.
    const requests = Array.from({ length: options.count }, (_, i) => nextRequest(f, stack, i, options.seed));
    const byStatus: Record<string, number> = {};
    const byKind: Record<string, number> = {};
    const latencies: number[] = [];
    const failures: string[] = [];
    let hangs = 0;
    let unanswered = 0;
    let answers5xx = 0;
    let next = 0;
    let done = 0;
    const worker = async () => {
      for (;;) {
        const i = next++;
        const req = requests[i];
        if (!req) return;
        const t0 = performance.now();
        const status = await send(stack.url, req);
        const ms = performance.now() - t0;
        latencies.push(ms);
        byStatus[status] = (byStatus[status] ?? 0) + 1;
        byKind[req.kind] = (byKind[req.kind] ?? 0) + 1;
        const broke = status >= 500 || status === 0 || ms > HANG_MS;
        if (status >= 500) answers5xx++;
        if (status === 0 || ms > HANG_MS) hangs++;
        if (status === 0) unanswered++;
        if (broke && failures.length < 10)
          failures.push(`#${i} ${req.kind} ${req.method} ${req.path} → ${status} in ${Math.round(ms)} ms`);
        done++;
        if (done % 500 === 0) options.onProgress?.(done);
      }
    };
    await Promise.all(Array.from({ length: options.concurrency ?? 16 }, worker));

    let drained = true;
    try {
      await stack.waitForIdle(options.drainTimeoutMs ?? 180_000);
    } catch {
      drained = false;
    }
    const dlq = await scanQueue(stack.emulators.sqs, stack.emulators.dlqUrl);
    const dlqByClass: Record<string, number> = {};
    const dlqReasons: Record<string, number> = {};
    for (const entry of dlq.entries) {
      dlqByClass[entry.failureClass] = (dlqByClass[entry.failureClass] ?? 0) + 1;
      const reason = `${entry.failureClass}: ${entry.reason.replace(/[0-9a-f]{24}|fz-[0-9]+|r-[0-9]+|[0-9]{6,}|"[^"]*"/g, '…').slice(0, 120)}`;
      dlqReasons[reason] = (dlqReasons[reason] ?? 0) + 1;
    }
    for (const entry of dlq.entries.filter((e) => e.failureClass === 'bad_input').slice(0, 5))
      failures.push(`DLQ bad_input: ${entry.eventType} ${entry.externalId}: ${entry.reason}`);
    latencies.sort((a, b) => a - b);
    return {
      requests: options.count,
      seed: options.seed,
      seconds: Math.round((Date.now() - started) / 100) / 10,
      byStatus,
      byKind,
      answers5xx,
      hangs,
      unanswered,
      p50Ms: Math.round(percentile(latencies, 50)),
      p99Ms: Math.round(percentile(latencies, 99)),
      maxMs: Math.round(latencies[latencies.length - 1] ?? 0),
      drained,
      conversions: stack.sandbox?.control.conversions().length ?? 0,
      dlqByClass,
      dlqReasons,
      badInputInDlq: dlqByClass['bad_input'] ?? 0,
      failures,
    };
  } finally {
    if (!options.stack) await stack.close();
  }
}

export function fuzzPassed(report: FuzzReport): boolean {
  return report.answers5xx === 0 && report.hangs === 0 && report.badInputInDlq === 0 && report.drained;
}

async function main(argv: string[]): Promise<void> {
  const program = new Command('fuzz')
    .option('--count <n>', 'requests to send', '10000')
    .option('--seed <n>', 'seed of the request generator', '13')
    .option('--concurrency <n>', 'requests in flight', '16')
    .parse(argv, { from: 'user' });
  const opts = program.opts<{ count: string; seed: string; concurrency: string }>();
  const report = await runFuzz({
    count: Number(opts.count),
    seed: Number(opts.seed),
    concurrency: Number(opts.concurrency),
    onProgress: (done) => process.stderr.write(`  ${done} sent\n`),
  });
  console.log(JSON.stringify(report, null, 2));
  console.log(
    `fuzz seed ${report.seed}: ${report.requests} requests in ${report.seconds} s; 5xx ${report.answers5xx}; ` +
      `hangs over ${HANG_MS / 1000} s ${report.hangs}; p50 ${report.p50Ms} ms, p99 ${report.p99Ms} ms, max ${report.maxMs} ms; ` +
      `queue drained ${report.drained}; conversions ${report.conversions}; DLQ ${JSON.stringify(report.dlqByClass)}; ` +
      `bad_input in DLQ ${report.badInputInDlq} → ${fuzzPassed(report) ? 'PASS' : 'FAIL'}`,
  );
  process.exitCode = fuzzPassed(report) ? 0 : 1;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  await main(process.argv.slice(2));
}

import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { makeHandler } from '../../functions/catch-up.ts';
import { type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import type { Sleep } from '../../shared/affiliate/retry.ts';
import type { CatchUpDeps, CatchUpResult } from '../../shared/backfill/catch-up.ts';
import { parseSources, type SourceConfig } from '../../shared/config/sources.ts';
import { adapterFor } from '../../shared/platforms/registry.ts';
import type { EventQueue } from '../../shared/ports.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { type AnsweringServers, answeringServers } from '../support/answering-servers.ts';
import { RecordingQueue } from '../support/recording-queue.ts';

/**
 * The scheduled catch-up reads its sources one after another within the function's 10 minutes. A
 * shop that keeps answering 429 with a long Retry-After (or answers slowly) must not spend them all:
 * the shops after it are caught up within the run, and the one that ran out of time is reported as
 * not finished, so the run fails (the CatchUpErrors alarm) naming it and what to run to finish it.
 *
 * Time is virtual: the shop clients' retry waits move the clock at once (`pass`), and whatever waits
 * on the clock (each source's share of the run, the function's own end) fires when the clock passes
 * it, so nothing here waits for real time.
 */
const CLICK = '0123456789abcdef01234567';
/** The deployed function's timeout (infra/connector-stack.ts CATCH_UP_FUNCTION). */
const RUN_MS = 10 * 60_000;

/** Virtual time for code that waits with a `Sleep`. */
class JumpClock {
  time: number;
  /** Every delay armed with `timer`, in order (not the test's own `after`). */
  readonly armed: number[] = [];
  private timers: { at: number; resolve: () => void }[] = [];

  constructor(start: number) {
    this.time = start;
  }

  /** A wait that passes at once: the clock jumps to its end, firing every timer due on the way. */
  pass: Sleep = async (ms, signal) => {
    const end = this.time + Math.max(0, ms);
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      this.timers.sort((a, b) => a.at - b.at);
      const due = this.timers[0];
      if (due === undefined || due.at > end) break;
      this.timers.shift();
      this.time = Math.max(this.time, due.at);
      due.resolve();
      // Let what the timer wakes run (a share that ends aborts this very wait).
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.time = end;
  };

  /** A wait that ends only when the clock is moved past it. */
  timer: Sleep = (ms, signal) => {
    this.armed.push(ms);
    return this.after(ms, signal);
  };

  /** The same, unrecorded: the test's own (the function's timeout). */
  after: Sleep = (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const timer = { at: this.time + Math.max(0, ms), resolve };
      this.timers.push(timer);
      signal?.addEventListener(
        'abort',
        () => {
          this.timers = this.timers.filter((t) => t !== timer);
          reject(signal.reason);
        },
        { once: true },
      );
    });
}

let sandbox: RunningSandbox;
let servers: AnsweringServers;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
});
afterAll(async () => {
  await sandbox.close();
});
beforeEach(() => {
  sandbox.shops.control.reset();
  servers = answeringServers();
});
afterEach(() => servers.close());

function source(
  platform: 'shopify' | 'woocommerce' | 'stripe',
  url = sandbox.shops.urls[platform],
): SourceConfig {
  return parseSources(
    JSON.stringify([
      {
        id: platform,
        platform,
        program: 'a'.repeat(24),
        rule: 'b'.repeat(24),
        secretRef: 'UNUSED',
        shopApi: { url, credentialsRef: `${platform.toUpperCase()}_API` },
      },
    ]),
    'sources',
  )[0]!;
}

function deps(clock: JumpClock, sources: SourceConfig[], queue: EventQueue): CatchUpDeps {
  const creds = sandbox.shops.credentials;
  return {
    sources,
    hours: 48,
    secrets: new EnvSecretStore({
      SHOPIFY_API: JSON.stringify(creds.shopify),
      WOOCOMMERCE_API: JSON.stringify(creds.woocommerce),
      STRIPE_API: JSON.stringify(creds.stripe),
    }),
    queue,
    adapterFor,
    now: () => new Date(clock.time),
    sleep: clock.timer,
    shopHttp: { sleep: clock.pass, maxAnswerBytes: 1024 * 1024 },
  };
}

/**
 * One invocation as Lambda runs it: the handler with the function's remaining time, ended by Lambda
 * at its timeout whatever it is doing. What was queued by then is all the run did.
 */
async function invoke(clock: JumpClock, d: CatchUpDeps, queue: RecordingQueue) {
  const start = clock.time;
  let result: CatchUpResult | undefined;
  const context = { getRemainingTimeInMillis: () => RUN_MS - (clock.time - start) };
  const run = makeHandler(d, (r) => {
    result = r;
  })({}, context);
  const ended = run.then(
    () => ({ timedOut: false, error: undefined }),
    (error: unknown) => ({ timedOut: false, error: error as Error }),
  );
  const killed = clock.after(RUN_MS).then(() => ({ timedOut: true, error: undefined }));
  const outcome = await Promise.race([ended, killed]);
  const queuedInTime = queue.events.map((e) => `${e.type} ${e.externalId}`);
  // Today's code goes on after the function's end; let it finish before the next test.
  await ended;
  return { ...outcome, queuedInTime, result, atEnd: clock.time - start };
}

/** A Shopify shop that answers each page 429 (Retry-After 55 s) four times, then the page: 220 s a page. */
async function rateLimitedShopify(pages: number) {
  const asked: string[] = [];
  let attempts = 0;
  const url = await servers.serve((req, res) => {
    asked.push(req.url ?? '');
    attempts++;
    if (attempts % 5 !== 0) {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '55' });
      res.end(
        '{"errors":"Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service."}',
      );
      return;
    }
    const page = attempts / 5;
    const next =
      page < pages
        ? {
            link: `<http://${req.headers.host}/admin/api/2025-07/orders.json?limit=50&page_info=p${page + 1}>; rel="next"`,
          }
        : {};
    res.writeHead(200, { 'content-type': 'application/json', ...next });
    res.end('{"orders":[]}');
  });
  return { url, asked };
}

const hoursAgo = (clock: JumpClock, h: number) => new Date(clock.time - h * 3600_000).toISOString();

describe('scheduled catch-up within the function’s time', () => {
  it('a shop that keeps answering 429 does not starve the sources after it: they are caught up, and it is reported unfinished', async () => {
    // Prepare: a rate-limited Shopify first (4 pages of 220 s: more than the 10 minutes), then two
    // healthy shops with an order each
    const clock = new JumpClock(Date.now());
    const shopify = await rateLimitedShopify(4);
    const shops = sandbox.shops.control;
    const woo = shops.createOrder('woocommerce', { clickId: CLICK, at: hoursAgo(clock, 2) }).orderId;
    const stripe = shops.createOrder('stripe', { clickId: CLICK, at: hoursAgo(clock, 1) }).orderId;
    const queue = new RecordingQueue();
    const sources = [source('shopify', shopify.url), source('woocommerce'), source('stripe')];

    // Act
    const run = await invoke(clock, deps(clock, sources, queue), queue);

    // Assess: the run ended by itself, in time, with the later shops' orders queued
    expect(run.queuedInTime).toEqual([`OrderPlaced ${woo}`, `OrderPlaced ${stripe}`]);
    expect(run.timedOut).toBe(false);
    // Shares of the 9 minutes left after the minute kept back: shopify all but a minute for each
    // shop after it (420 s); woocommerce what is left but stripe's minute; the time woocommerce did
    // not use goes on to stripe
    expect(clock.armed).toEqual([420_000, 60_000, 120_000]);
    expect(run.atEnd).toBe(420_000);
    // The rate-limited shop was not asked again once its share ended (page 1 after 5 attempts, 0 to
    // 220 s; page 2's 4 attempts, 220 to 385 s)
    expect(shopify.asked).toHaveLength(9);
    expect(run.result).toMatchObject({
      sources: [
        { source: 'woocommerce', found: 1, queued: 1 },
        { source: 'stripe', found: 1, queued: 1 },
      ],
      failed: [],
      unfinished: [{ source: 'shopify', found: 0, queued: 0 }],
    });
    const from = run.result!.from;
    const to = run.result!.to;
    expect(run.error?.message).toBe(
      `catch-up did not finish source shopify: its share of the run (420 s) ended while the shop was answering 429 and asking for 55 s waits; the next run reads its window again, or now: connector backfill --source shopify --from ${from} --to ${to}`,
    );
  });

  it('lets a slow but finishing shop use the time the shops after it do not need: only a minute each is kept for them', async () => {
    // Prepare: a Shopify shop whose one page takes 220 s (429s with 55 s waits), more than an equal
    // third of the 9 minutes, then two healthy shops with an order each
    const clock = new JumpClock(Date.now());
    const shopify = await rateLimitedShopify(1);
    const shops = sandbox.shops.control;
    const woo = shops.createOrder('woocommerce', { clickId: CLICK, at: hoursAgo(clock, 2) }).orderId;
    const stripe = shops.createOrder('stripe', { clickId: CLICK, at: hoursAgo(clock, 1) }).orderId;
    const queue = new RecordingQueue();
    const sources = [source('shopify', shopify.url), source('woocommerce'), source('stripe')];

    // Act
    const run = await invoke(clock, deps(clock, sources, queue), queue);

    // Assess: every shop read to its end, in time
    expect(run.error).toBeUndefined();
    expect(run.timedOut).toBe(false);
    expect(shopify.asked).toHaveLength(5);
    expect(run.result).toMatchObject({
      sources: [{ source: 'shopify' }, { source: 'woocommerce', queued: 1 }, { source: 'stripe', queued: 1 }],
      failed: [],
      unfinished: [],
    });
    expect(run.queuedInTime).toEqual([`OrderPlaced ${woo}`, `OrderPlaced ${stripe}`]);
    // The 540 s left less a minute for each of the two after it; then what is left, a minute kept
    expect(clock.armed).toEqual([420_000, 260_000, 320_000]);
  });

  it('queues the page in hand to its end when a share ends, so no order is left half queued, then stops', async () => {
    // Prepare: 51 Shopify orders, each refunded: two pages of 50; the queue is slow enough on the
    // first order (560 s) that the shop's share (the 540 s left) ends while its first page is queued
    const clock = new JumpClock(Date.now());
    const shops = sandbox.shops.control;
    for (let i = 0; i < 51; i++) {
      const id = shops.createOrder('shopify', { clickId: CLICK, at: hoursAgo(clock, 3) }).orderId;
      shops.createRefund('shopify', id, { at: hoursAgo(clock, 2) });
    }
    const recording = new RecordingQueue();
    const slowFirstSend: EventQueue = {
      async send(event, options) {
        if (recording.sent.length === 0) await clock.pass(560_000);
        return recording.send(event, options);
      },
    };

    // Act
    const run = await invoke(clock, deps(clock, [source('shopify')], slowFirstSend), recording);

    // Assess: page 1 queued whole (each order placed, then its refund), page 2 not read
    const placed = recording.events.filter((e) => e.type === 'OrderPlaced').map((e) => e.externalId);
    const refunded = recording.events.filter((e) => e.type === 'OrderRefunded').map((e) => e.externalId);
    expect(placed).toHaveLength(50);
    expect(refunded).toEqual(placed);
    for (const id of placed) {
      const types = recording.events.filter((e) => e.externalId === id).map((e) => e.type);
      expect(types).toEqual(['OrderPlaced', 'OrderRefunded']);
    }
    expect(run.result).toMatchObject({ unfinished: [{ source: 'shopify', found: 100, queued: 100 }] });
    expect(run.error?.message).toContain(
      'catch-up did not finish source shopify: its share of the run (540 s) ended',
    );
  });

  it('starts no source once the run’s time is spent, and names each', async () => {
    // Prepare: an invocation with less time left than the catch-up keeps back
    const clock = new JumpClock(Date.now());
    const queue = new RecordingQueue();
    const d = deps(clock, [source('woocommerce'), source('stripe')], queue);

    // Act
    const error = await makeHandler(d)({}, { getRemainingTimeInMillis: () => 30_000 }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );

    // Assess
    expect(queue.sent).toEqual([]);
    expect(error?.message).toContain('catch-up did not finish source woocommerce: not started');
    expect(error?.message).toContain('catch-up did not finish source stripe: not started');
  });
});

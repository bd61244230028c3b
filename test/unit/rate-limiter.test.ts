import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type RateDecision, RateLimiter as ServerRateLimiter } from '../../sandbox/rate-limit.ts';
import {
  type CountedAnswer,
  type FleetPaces,
  RateLimiter,
  windowBound,
} from '../../shared/affiliate/rate-limiter.ts';
import { TransientError } from '../../shared/errors.ts';
import { FakeClock } from '../support/clock.ts';

function limiterWith(clock: FakeClock, ratePerSecond?: number): RateLimiter {
  return new RateLimiter({ ratePerSecond, now: clock.now, sleep: clock.sleep });
}

/** Adaptive from 10/s, with a fleet record that claims through `claim` and shares nothing. */
function limiterClaiming(clock: FakeClock, claim: FleetPaces['claim']): RateLimiter {
  return new RateLimiter({
    adaptive: { initialRatePerSecond: 10, fleet: { share: async () => [], claim } },
    now: clock.now,
    sleep: clock.sleep,
  });
}

describe('RateLimiter', () => {
  it('admits up to the limit at once, then waits until the oldest completion is a window old', async () => {
    // Prepare
    const clock = new FakeClock();
    const limiter = limiterWith(clock, 3);
    const first = await limiter.acquire('r');
    await limiter.acquire('r');
    await limiter.acquire('r');
    void clock.sleep(50).then(() => first.release());

    // Act
    const fourth = await clock.run(limiter.acquire('r'));

    // Assess
    expect(first.waitedMs).toBe(0);
    expect(fourth.waitedMs).toBe(1050);
    expect(clock.time).toBe(1050);
  });

  it('keeps a 300-request burst at 100 per second: no window of 1 s sees more than 100 requests', async () => {
    // Prepare
    const clock = new FakeClock();
    const limiter = limiterWith(clock);
    const spans: { sent: number; done: number }[] = [];
    const request = async (): Promise<void> => {
      const permit = await limiter.acquire('/advertiser/conversions.add');
      const sent = clock.now();
      await clock.sleep(5 + (spans.length % 7) * 3); // latency varies
      spans.push({ sent, done: clock.now() });
      permit.release();
    };

    // Act
    await clock.run(Promise.all(Array.from({ length: 300 }, request)));

    // Assess: whenever the server counts a request (between send and answer), any one-second
    // window holds at most 100 of them.
    const sent = spans.map((s) => s.sent).sort((a, b) => a - b);
    expect(sent).toHaveLength(300);
    for (const { sent: from } of spans) {
      const inWindow = spans.filter((s) => s.done >= from && s.sent < from + 1000).length;
      expect(inWindow).toBeLessThanOrEqual(100);
    }
    expect((sent[299] ?? 0) - (sent[0] ?? 0)).toBeGreaterThanOrEqual(2000);
  });

  it('admits waiting callers in the order they came', async () => {
    // Prepare
    const clock = new FakeClock();
    const limiter = limiterWith(clock, 1);
    const order: number[] = [];
    const caller = async (n: number): Promise<void> => {
      const permit = await limiter.acquire('r');
      order.push(n);
      permit.release();
    };

    // Act
    await clock.run(Promise.all([1, 2, 3, 4].map(caller)));

    // Assess
    expect(order).toEqual([1, 2, 3, 4]);
    expect(clock.time).toBe(3000);
  });

  it('limits each key on its own', async () => {
    // Prepare
    const clock = new FakeClock();
    const limiter = limiterWith(clock, 1);
    await limiter.acquire('/a');

    // Act
    const other = await clock.run(limiter.acquire('/b'));

    // Assess
    expect(other.waitedMs).toBe(0);
  });

  it('holds a key until the time the server asked for', async () => {
    // Prepare
    const clock = new FakeClock();
    const limiter = limiterWith(clock);
    limiter.holdUntil('r', 412);

    // Act
    const permit = await clock.run(limiter.acquire('r'));

    // Assess
    expect(permit.waitedMs).toBe(412);
  });

  it('does not begin a wait that would end past the deadline', async () => {
    // Prepare
    const clock = new FakeClock();
    const limiter = limiterWith(clock, 1);
    (await limiter.acquire('r')).release();

    // Act
    const result = clock.run(limiter.acquire('r', { deadline: 600 }));

    // Assess
    await expect(result).rejects.toBeInstanceOf(TransientError);
    await expect(result).rejects.toMatchObject({ retryAfterMs: 1000 });
    expect(clock.time).toBe(0);
  });

  it('gives up at the deadline when every slot stays in flight', async () => {
    // Prepare
    const clock = new FakeClock();
    const limiter = limiterWith(clock, 1);
    await limiter.acquire('r'); // never released

    // Act
    const result = clock.run(limiter.acquire('r', { deadline: 500 }));

    // Assess
    await expect(result).rejects.toBeInstanceOf(TransientError);
    expect(clock.time).toBe(500);
  });

  it('wakes a caller waiting on in-flight requests when one completes', async () => {
    // Prepare
    const clock = new FakeClock();
    const limiter = limiterWith(clock, 1);
    const busy = await limiter.acquire('r');
    void clock.sleep(30).then(() => busy.release());

    // Act
    const permit = await clock.run(limiter.acquire('r'));

    // Assess
    expect(permit.waitedMs).toBe(1030);
  });

  it('rejects an aborted wait with the reason and still serves the callers behind it', async () => {
    // Prepare
    const clock = new FakeClock();
    const limiter = limiterWith(clock, 1);
    (await limiter.acquire('r')).release();
    const controller = new AbortController();
    const aborted = limiter.acquire('r', { signal: controller.signal });
    const next = limiter.acquire('r');
    const reason = new Error('caller gave up');

    // Act
    controller.abort(reason);

    // Assess
    await expect(aborted).rejects.toBe(reason);
    const permit = await clock.run(next);
    expect(permit.waitedMs).toBe(1000);
  });

  it('spreads a fractional rate over a longer window', async () => {
    // Prepare
    const clock = new FakeClock();
    const limiter = limiterWith(clock, 0.5);
    (await limiter.acquire('r')).release();

    // Act
    const second = await clock.run(limiter.acquire('r'));

    // Assess
    expect(second.waitedMs).toBe(2000);
  });

  it('never waits when limiting is off', async () => {
    // Prepare
    const clock = new FakeClock();
    const limiter = limiterWith(clock, Number.POSITIVE_INFINITY);

    // Act
    const permits = await clock.run(Promise.all(Array.from({ length: 1000 }, () => limiter.acquire('r'))));

    // Assess
    expect(permits.every((p) => p.waitedMs === 0)).toBe(true);
  });

  it('refuses a rate that is not positive', () => {
    expect(() => new RateLimiter({ ratePerSecond: 0 })).toThrow(RangeError);
  });
});

describe('windowBound', () => {
  // The reference answer: sent at 1000, read at 1100, the 90th request of its server window.
  const answer: CountedAnswer = { sentAt: 1000, at: 1100, consumed: 90, limit: 100 };
  const read = (consumed: number): CountedAnswer => ({ sentAt: 950, at: 1050, consumed, limit: 100 });

  it.each([
    ['the answer alone: the 90 it saw and the request sent now', 0, [1100], [], 91],
    ['answered before the answer was sent: arrived before it', 0, [900, 999, 1100], [], 91],
    ['answered the moment it was sent: may have arrived after it', 0, [1000, 1100], [], 92],
    ['each request in flight may land after it', 9, [1100], [], 100],
    ['answered since, with no count (a timeout): may have landed after it', 0, [1050, 1100], [], 92],
    ['answered since with a lower count: arrived before it', 9, [1050, 1100], [read(85)], 100],
    ['answered since with a higher count: arrived after it', 9, [1050, 1100], [read(95)], 101],
    ['answered since with the same count: of another window', 9, [1050, 1100], [read(90)], 101],
  ] as const)(
    'bounds the next window by what an answer counted: %s',
    (_, inFlight, finished, others, bound) => {
      // Act: the answers read in order, the reference last
      const result = windowBound(answer, inFlight, finished, [...others, answer]);

      // Assess
      expect(result).toBe(bound);
    },
  );
});

/**
 * `instances` independent limiters (as separate Lambda containers: no shared memory) draining one
 * backlog of `requests` through the sandbox's own fixed-window counter at 100/s per route, each
 * with `concurrency` callers, answers read from the server's headers; optionally a foreign client
 * on the same token taking `foreignPerSecond`. Latency 50–149 ms, deterministic.
 */
async function drainThroughServer(options: {
  instances: number;
  requests: number;
  concurrency?: number;
  foreignPerSecond?: number;
  /** Each instance at this fixed rate instead (the static split of the deployed stack before). */
  staticPerSecond?: number;
  /** Each instance's own backlog (the messages its pollers hold) instead of one shared backlog. */
  backlogs?: readonly number[];
  /** When each instance starts (ms), as containers that scale up one after another. */
  startsMs?: readonly number[];
  /** The instances compare paces in one shared record (`FleetPaces`), as through the pacing table. */
  fleet?: boolean;
  /** Each instance's start pace per second (default 10). */
  initialPerSecond?: number;
  /** Request `n`'s round trip (ms) and the share of it before the server counts it. */
  latency?: (n: number) => number;
  arrival?: (n: number) => number;
}): Promise<{ perSecond: number; share429: number; peakPerWindow: number; done: number[][] }> {
  const { instances, requests, concurrency = 10, foreignPerSecond = 0, staticPerSecond, backlogs } = options;
  const board = new Map<string, { pace: number; at: number; claiming?: boolean }>();
  const arrivals = new Map<string, number>();
  const clock = new FakeClock();
  const server = new ServerWindows();
  const limit = 100;
  let next = 0;
  let done = 0;
  let calls = 0;
  let refused = 0;
  let last = 0;
  const latency = options.latency ?? ((n: number) => 50 + ((n * 37) % 100));
  const arrival = options.arrival ?? (() => 0.5);
  // The pacing table in memory, as DynamoPacingBoard uses it: an answer a few milliseconds later,
  // entries older than 2 s ignored; a claim marks its entry as claiming (counting an arrival if it
  // was not on the table), reads the settled others' paces and how many others claim, and writes
  // only if nobody arrived meanwhile (the table's conditional write).
  const entries = (key: string, except?: string) =>
    [...board.entries()]
      .filter(
        ([name, entry]) => name.startsWith(`${key}#`) && name !== except && clock.now() - entry.at <= 2000,
      )
      .map(([, entry]) => entry);
  const fresh = (key: string, except?: string) => entries(key, except).map((entry) => entry.pace);
  const fleetOf = (instance: number): FleetPaces => ({
    share: async (key, pace) => {
      await clock.sleep(5);
      board.set(`${key}#${instance}`, { pace, at: clock.now() });
      return fresh(key);
    },
    claim: async (key, pace, decide) => {
      const me = `${key}#${instance}`;
      for (let attempt = 0; attempt < 10; attempt++) {
        await clock.sleep(5);
        const arriving = clock.now() - (board.get(me)?.at ?? Number.NEGATIVE_INFINITY) > 2000;
        board.set(me, { pace, at: clock.now(), claiming: true });
        const seen = (arrivals.get(key) ?? 0) + (arriving ? 1 : 0);
        arrivals.set(key, seen);
        const others = entries(key, me);
        const claimed = decide(
          others.filter((e) => !e.claiming).map((e) => e.pace),
          others.filter((e) => e.claiming).length,
        );
        await clock.sleep(5);
        if (arrivals.get(key) !== seen) continue;
        board.set(me, { pace: claimed, at: clock.now() });
        return claimed;
      }
      return undefined;
    },
  });
  const limiters = Array.from(
    { length: instances },
    (_, i) =>
      new RateLimiter({
        ratePerSecond: staticPerSecond ?? limit,
        adaptive:
          staticPerSecond === undefined
            ? {
                initialRatePerSecond: options.initialPerSecond ?? 10,
                ...(options.fleet ? { fleet: fleetOf(i) } : {}),
              }
            : undefined,
        now: clock.now,
        sleep: clock.sleep,
      }),
  );
  const left = backlogs ? [...backlogs] : [];
  const finished: number[][] = Array.from({ length: instances }, () => []);
  // The next request instance `i` sends, if its backlog (or the shared one) has any left.
  const take = (i: number): number | undefined => {
    if (!backlogs) return next < requests ? next++ : undefined;
    const mine = left[i] ?? 0;
    if (mine <= 0) return undefined;
    left[i] = mine - 1;
    return next++;
  };
  const caller = async (limiter: RateLimiter, i: number): Promise<void> => {
    await clock.sleep(options.startsMs?.[i] ?? 0);
    for (let n = take(i); n !== undefined; n = take(i)) {
      for (;;) {
        const permit = await limiter.acquire('add');
        const sentAt = clock.now();
        const wait = latency(n + calls);
        const before = wait * arrival(n + calls);
        await clock.sleep(before);
        calls += 1;
        const decision = server.hit('token:add', clock.now(), limit);
        await clock.sleep(wait - before);
        limiter.observe('add', {
          limit: decision.limit,
          remaining: decision.remaining,
          rateLimited: !decision.allowed,
          sentAt,
        });
        permit.release();
        if (decision.allowed) break;
        refused += 1;
        limiter.holdUntil('add', clock.now() + decision.retryAfterMs);
      }
      done += 1;
      last = clock.now();
      finished[i]?.push(last);
    }
  };
  const foreign = async (): Promise<void> => {
    while (done < total) {
      server.hit('token:add', clock.now(), limit);
      await clock.sleep(1000 / foreignPerSecond);
    }
  };
  const total = backlogs ? backlogs.reduce((a, b) => a + b, 0) : requests;
  const work = limiters.flatMap((limiter, i) =>
    Array.from({ length: concurrency }, () => caller(limiter, i)),
  );
  if (foreignPerSecond > 0) work.push(foreign());
  await clock.run(Promise.all(work));
  return {
    perSecond: (done * 1000) / last,
    share429: refused / calls,
    peakPerWindow: server.peak,
    done: finished,
  };
}

/** The sandbox's window counter, recording the most requests any window admitted. */
class ServerWindows extends ServerRateLimiter {
  peak = 0;
  override hit(key: string, now: number, limit: number): RateDecision {
    const decision = super.hit(key, now, limit);
    this.peak = Math.max(this.peak, decision.consumed);
    return decision;
  }
}

describe('RateLimiter with adaptive pacing from the platform headers', () => {
  it.each([1, 2, 5, 10])(
    'lets %i independent instances together use the route with almost no 429s',
    async (instances) => {
      // Act
      const result = await drainThroughServer({ instances, requests: 3000 });
      const split = await drainThroughServer({
        instances,
        requests: 3000,
        staticPerSecond: Math.floor(80 / instances),
      });

      // Assess: near the limit from two instances on (ramp included; one instance alone is held
      // by its ten callers' round trips: see the next test with thirty), well above the static 80%
      // split, and few 429s. Now 89.8 / 95.2 / 95.1 / 95.7 per second, 0.00–0.60% 429s; with the
      // 3% margin before 2026-11-26, 89.7 / 95.1 / 96.5 / 95.6 and 0.00–0.43% (this one scenario
      // of five instances lost 1.4/s at 2%; the bench's five gained 0.3,
      // docs/benchmarks-history.md); 88.3 for one instance before the server's count freed it past
      // its send-to-answer count; 87.4 / 94.0 / 94.0 / 95.5 before the early ramp.
      expect(result.share429).toBeLessThanOrEqual(0.01);
      expect(result.perSecond).toBeGreaterThanOrEqual(instances === 1 ? 87 : 94.3);
      expect(result.perSecond).toBeGreaterThan(split.perSecond * 1.1);
    },
  );

  it('settles near what a foreign client on the same token leaves', async () => {
    // Act
    const result = await drainThroughServer({ instances: 5, requests: 2000, foreignPerSecond: 30 });

    // Assess: at least 90% of the 70/s left, never the foreign client's share
    expect(result.share429).toBeLessThanOrEqual(0.01);
    expect(result.perSecond).toBeGreaterThanOrEqual(63);
    expect(result.perSecond).toBeLessThanOrEqual(70);
  });

  it('keeps a single instance under the limit in every server window, whatever it learns', async () => {
    // Act
    const result = await drainThroughServer({ instances: 1, requests: 1000, concurrency: 50 });

    // Assess
    expect(result.share429).toBe(0);
  });

  it("runs one instance alone past its send-to-answer count where the platform's count shows room", async () => {
    // Act
    const result = await drainThroughServer({ instances: 1, requests: 3000, concurrency: 30 });

    // Assess: 92.5 per second; the send-to-answer count alone held it at 88.8 (a slot is taken from
    // a request's send until a window after its answer: about 90/s at these round trips)
    expect(result.share429).toBe(0);
    expect(result.perSecond).toBeGreaterThanOrEqual(92);
  });

  it('never draws a 429 from a single instance bursting at its ceiling, whatever the round trips', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 300 }),
        fc.integer({ min: 0, max: 400 }),
        fc.integer({ min: 1, max: 97 }),
        fc.integer({ min: 0, max: 10 }),
        fc.integer({ min: 20, max: 80 }),
        async (base, spread, step, arrivalStep, concurrency) => {
          // Act: every request at once from the ceiling's pace; round trips of base to base +
          // spread ms, the server counting each anywhere from its send to its answer
          const result = await drainThroughServer({
            instances: 1,
            requests: 2000,
            concurrency,
            initialPerSecond: 100,
            latency: (n) => base + ((n * step) % (spread + 1)),
            arrival: (n) => ((n * arrivalStep) % 11) / 10,
          });

          // Assess
          expect(result.peakPerWindow).toBeLessThanOrEqual(100);
          expect(result.share429).toBe(0);
        },
      ),
      { numRuns: 25, seed: 16 },
    );
  });

  it('slows down when the route runs over its target before any 429, even with no caller waiting', async () => {
    // Prepare: an instance paced at 50/s; another client pushes the route to 110/s
    const clock = new FakeClock();
    const limiter = new RateLimiter({
      adaptive: { initialRatePerSecond: 50 },
      now: clock.now,
      sleep: clock.sleep,
    });
    const answer = (sentAt: number, remaining: number) =>
      limiter.observe('add', { limit: 100, remaining, rateLimited: false, sentAt });

    // Act: five answers of one server window, 11 requests apart every 100 ms, then the next window
    for (let i = 0; i < 5; i++) answer(i * 100, 90 - 11 * i);
    clock.time = 1000;
    answer(1000, 99);

    // Assess
    expect(limiter.allowance('add')).toBeLessThan(50);
  });

  it('paces from the due times, so timers that fire late cost no rate', async () => {
    // Prepare: 10/s, and every timer fires 30 ms late (a busy event loop)
    const clock = new FakeClock();
    const limiter = new RateLimiter({
      adaptive: { initialRatePerSecond: 10 },
      now: clock.now,
      sleep: (ms, signal) => clock.sleep(ms + 30, signal),
    });
    const admitted: number[] = [];

    // Act
    await clock.run(
      Promise.all(
        Array.from({ length: 11 }, async () => {
          (await limiter.acquire('add')).release();
          admitted.push(clock.now());
        }),
      ),
    );

    // Assess: ten spacings of 100 ms take one late timer longer, not ten; never more than two
    // admissions within one spacing
    expect(admitted.at(-1)).toBe(1030);
    for (const [i, at] of admitted.entries()) {
      expect((admitted[i + 2] ?? Number.POSITIVE_INFINITY) - at).toBeGreaterThanOrEqual(100);
    }
  });

  it('aims further under the limit after a window ran full, while the same rate in clean windows holds', async () => {
    // Prepare: two instances at 48/s, each seeing the route at 97/s over one window
    const clock = new FakeClock();
    const [full, clean] = [0, 1].map(
      () => new RateLimiter({ adaptive: { initialRatePerSecond: 48 }, now: clock.now, sleep: clock.sleep }),
    ) as [RateLimiter, RateLimiter];
    const window = (limiter: RateLimiter) => {
      for (let i = 0; i < 10; i++) {
        const consumed = 10 + Math.round(9.7 * i);
        limiter.observe('add', {
          limit: 100,
          remaining: 100 - consumed,
          rateLimited: false,
          sentAt: i * 100,
        });
      }
    };

    // Act: one of them also got an answer (late) that saw nothing left in its window
    window(full);
    full.observe('add', { limit: 100, remaining: 0, rateLimited: false, sentAt: 850 });
    window(clean);
    clock.time = 1000;
    for (const limiter of [full, clean])
      limiter.observe('add', { limit: 100, remaining: 99, rateLimited: false, sentAt: 1000 });

    // Assess
    expect(clean.allowance('add')).toBe(48);
    expect(full.allowance('add')).toBeLessThan(48);
  });

  it("reads the platform's window length from its reset header: 120/s is over a 2 s window of 200", async () => {
    // Prepare
    const clock = new FakeClock();
    const [told, untold] = [0, 1].map(
      () => new RateLimiter({ adaptive: { initialRatePerSecond: 40 }, now: clock.now, sleep: clock.sleep }),
    ) as [RateLimiter, RateLimiter];
    const answers = (limiter: RateLimiter, windowMs: number | undefined) => {
      for (let i = 0; i < 10; i++) {
        const remaining = 200 - (10 + 12 * i);
        limiter.observe('add', { limit: 200, remaining, rateLimited: false, sentAt: i * 100, windowMs });
      }
    };

    // Act: the route at 120/s, told the window is 2 s long or not told
    answers(told, 2000);
    answers(untold, undefined);
    clock.time = 1000;
    for (const limiter of [told, untold])
      limiter.observe('add', { limit: 200, remaining: 199, rateLimited: false, sentAt: 1000 });

    // Assess: 240 per 2 s window is over 200; read as a 1 s window it would look half used
    expect(told.allowance('add')).toBeLessThan(40);
    expect(untold.allowance('add')).toBe(40);
  });
  it('ramps a cold-started fleet to the route within its first window', async () => {
    // Act: two instances from their cold-start pace (10/s each)
    const result = await drainThroughServer({ instances: 2, requests: 3000 });

    // Assess: answered in the first second (54; before: 18, the pace moved only after a whole
    // window, and only by half the gap)
    const firstSecond = result.done.flat().filter((t) => t < 1000).length;
    expect(firstSecond).toBeGreaterThanOrEqual(50);
  });

  it('starts a cold fleet that compares paces at the route at once, in equal shares', async () => {
    // Act: two instances from their cold-start pace (10/s each), with and without the shared record
    const shared = await drainThroughServer({ instances: 2, requests: 3000, fleet: true });
    const alone = await drainThroughServer({ instances: 2, requests: 3000 });

    // Assess: answered in the first second 40 + 42 (before: 54 in all, as alone: the ramp needed
    // answers at the start pace to measure the route), few 429s, and the whole drain as fast (95.3
    // against 95.2/s here: this simulation has no pipeline, so the start is all it can gain; 94.7
    // while every claim, even one that left the pace as it was, restarted the measurement)
    const firstSecond = shared.done.map((d) => d.filter((t) => t < 1000).length);
    expect(firstSecond[0] ?? 0).toBeGreaterThanOrEqual(35);
    expect(firstSecond[1] ?? 0).toBeGreaterThanOrEqual(35);
    expect((firstSecond[0] ?? 0) + (firstSecond[1] ?? 0)).toBeGreaterThanOrEqual(75);
    expect(shared.peakPerWindow).toBeLessThanOrEqual(100);
    expect(shared.share429).toBeLessThanOrEqual(0.01);
    expect(shared.perSecond).toBeGreaterThanOrEqual(alone.perSecond - 0.5);
  });

  it('restarts a key back from idle at its start pace and claims, not at the pace it had alone', async () => {
    // Prepare: an instance drains alone up to the route, then idles 3 s while a sibling takes it
    const clock = new FakeClock();
    const claimed: number[][] = [];
    const fleet: FleetPaces = {
      share: async () => [],
      claim: async (_key, _pace, decide) => {
        const others = [90];
        claimed.push(others);
        return decide(others, 0);
      },
    };
    const [withFleet, without] = [fleet, undefined].map(
      (f) =>
        new RateLimiter({
          adaptive: { initialRatePerSecond: 10, ...(f ? { fleet: f } : {}) },
          now: clock.now,
          sleep: clock.sleep,
        }),
    ) as [RateLimiter, RateLimiter];
    const burst = (limiter: RateLimiter, n: number) =>
      Promise.all(Array.from({ length: n }, async () => (await limiter.acquire('add')).release()));
    for (const limiter of [withFleet, without]) {
      // Answers over one window that show the route near idle: it ramps
      for (let i = 0; i < 20; i++)
        limiter.observe('add', { limit: 100, remaining: 99 - i, rateLimited: false, sentAt: i * 50 });
      await clock.run(burst(limiter, 3));
    }
    clock.time += 1000;
    await clock.run(burst(withFleet, 3));
    await clock.run(burst(without, 3));
    const grown = without.allowance('add');
    clock.time += 3000;

    // Act: work comes back
    await clock.run(burst(withFleet, 5));

    // Assess: with the record it came back at no more than its start pace (10) and claimed what the
    // busy sibling at 90 leaves (8 of the target of 98, at least its start pace); alone it keeps
    // the pace it had
    expect(grown).toBeGreaterThanOrEqual(30);
    expect(claimed.length).toBeGreaterThanOrEqual(1);
    expect(withFleet.allowance('add')).toBe(10);
  });

  it('trims a pace recorded over the limit while the route runs full, not when it runs under', async () => {
    // Prepare: two instances at 30/s whose record shows four busy instances at 30 (120 in all); one
    // measures the route full (98/s), the other at 60/s (the end of a backlog: the entries of
    // instances that ran dry stay in the record for two seconds)
    const clock = new FakeClock();
    const make = () =>
      new RateLimiter({
        adaptive: {
          initialRatePerSecond: 30,
          fleet: { share: async () => [30, 30, 30, 30], claim: async () => undefined },
        },
        now: clock.now,
        sleep: clock.sleep,
      });
    const [full, under] = [make(), make()];
    const burst = (limiter: RateLimiter) =>
      Promise.all([0, 1, 2].map(async () => (await limiter.acquire('add')).release()));
    await clock.run(Promise.all([burst(full), burst(under)]));
    for (const [limiter, perSecond] of [
      [full, 98],
      [under, 60],
    ] as const) {
      for (let i = 0; i < 10; i++) {
        const consumed = Math.round((perSecond / 10) * (i + 1));
        limiter.observe('add', {
          limit: 100,
          remaining: 100 - consumed,
          rateLimited: false,
          sentAt: 100 + i * 90,
        });
      }
    }

    // Act: a window on, both close their epoch and share with the record
    clock.time = 1100;
    await clock.run(Promise.all([burst(full), burst(under)]));
    await clock.run(clock.sleep(10));

    // Assess: the one on a full route gives up the excess down to the fair share (98 ÷ 4); the
    // other keeps its pace and grows into the route its siblings left
    expect(full.allowance('add')).toBeLessThanOrEqual(25);
    expect(under.allowance('add')).toBeGreaterThanOrEqual(30);
  });

  it('claims only on a route where callers wait: a trickle of requests keeps the start pace', async () => {
    // Prepare
    const clock = new FakeClock();
    let claims = 0;
    const limiter = limiterClaiming(clock, async (_key, _pace, decide) => {
      claims += 1;
      return decide([], 0);
    });

    // Act: one request every 200 ms (under the start pace), then three at once
    for (let i = 0; i < 5; i++) {
      (await limiter.acquire('refuse')).release();
      clock.time += 200;
    }
    const trickle = claims;
    await clock.run(Promise.all([0, 1, 2].map(async () => (await limiter.acquire('refuse')).release())));

    // Assess: no claim for the trickle; the burst waited, claimed and took the idle route's target
    expect(trickle).toBe(0);
    expect(claims).toBe(1);
    expect(limiter.allowance('refuse')).toBe(98);
  });

  it('claims again for a window after its first claim lands, however long that claim took', async () => {
    // Prepare: the first claim takes 1.1 s (the pacing table busy, as dynalite is at the bench's
    // start behind a thousand ledger writes) and finds the route free; by the time it lands, a
    // sibling has arrived at its start pace (8), and the claims after it see that
    const clock = new FakeClock();
    const decided: number[] = [];
    const limiter = limiterClaiming(clock, async (_key, _pace, decide) => {
      const first = decided.length === 0;
      await clock.sleep(first ? 1100 : 5);
      decided.push(decide(first ? [] : [8], 0));
      return decided.at(-1);
    });

    // Act: callers queue from the start until 1.8 s
    await clock.run(
      Promise.all(
        Array.from({ length: 10 }, async () => {
          while (clock.now() < 1800) (await limiter.acquire('add')).release();
        }),
      ),
    );

    // Assess: it took the free route, then, claiming again in the window after, made room for the
    // sibling (half the target of 98 each). The code before counted that window from the claim's
    // start, so a claim slower than a window landed with it over and kept 98 beside the sibling's
    // 8 (in the bench's traces, paces summing to 103–130 until the route ran over)
    expect(decided[0]).toBe(98);
    expect(decided.length).toBeGreaterThanOrEqual(3);
    expect(limiter.allowance('add')).toBe(49);
  });

  it('keeps a claim that lands late, however long the table took to write it', async () => {
    // Prepare: the claim decides at once on a free route (98), then the table takes 400 ms to
    // write it (dynalite behind the ledger's writes at the bench's start, on a slow machine)
    const clock = new FakeClock();
    const landed: number[] = [];
    const limiter = limiterClaiming(clock, async (_key, _pace, decide) => {
      const pace = decide([], 0);
      await clock.sleep(400);
      landed.push(clock.now());
      return pace;
    });

    // Act: callers queue from the start until 500 ms
    await clock.run(
      Promise.all(
        Array.from({ length: 10 }, async () => {
          while (clock.now() < 500) (await limiter.acquire('add')).release();
        }),
      ),
    );

    // Assess: the claim landed at 400 ms and its pace holds. The code before dropped a claim
    // whose read had aged past a quarter window, so the instance kept its own pace (11 here);
    // in a traced bench run on a slow machine 17 of 25 429s came to instances whose claims never
    // landed (docs/benchmarks-history.md)
    expect(landed[0]).toBe(400);
    expect(limiter.allowance('add')).toBe(98);
  });

  it('keeps measuring through claims that leave its pace as it was', async () => {
    // Prepare: the record always gives it half the target (49), while a foreign client the record
    // cannot see takes 56/s, so the route runs at about 105/s. The server's own limit is set high
    // so that no 429 comes: only the measured rate can bring the pace down
    const clock = new FakeClock();
    const server = new ServerRateLimiter();
    let claims = 0;
    const limiter = limiterClaiming(clock, async (_key, _pace, decide) => {
      claims += 1;
      await clock.sleep(5);
      return decide([49], 0);
    });
    const until = 1100;
    const foreign = async () => {
      for (; clock.now() < until; await clock.sleep(1000 / 56)) server.hit('add', clock.now(), 1000);
    };
    const caller = async () => {
      while (clock.now() < until) {
        const permit = await limiter.acquire('add');
        const sentAt = clock.now();
        await clock.sleep(50);
        const { consumed } = server.hit('add', clock.now(), 1000);
        await clock.sleep(50);
        limiter.observe('add', {
          limit: 100,
          remaining: Math.max(0, 100 - consumed),
          rateLimited: false,
          sentAt,
        });
        permit.release();
      }
    };

    // Act: a backlog from the start, beside the foreign client, for 1.1 s
    await clock.run(Promise.all([foreign(), ...Array.from({ length: 10 }, caller)]));

    // Assess: it claimed again every 200 ms, each time the same 49, and its first window's
    // measurement still closed at a window and took the pace down. The code before restarted the
    // measurement at every claim, so none closed until a window after the last one (2 s in)
    expect(claims).toBeGreaterThanOrEqual(4);
    expect(limiter.allowance('add')).toBeLessThan(49);
  });

  it.each([
    // two settled at 50 and 20 of the 98 the fleet aims at: a third of the 28 left free (all of it
    // would put the route over its target once the other two claimers took theirs)
    { settled: [50, 20], claiming: 2, pace: 9 },
    // two settled at 10: an equal fifth of the 98, not a third (the claimers count among the busy)
    { settled: [10, 10], claiming: 2, pace: 19 },
  ])(
    'claims its part of what $settled leave, with $claiming others claiming at once',
    async ({ settled, claiming, pace }) => {
      // Prepare
      const clock = new FakeClock();
      const limiter = new RateLimiter({
        adaptive: {
          initialRatePerSecond: 2,
          fleet: { share: async () => [], claim: async (_key, _pace, decide) => decide(settled, claiming) },
        },
        now: clock.now,
        sleep: clock.sleep,
      });

      // Act: a burst, so callers wait and the key claims
      await clock.run(Promise.all([0, 1, 2].map(async () => (await limiter.acquire('add')).release())));

      // Assess
      expect(limiter.allowance('add')).toBe(pace);
    },
  );

  it('hands the budget of siblings whose backlog ran out to the one still busy within a window', async () => {
    // Act: three instances share the route; two hold 300 requests each, the third 1,500
    const result = await drainThroughServer({ instances: 3, requests: 0, backlogs: [1500, 300, 300] });

    // Assess: the busy one's answers in the second after the others finished (57, then 89; before:
    // 42, then 80: it waited out a whole window before growing)
    const [busy = [], ...others] = result.done;
    const freed = Math.max(...others.map((d) => d.at(-1) ?? 0));
    const next = busy.filter((t) => t > freed && t <= freed + 1000).length;
    expect(next).toBeGreaterThanOrEqual(55);
  });
  it('evens out the split of instances that started one after another when they compare paces', async () => {
    // Act: five instances starting 0.4 s apart on one backlog, with and without the shared record
    const run = (fleet: boolean) =>
      drainThroughServer({ instances: 5, requests: 3000, startsMs: [0, 400, 800, 1200, 1600], fleet });
    const [alone, shared] = [await run(false), await run(true)];

    // Assess: each instance's answers from the 8th to the 14th second. Alone, the first starter
    // takes most of the route and keeps it (proportional steps keep a split): 8.9 times the
    // slowest's; with the record 1.25, and the drain 94.9/s against 93.6 (1.27 and 93.6 while
    // every claim, even one that left the pace as it was, restarted the measurement).
    const uneven = (r: Awaited<ReturnType<typeof run>>) => {
      const counts = r.done.map((d) => d.filter((t) => t >= 8000 && t < 14_000).length);
      return Math.max(...counts) / Math.max(1, Math.min(...counts));
    };
    expect(uneven(shared)).toBeLessThan(1.5);
    expect(shared.share429).toBeLessThanOrEqual(0.01);
    expect(shared.perSecond).toBeGreaterThanOrEqual(alone.perSecond - 1);
  });
});

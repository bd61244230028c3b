import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../shared/affiliate/rate-limiter.ts';
import { TransientError } from '../../shared/errors.ts';
import { FakeClock } from '../support/clock.ts';

function limiterWith(clock: FakeClock, ratePerSecond?: number): RateLimiter {
  return new RateLimiter({ ratePerSecond, now: clock.now, sleep: clock.sleep });
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

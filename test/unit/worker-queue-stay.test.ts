import { describe, expect, it } from 'vitest';
import { CONNECTOR_FUNCTIONS } from '../../infra/connector-stack.ts';
import { TransientError } from '../../shared/errors.ts';
import type { ConversionBackend } from '../../shared/ports.ts';
import {
  type BatchDeps,
  longestQueueStaySeconds,
  longestWaitSeconds,
  processBatch,
} from '../../shared/worker/batch.ts';
import { batchHarness, orderPlaced, START, sqsRecord, unavailable } from '../support/batch-harness.ts';

/**
 * `longestQueueStaySeconds` is how long a message failing transiently can stay in the main queue
 * before the worker parks it (or SQS's redrive moves it): `connector reservations --drop` waits that
 * long before it drops a refund's reservation. It must follow the backoffs the worker really sets.
 */

const failingAdds: ConversionBackend = {
  add: async () => {
    throw unavailable();
  },
  find: async () => undefined,
  updateAmount: async () => {},
  refuse: async () => {},
  accept: async () => {},
};

/** The seconds the worker hides a message for after receive `receiveCount` fails, its jitter at the top. */
async function longestBackoffAt(receiveCount: number): Promise<number> {
  const h = batchHarness(failingAdds, { random: () => 1 - Number.EPSILON, inlineRetries: 0 });
  await h.clock.run(
    processBatch(h.deps, [sqsRecord('m1', orderPlaced('1001'), { receiveCount })], START + 30_000),
  );
  const [delay] = h.failures.delays;
  if (!delay) throw new Error(`receive ${receiveCount}: the message was not given back`);
  return delay.seconds;
}

describe('longestQueueStaySeconds', () => {
  it('adds, receive after receive, the longest backoff the worker sets after it', async () => {
    // Prepare: no time in the worker, no visibility timeout, no wait asked for: the backoffs alone.
    const only = (maxReceiveCount: number) =>
      longestQueueStaySeconds({
        maxReceiveCount,
        invocationSeconds: 0,
        visibilityTimeoutSeconds: 0,
        longestWaitSeconds: 0,
      });
    // Act
    const steps = Array.from({ length: 12 }, (_, i) => only(i + 1) - only(i));
    const backoffs = await Promise.all(Array.from({ length: 12 }, (_, i) => longestBackoffAt(i + 1)));
    // Assess: 5 s doubling, capped at 900 s.
    expect(steps).toEqual(backoffs);
    expect(backoffs).toEqual([5, 10, 20, 40, 80, 160, 320, 640, 900, 900, 900, 900]);
  });

  it('counts each receive’s time in the worker as the worker function’s timeout', () => {
    // Act
    const one = longestQueueStaySeconds({
      maxReceiveCount: 1,
      visibilityTimeoutSeconds: 0,
      longestWaitSeconds: 0,
    });
    // Assess
    expect(one).toBe(CONNECTOR_FUNCTIONS.worker.timeout.toSeconds() + 5);
  });

  it('counts a receive whose invocation died as the queue’s visibility timeout, when that is longer', () => {
    // Act
    const stay = longestQueueStaySeconds({
      maxReceiveCount: 2,
      invocationSeconds: 30,
      visibilityTimeoutSeconds: 180,
      longestWaitSeconds: 0,
    });
    // Assess
    expect(stay).toBe(360);
  });

  it('as deployed (visibility 6 × the worker’s timeout, a 10-minute verification window): about an hour with 6 receives, almost two with 10', () => {
    // Prepare
    const visibilityTimeoutSeconds = 6 * CONNECTOR_FUNCTIONS.worker.timeout.toSeconds();
    // Act
    const six = longestQueueStaySeconds({ maxReceiveCount: 6, visibilityTimeoutSeconds });
    const ten = longestQueueStaySeconds({ maxReceiveCount: 10, visibilityTimeoutSeconds });
    // Assess: each receive (30 + 600) s, a wait of the whole window after it; from the 8th the
    // backoff is longer: (30 + 640) s, then twice (30 + 900) s.
    expect(six).toBe(3_780);
    expect(ten).toBe(7 * 630 + 670 + 2 * 930);
  });
});

/** A platform whose every add fails with `error` and that never shows the order. */
function addsFailing(error: () => Error): ConversionBackend {
  return { ...failingAdds, add: async () => Promise.reject(error()) };
}

/** An add that timed out: the platform may have recorded it (this one never shows it). */
const timedOut = () =>
  new TransientError(
    'conversions.add got no answer within 5000 ms: not retried, the platform may have recorded it (look it up before sending it again)',
    { ambiguous: true },
  );

/** A 429 whose retry-after asks for an hour. */
const throttledForAnHour = () =>
  new TransientError('conversions.add answered 429: rate limited, retry after 3600000 ms', {
    status: 429,
    retryAfterMs: 3_600_000,
  });

/**
 * Order 1001's message delivered receive after receive, each time once it was hidden for what the
 * worker set, each invocation given `INVOCATION_SECONDS`: the seconds from its first receive to the
 * receive after `MAX_RECEIVES`, the redrive's (the worker is not told the queue's maxReceiveCount, as
 * when its park on the last receive fails). Jitter at the top; the deployed settle period (10 s).
 */
async function realStaySeconds(
  backend: ConversionBackend,
  overrides: Partial<BatchDeps> = {},
): Promise<number> {
  const h = batchHarness(backend, { random: () => 1 - Number.EPSILON, settleMs: 10_000, ...overrides });
  for (let receiveCount = 1; receiveCount <= MAX_RECEIVES; receiveCount++) {
    const before = h.failures.delays.length;
    const deadline = h.clock.now() + INVOCATION_SECONDS * 1_000;
    await h.clock.run(
      processBatch(h.deps, [sqsRecord('m1', orderPlaced('1001'), { receiveCount })], deadline),
    );
    const given = h.failures.delays[before];
    if (!given) throw new Error(`receive ${receiveCount}: the message was not given back`);
    h.clock.time += given.seconds * 1_000;
  }
  return (h.clock.now() - START) / 1_000;
}

const MAX_RECEIVES = 6;
const INVOCATION_SECONDS = 30;

describe('longestQueueStaySeconds against the waits the worker is asked for', () => {
  it('is not exceeded by an order whose adds get no clear answer (the verification window spent hidden)', async () => {
    // Act: settle 10 s, then the rest of the 10-minute window, then a new add, and again.
    const stay = await realStaySeconds(addsFailing(timedOut));

    // Assess: hidden 10, 590, 20, 580, 80 and 520 s (each add's window counts from that add).
    expect(stay).toBe(1_800);
    expect(stay).toBeLessThanOrEqual(
      longestQueueStaySeconds({
        maxReceiveCount: MAX_RECEIVES,
        visibilityTimeoutSeconds: 0,
        invocationSeconds: INVOCATION_SECONDS,
      }),
    );
  });

  it('is not exceeded by a platform whose retry-after asks for an hour on every receive', async () => {
    // Act
    const stay = await realStaySeconds(addsFailing(throttledForAnHour));

    // Assess
    expect(stay).toBeLessThanOrEqual(
      longestQueueStaySeconds({
        maxReceiveCount: MAX_RECEIVES,
        visibilityTimeoutSeconds: 0,
        invocationSeconds: INVOCATION_SECONDS,
      }),
    );
  });
});

describe('longestWaitSeconds', () => {
  it('is the longest of the lease, the settle period and the verification window', () => {
    // Act, Assess
    expect(longestWaitSeconds({ leaseMs: 120_000 })).toBe(600);
    expect(longestWaitSeconds({ leaseMs: 120_000, verifyMs: 0 })).toBe(120);
    expect(longestWaitSeconds({ leaseMs: 60_000, settleMs: 90_500, verifyMs: 0 })).toBe(91);
    expect(longestWaitSeconds({ leaseMs: 120_000, verifyMs: 1_200_000 })).toBe(1_200);
  });

  it('caps how long a retry-after hides a message: an hour asked, the verification window given', async () => {
    // Prepare
    const h = batchHarness(addsFailing(throttledForAnHour));

    // Act
    await h.clock.run(processBatch(h.deps, [sqsRecord('m1', orderPlaced('1001'))], START + 30_000));

    // Assess: not slept inline either (it does not fit in the invocation).
    expect(h.failures.delays).toEqual([{ receiptHandle: 'rh-m1-1', seconds: 600 }]);
    expect(h.clock.sleeps).toEqual([]);
  });

  it('given to longestQueueStaySeconds, covers a worker with a longer verification window', async () => {
    // Prepare: ADD_VERIFY_SECONDS=1200, so a retry-after is honoured up to 20 minutes.
    const deps = { leaseMs: 60_000, verifyMs: 1_200_000 };

    // Act
    const stay = await realStaySeconds(addsFailing(throttledForAnHour), deps);

    // Assess: longer than the deployed worker's stay, within its own.
    expect(stay).toBeGreaterThan(
      longestQueueStaySeconds({ maxReceiveCount: MAX_RECEIVES, visibilityTimeoutSeconds: 0 }),
    );
    expect(stay).toBeLessThanOrEqual(
      longestQueueStaySeconds({
        maxReceiveCount: MAX_RECEIVES,
        visibilityTimeoutSeconds: 0,
        invocationSeconds: INVOCATION_SECONDS,
        longestWaitSeconds: longestWaitSeconds(deps),
      }),
    );
  });
});

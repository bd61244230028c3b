import { describe, expect, it } from 'vitest';
import { CONNECTOR_FUNCTIONS } from '../../infra/connector-stack.ts';
import type { ConversionBackend } from '../../shared/ports.ts';
import { longestQueueStaySeconds, processBatch } from '../../shared/worker/batch.ts';
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
    // Prepare: no time in the worker, no visibility timeout: the backoffs alone.
    const only = (maxReceiveCount: number) =>
      longestQueueStaySeconds({ maxReceiveCount, invocationSeconds: 0, visibilityTimeoutSeconds: 0 });
    // Act
    const steps = Array.from({ length: 12 }, (_, i) => only(i + 1) - only(i));
    const backoffs = await Promise.all(Array.from({ length: 12 }, (_, i) => longestBackoffAt(i + 1)));
    // Assess: 5 s doubling, capped at 900 s.
    expect(steps).toEqual(backoffs);
    expect(backoffs).toEqual([5, 10, 20, 40, 80, 160, 320, 640, 900, 900, 900, 900]);
  });

  it('counts each receive’s time in the worker as the worker function’s timeout', () => {
    // Act
    const one = longestQueueStaySeconds({ maxReceiveCount: 1, visibilityTimeoutSeconds: 0 });
    // Assess
    expect(one).toBe(CONNECTOR_FUNCTIONS.worker.timeout.toSeconds() + 5);
  });

  it('counts a receive whose invocation died as the queue’s visibility timeout, when that is longer', () => {
    // Act
    const stay = longestQueueStaySeconds({
      maxReceiveCount: 2,
      invocationSeconds: 30,
      visibilityTimeoutSeconds: 180,
    });
    // Assess
    expect(stay).toBe(360);
  });

  it('as deployed (visibility 6 × the worker’s timeout): under 30 minutes with 6 receives, over an hour with 10', () => {
    // Prepare
    const visibilityTimeoutSeconds = 6 * CONNECTOR_FUNCTIONS.worker.timeout.toSeconds();
    // Act
    const six = longestQueueStaySeconds({ maxReceiveCount: 6, visibilityTimeoutSeconds });
    const ten = longestQueueStaySeconds({ maxReceiveCount: 10, visibilityTimeoutSeconds });
    // Assess: 5 × 180 s + (30 + 160) s; then (30 + 320), (30 + 640) and twice (30 + 900) s more.
    expect(six).toBe(1_090);
    expect(ten).toBe(3_970);
  });
});

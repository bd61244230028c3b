import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { localStateDir, placeSampleOrder, runCli } from '../support/cli.ts';
import { postRefundWithQueueDown } from '../support/finance-refunds.ts';

/**
 * `connector reservations --drop` must not drop the reservation of a refund the worker may still be
 * retrying in the main queue. How long that is depends on the queue's redrive `maxReceiveCount`: with
 * 10 receives, the worker's backoffs (5 s doubling, capped at 900 s) and each receive's time in the
 * worker (up to its 30 s timeout) keep a failing message in the queue for about an hour, well past
 * the 30 minutes that suffice for the stack's default of 6. The CLI reads the queue's redrive policy,
 * and refuses to drop when it cannot.
 */

const MAX_RECEIVES = 10;
/** The local queue's visibility timeout (the emulators' default): a dead invocation's message hides this long. */
const VISIBILITY_SECONDS = 30;
const WORKER_TIMEOUT_SECONDS = 30;

/**
 * The longest a message failing transiently stays in this test's queue, worked out by hand from the
 * runbook's schedule: each receive spends up to the worker's timeout, then hides for its backoff at
 * most (or for the visibility timeout, when the invocation died), the last one too (its park may fail).
 */
const LONGEST_STAY_SECONDS = Array.from({ length: MAX_RECEIVES }, (_, i) =>
  Math.max(VISIBILITY_SECONDS, WORKER_TIMEOUT_SECONDS + Math.min(900, 5 * 2 ** i)),
).reduce((a, b) => a + b, 0);

let stack: LocalStack;
let state: { dir: string; remove(): void };

beforeAll(async () => {
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    emulators: { maxReceiveCount: MAX_RECEIVES, visibilityTimeoutSeconds: VISIBILITY_SECONDS },
  });
  state = localStateDir(stack);
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const minutesLater = (minutes: number) => () => new Date(Date.now() + minutes * 60_000);
const cli = (argv: string[], options: { minutesLater?: number; env?: Record<string, string> } = {}) =>
  runCli(argv, {
    cwd: state.dir,
    ...(options.env ? { env: options.env } : {}),
    ...(options.minutesLater === undefined ? {} : { now: minutesLater(options.minutesLater) }),
  });

const reservedIds = async (externalId: string) => {
  const listed = await cli(['reservations', externalId, '--json']);
  return (
    JSON.parse(listed.stdout) as { unrecordedReservations: { refundId: string }[] }
  ).unrecordedReservations.map((r) => r.refundId);
};

/** Order `externalId` added, and a EUR 10.00 refund of it reserved whose queue send failed (a 503). */
async function reservedAndNotQueued(externalId: string, refundId: string): Promise<void> {
  await placeSampleOrder({ stack, dir: state.dir }, 'generic', externalId);
  expect(await postRefundWithQueueDown(stack, { externalId, refundId, amount: '10.00' })).toBe(503);
}

describe('connector reservations --drop against a main queue with maxReceiveCount 10', () => {
  it('refuses a reservation 40 minutes old, which its refund may still be retried past, naming how long it waits (exit 2)', async () => {
    // Prepare
    await reservedAndNotQueued('5601', 'RF-5601-lost');
    // Act
    const early = await cli(['reservations', '5601', '--drop', 'RF-5601-lost', '--yes'], {
      minutesLater: 40,
    });
    // Assess
    expect(LONGEST_STAY_SECONDS).toBeGreaterThan(40 * 60);
    expect(early.code, early.stdout).toBe(2);
    expect(early.stderr).toContain('maxReceiveCount 10');
    const floorMinutes = Number(/dropped only (\d+) minutes after/.exec(early.stderr)?.[1]);
    expect(floorMinutes * 60).toBeGreaterThan(LONGEST_STAY_SECONDS);
    expect(await reservedIds('5601')).toEqual(['RF-5601-lost']);
  });

  it('drops it once the longest stay in that queue is over (exit 0)', async () => {
    // Prepare
    await reservedAndNotQueued('5602', 'RF-5602-lost');
    // Act
    const dropped = await cli(['reservations', '5602', '--drop', 'RF-5602-lost', '--yes'], {
      minutesLater: 180,
    });
    // Assess
    expect(dropped.code, dropped.stderr).toBe(0);
    expect(dropped.stdout).toMatch(/dropped the reservation of refund RF-5602-lost/);
    expect(await reservedIds('5602')).toEqual([]);
  });
});

describe('connector reservations --drop when the main queue cannot tell how long it retries', () => {
  it('refuses when the queue cannot be read, saying that it does not drop without knowing (exit 2)', async () => {
    // Prepare: QUEUE_URL names no queue (the other settings from the state file)
    await reservedAndNotQueued('5603', 'RF-5603-lost');
    const env = { QUEUE_URL: `${stack.emulators.sqsEndpoint}/000000000000/no-such-queue.fifo` };
    // Act
    const refused = await cli(['reservations', '5603', '--drop', 'RF-5603-lost', '--yes'], {
      minutesLater: 180,
      env,
    });
    // Assess
    expect(refused.code, refused.stdout).toBe(2);
    expect(refused.stderr).toContain('no-such-queue.fifo');
    expect(refused.stderr).toMatch(/nothing (is )?dropped/);
    expect(await reservedIds('5603')).toEqual(['RF-5603-lost']);
  });

  it('refuses when the queue given has no redrive policy (the DLQ’s URL by mistake) (exit 2)', async () => {
    // Prepare
    await reservedAndNotQueued('5604', 'RF-5604-lost');
    // Act
    const refused = await cli(['reservations', '5604', '--drop', 'RF-5604-lost', '--yes'], {
      minutesLater: 180,
      env: { QUEUE_URL: stack.emulators.dlqUrl },
    });
    // Assess
    expect(refused.code, refused.stdout).toBe(2);
    expect(refused.stderr).toMatch(/no redrive policy/);
    expect(refused.stderr).toMatch(/nothing (is )?dropped/);
    expect(await reservedIds('5604')).toEqual(['RF-5604-lost']);
  });
});

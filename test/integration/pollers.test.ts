import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { makeHandler as makeWorkerHandler } from '../../functions/worker.ts';
import { type Emulators, startEmulators } from '../../infra/local/emulators.ts';
import { Pollers } from '../../infra/local/pollers.ts';
import { LOCAL_AWS } from '../../local/defaults.ts';

/**
 * Issue 16 (where the drain's CPU goes): the local pollers stand in for Lambda's event source
 * mapping. fauxqs answers every waiting long poll when one message becomes available (a FIFO group
 * unlocking, a visibility timeout ending), and all but one come back empty, so ten idle pollers made
 * ten calls for each such message (a ten-instance bench drain made about 3,300 receives for 2,200
 * messages). Once a receive comes back empty, the pollers of one process take turns to receive until
 * messages come again; while the queue has messages they receive and handle batches side by side.
 */

let emulators: Emulators;
let sqs: SQSClient;
const receives = { started: 0, inFlight: 0, maxInFlight: 0, empty: 0 };
let onReceiveStarted: () => void = () => undefined;

beforeAll(async () => {
  emulators = await startEmulators();
  sqs = new SQSClient({ ...LOCAL_AWS, endpoint: emulators.sqsEndpoint });
  sqs.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== 'ReceiveMessageCommand') return next(args);
      receives.started += 1;
      receives.inFlight += 1;
      receives.maxInFlight = Math.max(receives.maxInFlight, receives.inFlight);
      onReceiveStarted();
      try {
        const result = await next(args);
        if (((result.output as { Messages?: unknown[] }).Messages ?? []).length === 0) receives.empty += 1;
        return result;
      } finally {
        receives.inFlight -= 1;
      }
    },
    { step: 'initialize', name: 'countReceives' },
  );
});
afterAll(async () => {
  sqs?.destroy();
  await emulators?.close();
});

/** Resolves once `count` more receives have started. */
function receivesStarted(count: number): Promise<void> {
  const target = receives.started + count;
  return new Promise((resolve) => {
    onReceiveStarted = () => {
      if (receives.started >= target) resolve();
    };
  });
}

/** Sends `count` messages, each in a group of its own. */
async function send(count: number, prefix: string): Promise<void> {
  for (let start = 0; start < count; start += 10) {
    const ids = Array.from({ length: Math.min(10, count - start) }, (_, i) => `${prefix}-${start + i}`);
    await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: emulators.queueUrl,
        Entries: ids.map((id, i) => ({
          Id: String(i),
          MessageBody: JSON.stringify({ id }),
          MessageGroupId: id,
          MessageDeduplicationId: id,
        })),
      }),
    );
  }
}

/** Ten pollers over the test queue (batches of ten unless `batchSize`), handing each batch to `handler`. */
function pollers(handler: (event: SQSEvent) => Promise<SQSBatchResponse>, batchSize = 10): Pollers {
  return new Pollers(
    { sqs, queueUrl: emulators.queueUrl, queueName: emulators.queueName },
    handler as unknown as ReturnType<typeof makeWorkerHandler>,
    { count: 10, batchSize },
  );
}

function latch(): { promise: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

const ids = (event: SQSEvent) => event.Records.map((r) => (JSON.parse(r.body) as { id: string }).id);

describe('local pollers (the event source mapping of the local stack and the bench)', () => {
  it('handle batches side by side while the queue has messages, and deliver every message', async () => {
    await send(20, 'side');
    const seen: string[] = [];
    // Each of the first two batches waits for the other: this only ends if they are handled at once.
    const bothInHand = latch();
    const allSeen = latch();
    let batches = 0;
    const running = pollers(async (event) => {
      seen.push(...ids(event));
      batches += 1;
      if (batches === 2) bothInHand.open();
      if (batches <= 2) await bothInHand.promise;
      if (seen.length >= 20) allSeen.open();
      return { batchItemFailures: [] };
    });
    running.start();
    await allSeen.promise;
    await running.stop();

    expect(new Set(seen).size).toBe(20);
    expect(emulators.counts(emulators.queueName)).toMatchObject({ ready: 0, inflight: 0 });
  });

  it('hand the worker batches of at most the event source’s batch size', async () => {
    // Issue 16: the deployed event source takes batches of 5 (infra/deploy-config.ts), and the local
    // stack and the bench hold what it holds.
    await send(23, 'size');
    const sizes: number[] = [];
    const allSeen = latch();
    const running = pollers(async (event) => {
      sizes.push(event.Records.length);
      if (sizes.reduce((a, b) => a + b, 0) >= 23) allSeen.open();
      return { batchItemFailures: [] };
    }, 5);
    running.start();
    await allSeen.promise;
    await running.stop();

    expect(sizes.reduce((a, b) => a + b, 0)).toBe(23);
    expect(Math.max(...sizes)).toBe(5);
    expect(emulators.counts(emulators.queueName)).toMatchObject({ ready: 0, inflight: 0 });
  });

  it('refuse a batch size the event source does not allow', () => {
    const handler = async () => ({ batchItemFailures: [] });
    for (const size of [0, 11, 2.5])
      expect(() => pollers(handler, size)).toThrow(/batchSize must be a whole number from 1 to 10/);
  });

  it('once receives come back empty, take turns to receive until messages come again', async () => {
    const seen: string[] = [];
    let handled = latch();
    const running = pollers(async (event) => {
      seen.push(...ids(event));
      handled.open();
      return { batchItemFailures: [] };
    });
    const emptyBefore = receives.empty;
    running.start();
    // The first ten receives go out side by side; once they came back empty, the pollers take turns.
    await new Promise<void>((resolve) => {
      onReceiveStarted = () => {
        if (receives.empty >= emptyBefore + 10) resolve();
      };
    });
    receives.maxInFlight = receives.inFlight;
    await receivesStarted(1);
    // A message arriving while they wait wakes every waiting receive in fauxqs: one here.
    for (const id of ['late-1', 'late-2']) {
      await send(1, id);
      await handled.promise;
      handled = latch();
    }
    await receivesStarted(1);
    await running.stop();
    const afterStop = receives.started;

    expect(seen).toEqual(['late-1-0', 'late-2-0']);
    // The turn's receive, and the receive of the poller that has just handled a batch (messages came
    // again, so it receives at once until a receive comes back empty): ten before the change.
    expect(receives.maxInFlight).toBeLessThanOrEqual(2);
    expect(receives.inFlight).toBe(0);
    expect(receives.started).toBe(afterStop);
  });
});

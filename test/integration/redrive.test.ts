import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import type { RecordReport } from '../../shared/worker/batch.ts';
import { localStateDir, runCli } from '../support/cli.ts';

/**
 * Issue 5, section 1, end to end on the local stack: an order whose Conversion Add keeps answering
 * 503 is retried inline, given back with a visibility timeout that grows with its receive count, and
 * after maxReceiveCount receives SQS's redrive (not the worker) moves it to the DLQ. Once the platform
 * is back, a replay turns it into exactly one conversion.
 *
 * The worker parks a message itself on the queue's last receive, with its last error
 * (test/integration/last-receive-parked.test.ts). Here it is told a higher count than the queue's, as
 * when it cannot park (the DLQ refused the send) or never processed the message on that receive (held
 * behind a failed message of its group that could not be parked either): SQS's redrive is then what
 * moves it.
 *
 * visibilityBaseSeconds 1 keeps the test short and still shows the growth: receive 1 is hidden 1 s,
 * receive 2 1–2 s, receive 3 2–4 s.
 */

const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';
const ORDER = '7301';
const MAX_RECEIVES = 3;
const ADD_ROUTE = '/advertiser/conversions.add';

/**
 * How long a wait below goes on before it fails. Not a claim of the test: each waits for a change
 * (a worker report, the queue going empty) and goes on as soon as it comes; at load average 13 the
 * longest took 5.2 s.
 */
const WAIT_MS = 30_000;

let stack: LocalStack;
let state: { dir: string; remove(): void };
const reports: RecordReport[] = [];
let onReport: (() => void) | undefined;
/** Each Conversion Add the worker made: when it began and when its failure came back. */
const adds: { startedAt: number; endedAt: number }[] = [];

beforeAll(async () => {
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    visibilityBaseSeconds: 1,
    emulators: { maxReceiveCount: MAX_RECEIVES, visibilityTimeoutSeconds: 10 },
    env: { MAX_RECEIVE_COUNT: '1000' },
    client: { baseDelayMs: 1, maxDelayMs: 10 },
    wrapBackend: (backend) => ({
      add: async (input, call) => {
        const startedAt = Date.now();
        try {
          return await backend.add(input, call);
        } finally {
          adds.push({ startedAt, endedAt: Date.now() });
        }
      },
      find: (...args) => backend.find(...args),
      updateAmount: (...args) => backend.updateAmount(...args),
      refuse: (...args) => backend.refuse(...args),
      accept: (...args) => backend.accept(...args),
    }),
    observe: (report) => {
      if (report.event?.externalId !== ORDER) return;
      reports.push(report);
      onReport?.();
    },
  });
  state = localStateDir(stack);
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const cli = (argv: string[]) => runCli(argv, { cwd: state.dir });
const conversionsOf = (externalId: string) =>
  stack.sandbox?.control.conversions().filter((c) => c.externalId === externalId) ?? [];
const addCalls = () => stack.sandbox?.control.calls()[ADD_ROUTE]?.byStatus ?? {};

/** Resolves once the worker has reported `count` records of the order. */
function reported(count: number, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      onReport = undefined;
      reject(new Error(`${reports.length} of ${count} worker reports after ${timeoutMs} ms`));
    }, timeoutMs);
    onReport = () => {
      if (reports.length < count) return;
      clearTimeout(timer);
      onReport = undefined;
      resolve();
    };
    onReport();
  });
}

describe('a message that keeps failing transiently', () => {
  it('is given back with a growing backoff, then moved to the DLQ by SQS after maxReceiveCount receives', async () => {
    // Prepare
    stack.sandbox?.control.setFaults({ errorRate: 1, errorStatus: 503, routes: [ADD_ROUTE] });
    const sent = await cli(['send', 'shopify', '--order-id', ORDER, '--click-id', CLICK, '--ip', IP]);
    expect(sent.code, sent.stderr).toBe(0);

    // Act
    await reported(MAX_RECEIVES, WAIT_MS);
    // Nothing reports the redrive: the emulator moves the message during the next receive, unseen by
    // the pollers and the worker. The main queue going empty is that move (or, wrongly, a delete).
    await stack.waitForIdle(WAIT_MS);
    const idleAt = Date.now();

    // Assess: three receives, each retried and given back by the worker, none parked.
    const seen = reports;
    expect(seen.map((r) => [r.receiveCount, r.status, r.failureClass, r.platformStatus])).toEqual([
      [1, 'retry', 'transient', 503],
      [2, 'retry', 'transient', 503],
      [3, 'retry', 'transient', 503],
    ]);
    const messageId = seen[0]?.messageId;
    expect(seen.every((r) => r.messageId === messageId)).toBe(true);
    // Each receive tried the add inline three times (the client's own retries come on top).
    expect(adds).toHaveLength(MAX_RECEIVES * 3);
    expect(addCalls()['503']).toBeGreaterThanOrEqual(MAX_RECEIVES * 3);
    // Hidden at least 1 s after receives 1 and 2, and at least 2 s after receive 3; a backoff that did
    // not grow would bring the message back about 1 s after receive 3 (fauxqs rechecks every 20 ms).
    // Each hide is measured from the receive's last add, which failed before the worker gave the
    // message back, to the next receive's first add (or the redrive), which came after it: no slack
    // for a busy machine, whose delays only lengthen it.
    const lastAdd = (receive: number) => adds[receive * 3 - 1]?.endedAt ?? Number.NaN;
    const firstAdd = (receive: number) => adds[(receive - 1) * 3]?.startedAt ?? Number.NaN;
    const hidden = [firstAdd(2) - lastAdd(1), firstAdd(3) - lastAdd(2), idleAt - lastAdd(3)];
    expect(hidden[0]).toBeGreaterThanOrEqual(1_000);
    expect(hidden[1]).toBeGreaterThanOrEqual(1_000);
    expect(hidden[2]).toBeGreaterThanOrEqual(2_000);

    // The very message SQS delivered is in the DLQ (a parked copy would have a new id and attributes).
    expect(stack.emulators.counts(stack.emulators.queueName)).toEqual({ ready: 0, inflight: 0, delayed: 0 });
    expect(stack.emulators.messages(stack.emulators.dlqName).map((m) => m.messageId)).toEqual([messageId]);
    const listed = await cli(['dlq', 'list', '--external-id', ORDER, '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const [entry] = (JSON.parse(listed.stdout) as { messages: Record<string, unknown>[] }).messages;
    expect(entry).toMatchObject({
      messageId,
      externalId: ORDER,
      eventType: 'OrderPlaced',
      failureClass: 'transient (redrive)',
      platformStatus: null,
      firstFailureAt: null,
    });
    expect(entry?.['attributes']).not.toHaveProperty('failureClass');
    expect(conversionsOf(ORDER)).toEqual([]);
  }, 90_000);

  it('becomes exactly one conversion when replayed after the platform recovers', async () => {
    // Prepare
    stack.sandbox?.control.setFaults({});
    const before = reports.length;

    // Act
    const replayed = await cli(['dlq', 'replay', '--yes']);
    await reported(before + 1, WAIT_MS);
    await stack.waitForIdle(WAIT_MS);

    // Assess
    expect(replayed.code, replayed.stdout + replayed.stderr).toBe(0);
    expect(replayed.stdout).toContain('replayed 1, failed 0');
    expect(reports.slice(before).map((r) => [r.status, r.outcome?.result])).toEqual([['done', 'added']]);
    expect(conversionsOf(ORDER)).toHaveLength(1);
    expect(addCalls()['200']).toBe(1);
    expect(stack.emulators.counts(stack.emulators.dlqName)).toEqual({ ready: 0, inflight: 0, delayed: 0 });
    expect(stack.emulators.counts(stack.emulators.queueName)).toEqual({ ready: 0, inflight: 0, delayed: 0 });
  }, 90_000);
});

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
 * visibilityBaseSeconds 1 keeps the test short and still shows the growth: receive 1 is hidden 1 s,
 * receive 2 1–2 s, receive 3 2–4 s.
 */

const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';
const ORDER = '7301';
const MAX_RECEIVES = 3;
const ADD_ROUTE = '/advertiser/conversions.add';

let stack: LocalStack;
let state: { dir: string; remove(): void };
const reports: { at: number; report: RecordReport }[] = [];
let onReport: (() => void) | undefined;

beforeAll(async () => {
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    visibilityBaseSeconds: 1,
    emulators: { maxReceiveCount: MAX_RECEIVES, visibilityTimeoutSeconds: 10 },
    client: { baseDelayMs: 1, maxDelayMs: 10 },
    observe: (report) => {
      if (report.event?.externalId !== ORDER) return;
      reports.push({ at: Date.now(), report });
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
    await reported(MAX_RECEIVES, 12_000);
    const thirdGivenBackAt = reports[MAX_RECEIVES - 1]?.at ?? 0;
    // Nothing reports the redrive: the emulator moves the message during the next receive, unseen by
    // the pollers and the worker. The main queue going empty is that move (or, wrongly, a delete).
    await stack.waitForIdle(8_000);
    const idleAt = Date.now();

    // Assess: three receives, each retried and given back by the worker, none parked.
    const seen = reports.map((r) => r.report);
    expect(seen.map((r) => [r.receiveCount, r.status, r.failureClass, r.platformStatus])).toEqual([
      [1, 'retry', 'transient', 503],
      [2, 'retry', 'transient', 503],
      [3, 'retry', 'transient', 503],
    ]);
    const messageId = seen[0]?.messageId;
    expect(seen.every((r) => r.messageId === messageId)).toBe(true);
    // Each receive tried the add inline three times (the client's own retries come on top).
    expect(addCalls()['503']).toBeGreaterThanOrEqual(MAX_RECEIVES * 3);
    // Hidden at least 1 s after receives 1 and 2, and at least 2 s after receive 3. The slack covers a
    // report taken a little after the visibility change it follows, on a busy machine; a backoff that
    // did not grow would bring the message back about 1 s after receive 3 (fauxqs rechecks every 20 ms).
    const gaps = [...reports.slice(1).map((r, i) => r.at - (reports[i]?.at ?? 0)), idleAt - thirdGivenBackAt];
    expect(gaps[0]).toBeGreaterThanOrEqual(850);
    expect(gaps[1]).toBeGreaterThanOrEqual(850);
    expect(gaps[2]).toBeGreaterThanOrEqual(1_850);

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
  });

  it('becomes exactly one conversion when replayed after the platform recovers', async () => {
    // Prepare
    stack.sandbox?.control.setFaults({});
    const before = reports.length;

    // Act
    const replayed = await cli(['dlq', 'replay', '--yes']);
    await reported(before + 1, 10_000);
    await stack.waitForIdle(10_000);

    // Assess
    expect(replayed.code, replayed.stdout + replayed.stderr).toBe(0);
    expect(replayed.stdout).toContain('replayed 1, failed 0');
    expect(reports.slice(before).map((r) => [r.report.status, r.report.outcome?.result])).toEqual([
      ['done', 'added'],
    ]);
    expect(conversionsOf(ORDER)).toHaveLength(1);
    expect(addCalls()['200']).toBe(1);
    expect(stack.emulators.counts(stack.emulators.dlqName)).toEqual({ ready: 0, inflight: 0, delayed: 0 });
    expect(stack.emulators.counts(stack.emulators.queueName)).toEqual({ ready: 0, inflight: 0, delayed: 0 });
  });
});

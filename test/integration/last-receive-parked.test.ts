import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import type { RecordReport } from '../../shared/worker/batch.ts';
import { localStateDir, runCli } from '../support/cli.ts';

/**
 * End to end on the local stack (fauxqs, dynalite, the sandbox): a message still failing
 * transiently on the queue's last receive (its redrive maxReceiveCount, 3 here) is parked by the
 * worker with failure attributes, so `connector dlq list` says what failed and how often, and not
 * moved by SQS's redrive with none. An error the connector did not classify (a bug) says so. Once the
 * platform is back, `dlq replay` turns the parked order into exactly one conversion.
 *
 * visibilityBaseSeconds 1 keeps it short: hidden about 1 s after receive 1 and 1–2 s after receive 2.
 */

const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';
/** Its add answers 503 until the platform is healed. */
const ORDER = '7401';
/** Its add trips over a bug in the connector (a TypeError), on every receive. */
const BUGGY = '7402';
const MAX_RECEIVES = 3;
const ADD_ROUTE = '/advertiser/conversions.add';

let stack: LocalStack;
let state: { dir: string; remove(): void };
const reports: RecordReport[] = [];
const waiting: { done: () => boolean; resolve: () => void }[] = [];

beforeAll(async () => {
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    visibilityBaseSeconds: 1,
    emulators: { maxReceiveCount: MAX_RECEIVES, visibilityTimeoutSeconds: 10 },
    client: { baseDelayMs: 1, maxDelayMs: 10 },
    wrapBackend: (backend) => ({
      ...backend,
      add: async (input, call) => {
        if (input.externalId !== BUGGY) return backend.add(input, call);
        const answer = undefined as unknown as { id: string };
        return { id: answer.id };
      },
      find: backend.find.bind(backend),
      updateAmount: backend.updateAmount.bind(backend),
      refuse: backend.refuse.bind(backend),
      accept: backend.accept.bind(backend),
    }),
    observe: (report) => {
      reports.push(report);
      for (const w of [...waiting]) {
        if (!w.done()) continue;
        waiting.splice(waiting.indexOf(w), 1);
        w.resolve();
      }
    },
  });
  state = localStateDir(stack);
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const cli = (argv: string[]) => runCli(argv, { cwd: state.dir });
const of = (externalId: string) => reports.filter((r) => r.event?.externalId === externalId);
const conversionsOf = (externalId: string) =>
  stack.sandbox?.control.conversions().filter((c) => c.externalId === externalId) ?? [];

/** Resolves once the worker has reported what `done` waits for (a deadline turns "never" into a failure). */
function reported(what: string, done: () => boolean, timeoutMs = 30_000): Promise<void> {
  if (done()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () =>
        reject(new Error(`no worker report of ${what} after ${timeoutMs} ms: ${JSON.stringify(reports)}`)),
      timeoutMs,
    );
    waiting.push({
      done,
      resolve: () => {
        clearTimeout(timer);
        resolve();
      },
    });
  });
}

interface Listed {
  messageId: string;
  externalId: string;
  failureClass: string;
  reason: string;
  platformStatus: string | null;
  attempts: number;
  attributes: Record<string, string>;
}

async function listed(...filter: string[]): Promise<Listed[]> {
  const run = await cli(['dlq', 'list', ...filter, '--json']);
  expect(run.code, run.stderr).toBe(0);
  return (JSON.parse(run.stdout) as { messages: Listed[] }).messages;
}

describe('a message still failing transiently on the queue’s last receive', () => {
  it('is parked by the worker with its reason and history, not left to the redrive', async () => {
    // Prepare
    stack.sandbox?.control.setFaults({ errorRate: 1, errorStatus: 503, routes: [ADD_ROUTE] });
    for (const order of [ORDER, BUGGY]) {
      const sent = await cli(['send', 'shopify', '--order-id', order, '--click-id', CLICK, '--ip', IP]);
      expect(sent.code, sent.stderr).toBe(0);
    }

    // Act
    await reported('both orders parked', () =>
      [ORDER, BUGGY].every((order) => of(order).some((r) => r.status === 'parked')),
    );
    await stack.waitForIdle(30_000);

    // Assess: given back twice, parked on the third (last) receive.
    for (const order of [ORDER, BUGGY]) {
      expect(of(order).map((r) => [r.receiveCount, r.status, r.failureClass])).toEqual([
        [1, 'retry', 'transient'],
        [2, 'retry', 'transient'],
        [3, 'parked', 'transient'],
      ]);
    }
    expect(stack.emulators.counts(stack.emulators.queueName)).toEqual({ ready: 0, inflight: 0, delayed: 0 });
    const [failed, buggy] = [await listed('--external-id', ORDER), await listed('--external-id', BUGGY)];
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({
      failureClass: 'transient',
      reason: expect.stringMatching(
        /^gave up after 3 receives \(the queue's maxReceiveCount\), still failing transiently; last: TransientError: conversions\.add \(POST \/advertiser\/conversions\.add\) answered 503: /,
      ),
      platformStatus: '503',
      attempts: 3,
    });
    // The parked copy, not the message SQS delivered (the redrive would keep its id and add nothing).
    expect(failed[0]?.messageId).not.toBe(of(ORDER)[0]?.messageId);
    expect(buggy[0]).toMatchObject({
      failureClass: 'transient',
      reason: expect.stringMatching(
        /^gave up after 3 receives \(the queue's maxReceiveCount\) on an unexpected error \(a bug\? .*\); last: TypeError: /,
      ),
      platformStatus: null,
    });
    // What the runbook has operators replay once the platform is healthy, and only that.
    expect((await listed('--reason', 'transient')).map((m) => m.externalId)).toEqual([ORDER]);
    const shown = await cli(['dlq', 'show', failed[0]?.messageId ?? '']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/failure class\s+transient\n/);
    expect(shown.stdout).toMatch(/reason\s+gave up after 3 receives/);
    expect(conversionsOf(ORDER)).toEqual([]);
  });

  it('becomes exactly one conversion when replayed after the platform recovers', async () => {
    // Prepare
    stack.sandbox?.control.setFaults({});

    // Act
    const replayed = await cli(['dlq', 'replay', '--external-id', ORDER, '--yes']);
    await reported('the replayed order done', () => of(ORDER).some((r) => r.status === 'done'));
    await stack.waitForIdle(30_000);

    // Assess
    expect(replayed.code, replayed.stdout + replayed.stderr).toBe(0);
    expect(replayed.stdout).toContain('replayed 1, failed 0');
    expect(of(ORDER).at(-1)).toMatchObject({
      status: 'done',
      outcome: expect.objectContaining({ result: 'added' }),
    });
    expect(conversionsOf(ORDER)).toHaveLength(1);
    expect((await listed()).map((m) => m.externalId)).toEqual([BUGGY]);
  });
});

import { ChangeMessageVisibilityCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { localStateDir, runCli, spawnCli } from '../support/cli.ts';
import { type SqsProxy, startSqsProxy } from '../support/sqs-proxy.ts';

/**
 * Issue 5: "a replay interrupted in the middle (process killed) loses nothing: every message is in
 * the DLQ or the main queue, possibly both, and the ledger makes the duplicate harmless".
 *
 * `connector dlq replay` runs as a real child process, talking to the SQS emulator through a proxy
 * that lets the test SIGKILL it at an exact point: while its send of a message is on the way (the
 * main queue never gets it), after the main queue took it but before the CLI heard so, and while its
 * delete from the DLQ is on the way (the message is then in both queues). Then a full replay runs
 * and the worker drains the main queue: each refund must reach the platform exactly once.
 *
 * The refunds are full ones, parked while the sandbox answers every refusal 422: a second refuse of
 * a refused conversion would be answered 422 too, so a duplicate that got through would show.
 */

const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';
const ORDERS = Array.from({ length: 8 }, (_, i) => String(9101 + i));
const REFUSE_ROUTE = '/advertiser/conversions.refuse';

let stack: LocalStack;
let state: { dir: string; remove(): void };
let proxy: SqsProxy;
const refused: string[] = [];
const duplicates: string[] = [];
/** Deletes from the DLQ the CLI asked for before the main queue had confirmed the copy. */
const earlyDeletes: string[] = [];

const cli = (argv: string[]) => runCli(argv, { cwd: state.dir });
const refundIdOf = (body: string) => (JSON.parse(body) as { refundId?: string }).refundId ?? '?';
const inDlq = () => stack.emulators.messages(stack.emulators.dlqName);
const inMain = () => stack.emulators.messages(stack.emulators.queueName);
const copiesInMain = (refundId: string) => inMain().filter((m) => refundIdOf(m.body) === refundId).length;
const conversionOf = (externalId: string) =>
  stack.sandbox?.control.conversions().find((c) => c.externalId === externalId);
const REFUND_IDS = ORDERS.map((id) => `RF-${id}`);

beforeAll(async () => {
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    observe: (report) => {
      const who = report.event?.externalId ?? '?';
      if (report.outcome?.result === 'refused') refused.push(who);
      if (report.outcome?.result === 'refund_duplicate') duplicates.push(who);
    },
  });
  state = localStateDir(stack);
  proxy = await startSqsProxy(stack.emulators.sqsEndpoint);

  // Eight orders, each converted, then refunded in full while the platform refuses every refusal with
  // a 422: each refund is parked.
  for (const id of ORDERS) {
    const sent = await cli(['send', 'shopify', '--order-id', id, '--click-id', CLICK, '--ip', IP]);
    expect(sent.code, sent.stderr).toBe(0);
  }
  await stack.waitForIdle();
  stack.sandbox?.control.setFaults({
    errorRate: 1,
    errorStatus: 422,
    routes: ['/advertiser/conversions.refuse'],
  });
  for (const id of ORDERS) {
    const refunded = await cli(['refund', '--external-id', id, '--refund-id', `RF-${id}`, '--full']);
    expect(refunded.code, refunded.stderr).toBe(0);
  }
  await stack.waitForIdle();
  expect(
    inDlq()
      .map((m) => refundIdOf(m.body))
      .sort(),
  ).toEqual(REFUND_IDS);
  stack.sandbox?.control.setFaults({});
  // The worker stays off while replays are killed, so the main queue shows what they left there.
  await stack.stopPolling();
});

afterAll(async () => {
  await proxy?.close();
  state?.remove();
  await stack?.close();
});

/** `npx connector dlq replay --yes` as its own process, its SQS calls going through the proxy. */
const replayInChild = () =>
  spawnCli(['dlq', 'replay', '--yes', '--sqs-endpoint', proxy.endpoint], { cwd: state.dir });

/**
 * Runs a replay and kills it while its `nth` call of `action` is held: `before` the emulator carries
 * the call out, or `after` (the emulator did it; the CLI never hears). Returns the refund id the
 * held call was about.
 */
async function killReplayAt(action: 'SendMessage' | 'DeleteMessage', nth: number, when: 'before' | 'after') {
  const run = replayInChild();
  let seen = 0;
  let held: string | undefined;
  proxy.decideWith((name, request) => {
    const refundId = refundOfCall(name, request);
    if (name === 'DeleteMessage' && !sentOk(refundId)) earlyDeletes.push(refundId);
    if (name !== action || ++seen !== nth) return { kind: 'forward' };
    held = refundId;
    return { kind: when === 'before' ? 'drop-before' : 'drop-after', meanwhile: run.kill };
  });
  const result = await run.done;
  proxy.decideWith(() => ({ kind: 'forward' }));
  expect(result.signal, `the replay was to be killed, but it ended: ${result.stdout}${result.stderr}`).toBe(
    'SIGKILL',
  );
  expect(held).toMatch(/^RF-/);
  return held ?? '';
}

function refundOfCall(action: string, request: Record<string, unknown>): string {
  if (action === 'SendMessage') return refundIdOf(String(request['MessageBody']));
  if (action !== 'DeleteMessage') return '';
  const message = inDlq().find((m) => m.receiptHandle === request['ReceiptHandle']);
  return message ? refundIdOf(message.body) : '?';
}

/** Whether the main queue has answered a SendMessage of this refund with success. */
function sentOk(refundId: string): boolean {
  return proxy.calls.some(
    (c) =>
      c.action === 'SendMessage' &&
      c.status === 200 &&
      refundIdOf(String(c.request['MessageBody'])) === refundId,
  );
}

/**
 * The messages the killed process had received stay invisible in the DLQ for its 30 s visibility
 * timeout (where they still are, as the accounting shows); this stands in for that wait.
 */
async function expireItsVisibilityTimeout(): Promise<void> {
  for (const message of inDlq()) {
    if (message.receiptHandle === undefined) continue;
    await stack.emulators.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: stack.emulators.dlqUrl,
        ReceiptHandle: message.receiptHandle,
        VisibilityTimeout: 0,
      }),
    );
  }
}

/** Every refund is in the DLQ or the main queue (or both), and the main queue holds only replayed copies. */
function expectNothingLost(): void {
  const dlq = new Set(inDlq().map((m) => refundIdOf(m.body)));
  const main = new Set(inMain().map((m) => refundIdOf(m.body)));
  expect(REFUND_IDS.filter((id) => !dlq.has(id) && !main.has(id))).toEqual([]);
  const acceptedSends = proxy.calls.filter((c) => c.action === 'SendMessage' && c.status === 200).length;
  expect(inMain()).toHaveLength(acceptedSends);
  expect(earlyDeletes).toEqual([]);
}

describe('a dlq replay killed half-way', () => {
  it('killed while deleting its 3rd message: that message is in both queues, none is lost', async () => {
    // Act
    const held = await killReplayAt('DeleteMessage', 3, 'before');
    // Assess
    expectNothingLost();
    expect(inDlq().map((m) => refundIdOf(m.body))).toContain(held);
    expect(copiesInMain(held)).toBe(1);
    expect(inMain()).toHaveLength(3);
    expect(inDlq()).toHaveLength(ORDERS.length - 2);
    await expireItsVisibilityTimeout();
  });

  it('killed while sending its 2nd message: that message stays in the DLQ only', async () => {
    // Prepare
    const mainBefore = inMain().map((m) => refundIdOf(m.body));
    // Act
    const held = await killReplayAt('SendMessage', 2, 'before');
    // Assess
    expectNothingLost();
    expect(inDlq().map((m) => refundIdOf(m.body))).toContain(held);
    expect(copiesInMain(held)).toBe(mainBefore.filter((id) => id === held).length);
    expect(inMain()).toHaveLength(mainBefore.length + 1);
    await expireItsVisibilityTimeout();
  });

  it('killed after the main queue took a message but before the CLI heard: in both queues', async () => {
    // Prepare
    const copiesBefore = new Map(REFUND_IDS.map((id) => [id, copiesInMain(id)]));
    // Act
    const held = await killReplayAt('SendMessage', 1, 'after');
    // Assess
    expectNothingLost();
    expect(inDlq().map((m) => refundIdOf(m.body))).toContain(held);
    expect(copiesInMain(held)).toBe((copiesBefore.get(held) ?? 0) + 1);
    await expireItsVisibilityTimeout();
  });

  it('a replay run to the end empties the DLQ, and the worker applies each refund exactly once', async () => {
    // Prepare
    const run = replayInChild();
    const finished = await run.done;
    expect(finished.code, finished.stdout + finished.stderr).toBe(0);
    expect(finished.stdout).toMatch(/replayed \d+, failed 0/);
    expectNothingLost();
    expect(inDlq()).toEqual([]);
    const copies = inMain().length;
    expect(copies).toBeGreaterThan(ORDERS.length);
    const refusesBefore = stack.sandbox?.control.calls()[REFUSE_ROUTE]?.byStatus ?? {};
    // Act
    stack.startPolling();
    await stack.waitForIdle();
    // Assess
    for (const id of ORDERS) expect(conversionOf(id)?.status, `order ${id}`).toBe('refused');
    const refusesAfter = stack.sandbox?.control.calls()[REFUSE_ROUTE]?.byStatus ?? {};
    // One successful refuse per order, and no other answer (a second refuse would get a 422).
    expect({ ...refusesAfter, '200': (refusesAfter['200'] ?? 0) - (refusesBefore['200'] ?? 0) }).toEqual({
      ...refusesBefore,
      '200': ORDERS.length,
    });
    expect(refused.sort()).toEqual(ORDERS);
    expect(duplicates).toHaveLength(copies - ORDERS.length);
    expect(inDlq()).toEqual([]);
  });
});

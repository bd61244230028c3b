import {
  CreateQueueCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { SqsFailureQueue } from '../../shared/adapters/sqs.ts';
import { messageGroupId } from '../../shared/queueing.ts';
import { localStackForCli, runCli } from '../support/cli.ts';
import { startSqsProxy } from '../support/sqs-proxy.ts';

const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';

const local = localStackForCli();
const REFUSE_ROUTE = '/advertiser/conversions.refuse';

const cli = (argv: string[], input?: string) =>
  runCli(argv, { cwd: local.dir, ...(input === undefined ? {} : { input }) });
const program = () => [...local.stack.sources.values()][0]?.program ?? '';
const dlqReady = () => local.stack.emulators.counts(local.stack.emulators.dlqName).ready;
const conversionOf = (externalId: string) =>
  local.stack.sandbox?.control.conversions().find((c) => c.externalId === externalId);

function refundEvent(externalId: string, refundId: string): string {
  return JSON.stringify({
    type: 'OrderRefunded',
    eventId: `finance:${refundId}`,
    source: 'shopify',
    platform: 'finance',
    externalId,
    receivedAt: new Date().toISOString(),
    refundId,
    full: true,
    origin: 'finance',
  });
}

/** Parks a message the way the worker does, with its failure attributes. */
async function park(externalId: string, reason: string, lastFailureAt = new Date()): Promise<void> {
  await new SqsFailureQueue(
    local.stack.emulators.sqs,
    local.stack.emulators.queueUrl,
    local.stack.emulators.dlqUrl,
  ).park(
    {
      body: refundEvent(externalId, `rf-${externalId}`),
      groupId: messageGroupId(program(), externalId),
      deduplicationId: `park-${externalId}-${Date.now()}`,
    },
    {
      failureClass: 'permanent',
      reason,
      platformStatus: '422',
      attempts: '3',
      firstFailureAt: new Date(lastFailureAt.getTime() - 60_000).toISOString(),
      lastFailureAt: lastFailureAt.toISOString(),
      eventType: 'OrderRefunded',
      externalId,
      source: 'shopify',
    },
  );
}

async function messageIdOf(externalId: string): Promise<string> {
  const listed = await cli(['dlq', 'list', '--external-id', externalId, '--json']);
  const id = (JSON.parse(listed.stdout) as { messages: { messageId: string }[] }).messages[0]?.messageId;
  if (!id) throw new Error(`no DLQ message for ${externalId}`);
  return id;
}

describe('connector dlq', () => {
  it('lists a message the worker parked (a refusal the platform answered 422) with its reason, without consuming it', async () => {
    // Prepare
    const sent = await cli(['send', 'shopify', '--order-id', '8001', '--click-id', CLICK, '--ip', IP]);
    expect(sent.code).toBe(0);
    await local.stack.waitForIdle();
    local.stack.sandbox?.control.setFaults({ errorRate: 1, errorStatus: 422, routes: [REFUSE_ROUTE] });
    expect((await cli(['refund', '--external-id', '8001', '--refund-id', 'RF-8001', '--full'])).code).toBe(0);
    await local.stack.waitForIdle();
    local.stack.sandbox?.control.setFaults({});
    // Act
    const listed = await cli(['dlq', 'list']);
    // Assess
    expect(listed.code, listed.stderr).toBe(0);
    const row = listed.stdout.split('\n').find((line) => line.includes(' 8001 '));
    expect(row).toMatch(
      /OrderRefunded\s+permanent\s+.*conversions\.refuse.*\s+\d+s\s+1\s+fix the cause, then replay$/,
    );
    expect(listed.stdout).toContain('1 message in the DLQ');
    expect(dlqReady()).toBe(1);
    expect((await cli(['dlq', 'list'])).stdout).toContain('1 message in the DLQ');
  });

  it('filters by order, reason and time, and prints JSON', async () => {
    // Prepare
    await park(
      '8002',
      'conversion 65a… is refused and can no longer be updated',
      new Date(Date.now() - 3 * 3_600_000),
    );
    // Act
    const byOrder = await cli(['dlq', 'list', '--external-id', '8002', '--json']);
    const byReason = await cli(['dlq', 'list', '--reason', 'INJECTED FAULT', '--json']);
    const recent = await cli(['dlq', 'list', '--since', '1h', '--json']);
    const badSince = await cli(['dlq', 'list', '--since', 'yesterday-ish']);
    const bareNumber = await cli(['dlq', 'list', '--since', '2']);
    // Assess
    const ids = (r: { stdout: string }) =>
      (JSON.parse(r.stdout) as { messages: { externalId: string }[] }).messages.map((m) => m.externalId);
    expect(ids(byOrder)).toEqual(['8002']);
    expect(JSON.parse(byOrder.stdout).messages[0]).toMatchObject({
      eventType: 'OrderRefunded',
      failureClass: 'permanent',
      platformStatus: '422',
      attempts: 3,
      body: { type: 'OrderRefunded', externalId: '8002' },
    });
    expect(ids(byReason)).toEqual(['8001']);
    expect(ids(recent)).toEqual(['8001']);
    expect(badSince.code).toBe(2);
    expect(badSince.stderr).toContain('--since: "yesterday-ish" is neither a date');
    // Not 2001-02-01, as Date.parse reads "2": a duration needs its unit.
    expect(bareNumber.code).toBe(2);
    expect(bareNumber.stderr).toContain('--since: "2" is neither a date');
  });

  it('shows a message SQS moved after too many transient failures as "transient (redrive)"', async () => {
    // Prepare
    await local.stack.emulators.sqs.send(
      new SendMessageCommand({
        QueueUrl: local.stack.emulators.dlqUrl,
        MessageBody: refundEvent('8003', 'rf-8003'),
        MessageGroupId: messageGroupId(program(), '8003'),
        MessageDeduplicationId: 'redrive-8003',
        MessageAttributes: { eventType: { DataType: 'String', StringValue: 'OrderRefunded' } },
      }),
    );
    // Act
    const listed = await cli(['dlq', 'list', '--external-id', '8003']);
    // Assess
    expect(listed.stdout).toMatch(/8003\s+OrderRefunded\s+transient \(redrive\)\s+failed transiently/);
    expect(listed.stdout).toMatch(/\d+ receives\s+replay once the platform is healthy\n/);
  });

  it('shows one message with every attribute and the body; an unknown id exits 1', async () => {
    // Prepare
    const id = await messageIdOf('8002');
    // Act
    const shown = await cli(['dlq', 'show', id]);
    const unknown = await cli(['dlq', 'show', 'no-such-message']);
    // Assess
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/failureClass\s+permanent/);
    expect(shown.stdout).toMatch(/firstFailureAt\s+\d{4}-/);
    expect(shown.stdout).toContain('"externalId": "8002"');
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('message no-such-message is not in the DLQ');
  });

  it('replay --dry-run changes nothing', async () => {
    // Prepare
    const before = dlqReady();
    // Act
    const dry = await cli(['dlq', 'replay', '--dry-run']);
    // Assess
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('dry run: 3 messages would be replayed to connector-events.fifo');
    expect(dlqReady()).toBe(before);
  });

  it('asks before replaying: no answer exits 2, "n" exits 1, and nothing moves', async () => {
    // Prepare
    const before = dlqReady();
    // Act
    const noTerminal = await cli(['dlq', 'replay']);
    const declined = await cli(['dlq', 'replay'], 'n\n');
    // Assess
    expect(noTerminal.code).toBe(2);
    expect(noTerminal.stderr).toContain('pass --yes');
    expect(declined.code).toBe(1);
    expect(declined.stderr).toContain('not confirmed; nothing replayed');
    expect(dlqReady()).toBe(before);
  });

  it('replays a message once: back in the main queue with its group and history, gone from the DLQ', async () => {
    // Act
    await local.stack.stopPolling();
    try {
      const replayed = await cli(['dlq', 'replay', '--external-id', '8002'], 'y\n');
      // Assess
      expect(replayed.code, replayed.stderr).toBe(0);
      expect(replayed.stdout).toContain('replayed 1, failed 0');
      const out = await local.stack.emulators.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: local.stack.emulators.queueUrl,
          MaxNumberOfMessages: 10,
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
      );
      const messages = out.Messages ?? [];
      expect(messages).toHaveLength(1);
      const [message] = messages;
      expect(message?.Attributes?.MessageGroupId).toBe(messageGroupId(program(), '8002'));
      expect(message?.MessageAttributes?.['attempts']?.StringValue).toBe('3');
      expect(message?.MessageAttributes?.['firstFailureAt']?.StringValue).toMatch(/^\d{4}-/);
      expect(JSON.parse(message?.Body ?? '{}')).toMatchObject({ externalId: '8002', refundId: 'rf-8002' });
      await local.stack.emulators.sqs.send(
        new DeleteMessageCommand({
          QueueUrl: local.stack.emulators.queueUrl,
          ReceiptHandle: message?.ReceiptHandle,
        }),
      );
      const again = await cli(['dlq', 'list', '--external-id', '8002', '--json']);
      expect(JSON.parse(again.stdout).messages).toEqual([]);
    } finally {
      local.stack.startPolling();
    }
  });

  it('keeps the message in the DLQ when the main queue does not take it', async () => {
    // Prepare: every send to the main queue is cut before it reaches it (a URL naming no queue is
    // refused before anything is read: test/integration/cli-operator-walk.test.ts).
    const proxy = await startSqsProxy(local.stack.emulators.sqsEndpoint);
    proxy.decideWith((action) =>
      action === 'SendMessage' ? { kind: 'drop-before', meanwhile: () => undefined } : { kind: 'forward' },
    );
    const before = dlqReady();
    // Act
    const replayed = await cli([
      'dlq',
      'replay',
      '--external-id',
      '8003',
      '--yes',
      '--sqs-endpoint',
      proxy.endpoint,
    ]).finally(() => proxy.close());
    // Assess
    expect(replayed.code).toBe(1);
    expect(replayed.stdout).toContain('failed: send to the main queue failed');
    expect(replayed.stdout).toContain('replayed 0, failed 1');
    expect(dlqReady()).toBe(before);
  });

  it('replays the refused refund once the platform takes it again, and the worker applies it', async () => {
    // Prepare: the fault was cleared after the first test.
    // Act
    const replayed = await cli(['dlq', 'replay', '--reason', 'injected fault', '--yes']);
    await local.stack.waitForIdle();
    // Assess
    expect(replayed.code, replayed.stdout + replayed.stderr).toBe(0);
    expect(replayed.stdout).toMatch(/\[1\/1\] \S+ {2}8001 {2}OrderRefunded {2}replayed as \S+/);
    expect(conversionOf('8001')?.status).toBe('refused');
    const after = await cli(['dlq', 'list', '--external-id', '8001', '--json']);
    expect(JSON.parse(after.stdout).messages).toEqual([]);
    expect((await cli(['dlq', 'replay', '--reason', 'injected fault', '--yes'])).stdout).toContain(
      'nothing to replay',
    );
  });

  it('purge refuses a queue that is not a dead-letter queue, even with --yes, and deletes nothing', async () => {
    // Prepare: a queue of someone else's that happens to hold a message.
    const { QueueUrl: otherUrl } = await local.stack.emulators.sqs.send(
      new CreateQueueCommand({ QueueName: 'not-a-dead-letter-queue' }),
    );
    await local.stack.emulators.sqs.send(
      new SendMessageCommand({ QueueUrl: otherUrl, MessageBody: 'keep me' }),
    );
    // Act
    const other = await cli(['dlq', 'purge', '--yes', '--dlq-url', otherUrl ?? '']);
    const main = await cli(['dlq', 'purge', '--yes', '--dlq-url', local.stack.emulators.queueUrl]);
    // Assess
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(
      /not-a-dead-letter-queue is not the dead-letter queue of .*connector-events\.fifo; nothing deleted/,
    );
    expect(main.code).toBe(2);
    expect(local.stack.emulators.counts('not-a-dead-letter-queue').ready).toBe(1);
  });

  it('purges only after the queue name is typed', async () => {
    // Prepare
    expect(dlqReady()).toBeGreaterThan(0);
    // Act
    const wrong = await cli(['dlq', 'purge'], 'connector-events.fifo\n');
    const before = dlqReady();
    const right = await cli(['dlq', 'purge'], `${local.stack.emulators.dlqName}\n`);
    // Assess
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('the name does not match; nothing deleted');
    expect(before).toBeGreaterThan(0);
    expect(right.code).toBe(0);
    expect(right.stdout).toContain(`purged ${local.stack.emulators.dlqName}`);
    expect(dlqReady()).toBe(0);
  });
});

describe('what the dlq commands print of an order id a shop wrote', () => {
  // U+202E (RIGHT-TO-LEFT OVERRIDE) passes the door (idText refuses only controls): a terminal that
  // obeys it shows "1001exe.pdf".
  const RLO = '\u202e';
  const BIDI_ID = `1001${RLO}fdp.exe`;

  it('dlq show escapes the bidi override in the body, which stays valid JSON, and drops it from the tables', async () => {
    // Prepare
    await park(BIDI_ID, 'injected: a shop-written id');
    const id = await messageIdOf(BIDI_ID);
    // Act
    const shown = await cli(['dlq', 'show', id]);
    const json = await cli(['dlq', 'show', id, '--json']);
    // Assess
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).not.toContain(RLO);
    expect(shown.stdout).toMatch(/external id\s+1001fdp\.exe/);
    expect(shown.stdout).toContain('"externalId": "1001\\u202efdp.exe"');
    const body = shown.stdout.slice(shown.stdout.indexOf('Body:\n') + 'Body:\n'.length);
    expect(JSON.parse(body)).toMatchObject({ externalId: BIDI_ID });
    expect(json.stdout).not.toContain(RLO);
    expect(JSON.parse(json.stdout)).toMatchObject({ externalId: BIDI_ID, body: { externalId: BIDI_ID } });
  });

  it('dlq replay prints its progress lines without the bidi override', async () => {
    await local.stack.stopPolling();
    try {
      // Act
      const replayed = await cli(['dlq', 'replay', '--external-id', BIDI_ID, '--yes']);
      // Assess
      expect(replayed.code, replayed.stderr).toBe(0);
      expect(replayed.stdout).toMatch(/\[1\/1\] \S+ {2}1001fdp\.exe {2}OrderRefunded {2}replayed as \S+/);
      expect(replayed.stdout).not.toContain(RLO);
    } finally {
      local.stack.startPolling();
    }
  });
});

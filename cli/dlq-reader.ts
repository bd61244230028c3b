import {
  ChangeMessageVisibilityBatchCommand,
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ListDeadLetterSourceQueuesCommand,
  type Message,
  type MessageAttributeValue,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { fromAttributes } from '../shared/adapters/sqs.ts';
import { attributeText } from '../shared/queueing.ts';
import { awsCall } from './context.ts';
import { CliError } from './io.ts';

/**
 * Reading the dead-letter queue without consuming it, and replaying it. SQS has no "peek": a
 * message is read by receiving it, which hides it for the visibility timeout. So messages are
 * received with a short timeout (2 s, what a crashed CLI would hide them for) and made visible again
 * at once after the scan. On a FIFO queue a received message also holds back the later messages of
 * its group (one order) until it is visible again, so a scan sees at most the messages SQS hands
 * out per group (the head of each group, locally; up to 10 per receive on AWS): the rest is counted
 * as `hidden`.
 */

/** Failure class shown for a message SQS moved to the DLQ after `maxReceiveCount` transient failures. */
export const REDRIVE_CLASS = 'transient (redrive)';

export interface DlqEntry {
  readonly messageId: string;
  readonly receiptHandle: string;
  readonly body: string;
  readonly groupId?: string;
  readonly deduplicationId?: string;
  /** When SQS stored the message (for a redriven one: when it was first queued). */
  readonly sentAt?: Date;
  readonly firstReceiveAt?: Date;
  /** SQS's count, which includes reads by `dlq list`. */
  readonly receiveCount: number;
  /** The message attributes (the worker's failure attributes, or the queue's event attributes). */
  readonly attributes: Record<string, string>;
  /** True when the worker parked it with a reason; false when SQS's redrive moved it. */
  readonly parked: boolean;
  readonly externalId?: string;
  readonly eventType?: string;
  readonly source?: string;
  readonly failureClass: string;
  readonly reason: string;
  /** Processing attempts: the worker's count, or SQS's receive count for a redriven message. */
  readonly attempts: number;
  /** Last failure (parked) or first queued (redriven): what `--since` and the age refer to. */
  readonly failedAt?: Date;
}

export interface DlqFilter {
  readonly externalId?: string;
  /** Case-insensitive substring of the reason or the platform's message. */
  readonly reason?: string;
  readonly since?: Date;
}

function epochMs(text: string | undefined): Date | undefined {
  const n = Number(text);
  return text && Number.isFinite(n) && n > 0 ? new Date(n) : undefined;
}

function isoDate(text: string | undefined): Date | undefined {
  const t = text ? Date.parse(text) : Number.NaN;
  return Number.isNaN(t) ? undefined : new Date(t);
}

/** A received message, read. */
export function toEntry(message: Message): DlqEntry {
  const system = message.Attributes ?? {};
  const attributes = fromAttributes(
    message.MessageAttributes as Record<string, MessageAttributeValue> | undefined,
  );
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(message.Body ?? '');
    if (typeof parsed === 'object' && parsed !== null) body = parsed as Record<string, unknown>;
  } catch {
    // A body that is not JSON is shown as is; the attributes still say what failed.
  }
  const text = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
  const receiveCount = Number(system.ApproximateReceiveCount ?? '0') || 0;
  const parked = attributes['failureClass'] !== undefined;
  const sentAt = epochMs(system.SentTimestamp);
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    groupId: system.MessageGroupId,
    deduplicationId: system.MessageDeduplicationId,
    sentAt,
    firstReceiveAt: epochMs(system.ApproximateFirstReceiveTimestamp),
    receiveCount,
    attributes,
    parked,
    // The body is the event itself; attributes are labels where SQS-refused characters became U+FFFD.
    externalId: text(body['externalId']) ?? attributes['externalId'],
    eventType: text(body['type']) ?? attributes['eventType'],
    source: text(body['source']) ?? attributes['source'],
    failureClass: attributes['failureClass'] ?? REDRIVE_CLASS,
    reason: parked
      ? (attributes['reason'] ?? '')
      : 'failed transiently until the queue gave up (maxReceiveCount)',
    attempts: parked ? Number(attributes['attempts'] ?? '0') || 0 : receiveCount,
    failedAt: parked ? (isoDate(attributes['lastFailureAt']) ?? sentAt) : sentAt,
  };
}

export function matches(entry: DlqEntry, filter: DlqFilter): boolean {
  if (filter.externalId !== undefined && entry.externalId !== filter.externalId) return false;
  if (filter.reason !== undefined) {
    const needle = filter.reason.toLowerCase();
    const haystack = `${entry.reason}\n${entry.attributes['platformMessage'] ?? ''}`.toLowerCase();
    if (!haystack.includes(needle)) return false;
  }
  if (filter.since !== undefined && (entry.failedAt?.getTime() ?? 0) < filter.since.getTime()) return false;
  return true;
}

/** Messages in the queue (visible, and in flight), as SQS approximates them. */
export async function queueCounts(
  sqs: SQSClient,
  queueUrl: string,
): Promise<{ visible: number; inFlight: number }> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
    awsCall(),
  );
  return {
    visible: Number(out.Attributes?.ApproximateNumberOfMessages ?? '0') || 0,
    inFlight: Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? '0') || 0,
  };
}

async function receive(sqs: SQSClient, queueUrl: string, visibilitySeconds: number, waitSeconds: number) {
  const out = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 10,
      VisibilityTimeout: visibilitySeconds,
      WaitTimeSeconds: waitSeconds,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    }),
    awsCall(),
  );
  return out.Messages ?? [];
}

/** Makes received messages visible again at once; a handle that expired meanwhile is already visible. */
export async function release(
  sqs: SQSClient,
  queueUrl: string,
  receiptHandles: readonly string[],
): Promise<void> {
  for (let i = 0; i < receiptHandles.length; i += 10) {
    const chunk = receiptHandles.slice(i, i + 10);
    await sqs
      .send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queueUrl,
          Entries: chunk.map((handle, j) => ({ Id: String(j), ReceiptHandle: handle, VisibilityTimeout: 0 })),
        }),
        awsCall(),
      )
      .catch(() => undefined);
  }
}

export interface ScanResult {
  readonly entries: DlqEntry[];
  /** Messages the scan could not reach (behind another of their group, or being read elsewhere). */
  readonly hidden: number;
}

/**
 * Reads every message SQS hands out, without consuming any: receives in rounds of 10 with a 2 s
 * visibility timeout until a round brings nothing new, then makes them all visible again.
 */
export async function scanQueue(
  sqs: SQSClient,
  queueUrl: string,
  options: { limit?: number } = {},
): Promise<ScanResult> {
  const limit = options.limit ?? 10_000;
  const before = await queueCounts(sqs, queueUrl);
  const expected = before.visible;
  const seen = new Map<string, DlqEntry>();
  const handles = new Map<string, string>();
  try {
    while (seen.size < limit) {
      // Long-poll (1 s) while messages are expected: a short poll on AWS samples only some servers.
      const messages = await receive(sqs, queueUrl, 2, seen.size < expected ? 1 : 0);
      let fresh = 0;
      for (const message of messages) {
        const entry = toEntry(message);
        handles.set(entry.messageId, entry.receiptHandle);
        if (seen.has(entry.messageId)) continue;
        seen.set(entry.messageId, entry);
        fresh++;
      }
      if (fresh === 0) break;
    }
  } finally {
    await release(sqs, queueUrl, [...handles.values()]);
  }
  return { entries: [...seen.values()], hidden: Math.max(0, before.visible + before.inFlight - seen.size) };
}

/**
 * Receives the message `messageId` and keeps it hidden for `visibilitySeconds`, so that no replay
 * takes it while it is being discarded; every other message received on the way is made visible
 * again at once. Undefined when SQS does not hand it out now (gone, behind an earlier message of its
 * group, or being read elsewhere). The entry's receipt handle is the fresh one, for `deleteMessage`.
 */
export async function takeMessage(
  sqs: SQSClient,
  queueUrl: string,
  messageId: string,
  visibilitySeconds = 30,
): Promise<DlqEntry | undefined> {
  const seen = new Set<string>();
  const others = new Map<string, string>();
  let found: DlqEntry | undefined;
  try {
    // Read as a scan reads (2 s), so that a CLI killed here hides nothing for long; only the message
    // found is then held for longer.
    while (!found && seen.size < 10_000) {
      const messages = await receive(sqs, queueUrl, 2, seen.size === 0 ? 1 : 0);
      let fresh = 0;
      for (const message of messages) {
        const entry = toEntry(message);
        if (entry.messageId === messageId) {
          found = entry;
          continue;
        }
        others.set(entry.messageId, entry.receiptHandle);
        if (!seen.has(entry.messageId)) fresh++;
        seen.add(entry.messageId);
      }
      if (!found && fresh === 0) break;
    }
    if (found) {
      await sqs.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: queueUrl,
          ReceiptHandle: found.receiptHandle,
          VisibilityTimeout: visibilitySeconds,
        }),
        awsCall(),
      );
    }
  } finally {
    await release(sqs, queueUrl, [...others.values()]);
  }
  return found;
}

/** Deletes one received message by its receipt handle. */
export async function deleteMessage(sqs: SQSClient, queueUrl: string, receiptHandle: string): Promise<void> {
  await sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: receiptHandle }), awsCall());
}

export interface ReplayEvent {
  readonly entry: DlqEntry;
  readonly status: 'replayed' | 'failed';
  readonly newMessageId?: string;
  readonly error?: string;
  /** Replayed, but the DLQ copy could not be deleted: it is in both queues (harmless). */
  readonly warning?: string;
}

export interface ReplayOptions {
  readonly filter: DlqFilter;
  readonly limit?: number;
  readonly now: () => Date;
  readonly onEvent: (event: ReplayEvent) => void;
  /** Checked between messages; true stops the replay after the message in hand. */
  readonly stopRequested?: () => boolean;
}

/** The attributes a replayed message carries: what the queue's producers set, plus the failure history. */
function replayAttributes(entry: DlqEntry): Record<string, MessageAttributeValue> {
  const out: Record<string, MessageAttributeValue> = {};
  // The ids come from the body, which may hold what SQS refuses in an attribute (U+FFFF): labelled
  // as the producers label them, or SendMessage fails on every replay.
  const put = (name: string, value: string | undefined) => {
    if (value !== undefined && value !== '') {
      out[name] = { DataType: 'String', StringValue: attributeText(value) };
    }
  };
  put('eventType', entry.eventType);
  put('externalId', entry.externalId);
  put('source', entry.source);
  // The worker adds these to the attempts of its next failure, so a replayed message that fails
  // again shows its whole history.
  put(
    'firstFailureAt',
    entry.attributes['firstFailureAt'] ?? (entry.firstReceiveAt ?? entry.sentAt)?.toISOString(),
  );
  put('attempts', String(entry.attempts));
  return out;
}

/**
 * Moves matching DLQ messages back to the main queue, oldest first per group. For each one:
 * SendMessage to the main queue with the same MessageGroupId (its order's group, so it stays behind
 * nothing and ahead of the order's later events), a fresh MessageDeduplicationId (the original is
 * inside SQS's 5-minute window after a quick park), and the failure history as attributes; then
 * DeleteMessage from the DLQ, only once the send succeeded. Killed at any point, every message is
 * in the DLQ or the main queue, possibly both; the ledger makes the second copy harmless.
 *
 * A message parked again while the replay runs (it failed again) is not replayed a second time.
 */
export async function replayQueue(
  sqs: SQSClient,
  dlqUrl: string,
  queueUrl: string,
  options: ReplayOptions,
): Promise<{ replayed: number; failed: number }> {
  const startedAt = options.now().getTime();
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const handled = new Set<string>();
  const replayedBodies = new Set<string>();
  let replayed = 0;
  let failed = 0;

  while (replayed + failed < limit && !options.stopRequested?.()) {
    const messages = await receive(sqs, dlqUrl, 30, 1);
    const giveBack: string[] = [];
    const failedGroups = new Set<string>();
    let eligible = 0;
    for (const message of messages) {
      const entry = toEntry(message);
      const again =
        handled.has(entry.messageId) ||
        replayedBodies.has(entry.body) ||
        (entry.sentAt !== undefined && entry.sentAt.getTime() >= startedAt);
      const blocked = entry.groupId !== undefined && failedGroups.has(entry.groupId);
      if (
        again ||
        blocked ||
        !matches(entry, options.filter) ||
        replayed + failed >= limit ||
        options.stopRequested?.()
      ) {
        giveBack.push(entry.receiptHandle);
        continue;
      }
      eligible++;
      handled.add(entry.messageId);
      if (!entry.groupId) {
        failed++;
        giveBack.push(entry.receiptHandle);
        options.onEvent({
          entry,
          status: 'failed',
          error: 'the message has no MessageGroupId (not from a FIFO queue)',
        });
        continue;
      }
      let newMessageId: string | undefined;
      try {
        const out = await sqs.send(
          new SendMessageCommand({
            QueueUrl: queueUrl,
            MessageBody: entry.body,
            MessageGroupId: entry.groupId,
            MessageDeduplicationId: `replay-${entry.messageId}-${Date.now().toString(36)}`.slice(0, 128),
            MessageAttributes: replayAttributes(entry),
          }),
          awsCall(),
        );
        newMessageId = out.MessageId;
      } catch (error) {
        failed++;
        failedGroups.add(entry.groupId);
        giveBack.push(entry.receiptHandle);
        options.onEvent({
          entry,
          status: 'failed',
          error: `send to the main queue failed (${(error as Error).name})`,
        });
        continue;
      }
      replayed++;
      replayedBodies.add(entry.body);
      let warning: string | undefined;
      try {
        await sqs.send(
          new DeleteMessageCommand({ QueueUrl: dlqUrl, ReceiptHandle: entry.receiptHandle }),
          awsCall(),
        );
      } catch (error) {
        warning = `replayed, but still in the DLQ (delete failed: ${(error as Error).name})`;
      }
      options.onEvent({ entry, status: 'replayed', newMessageId, warning });
    }
    await release(sqs, dlqUrl, giveBack);
    if (eligible === 0) break;
  }
  return { replayed, failed };
}

/** Deletes every message of the queue (SQS may take up to 60 s, and allows one purge a minute). */
/**
 * Confirms that `dlqUrl` is a dead-letter queue before anything is deleted from it: SQS's
 * ListDeadLetterSourceQueues names the queues whose redrive policy points at it. Where that call is
 * not served (the fauxqs emulator does not implement it) or not allowed, the main queue's own
 * RedrivePolicy must name `dlqUrl`'s ARN. Only a positive answer passes.
 *
 * @throws CliError (exit 2) naming the queue when neither check confirms it
 */
export async function confirmDeadLetterQueue(
  sqs: SQSClient,
  dlqUrl: string,
  mainQueueUrl: string | undefined,
): Promise<void> {
  try {
    const out = await sqs.send(new ListDeadLetterSourceQueuesCommand({ QueueUrl: dlqUrl }), awsCall());
    if ((out.queueUrls ?? []).length > 0) return;
    throw new CliError(`${queueName(dlqUrl)} is not the dead-letter queue of any queue; nothing deleted`);
  } catch (error) {
    if (error instanceof CliError) throw error;
  }
  if (mainQueueUrl === undefined) {
    throw new CliError(
      `cannot confirm that ${queueName(dlqUrl)} is a dead-letter queue (ListDeadLetterSourceQueues failed): pass --queue-url or set QUEUE_URL to the main queue; nothing deleted`,
    );
  }
  const [dlq, main] = await Promise.all([
    sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }), awsCall()),
    sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: mainQueueUrl, AttributeNames: ['RedrivePolicy'] }),
      awsCall(),
    ),
  ]);
  const target = deadLetterTarget(main.Attributes?.['RedrivePolicy']);
  const arn = dlq.Attributes?.['QueueArn'];
  if (arn === undefined || target !== arn) {
    throw new CliError(
      `${queueName(dlqUrl)} is not the dead-letter queue of ${queueName(mainQueueUrl)}; nothing deleted`,
    );
  }
}

function deadLetterTarget(policy: string | undefined): string | undefined {
  try {
    const parsed: unknown = JSON.parse(policy ?? '');
    const arn = (parsed as { deadLetterTargetArn?: unknown } | null)?.deadLetterTargetArn;
    return typeof arn === 'string' ? arn : undefined;
  } catch {
    return undefined;
  }
}

export async function purgeQueue(sqs: SQSClient, queueUrl: string): Promise<void> {
  await sqs.send(new PurgeQueueCommand({ QueueUrl: queueUrl }), awsCall());
}

/** `…/123456789012/connector-events-dlq.fifo` → `connector-events-dlq.fifo`. */
export function queueName(queueUrl: string): string {
  return queueUrl.replace(/\/+$/, '').split('/').pop() ?? queueUrl;
}

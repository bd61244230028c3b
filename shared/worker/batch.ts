import type { SQSBatchResponse, SQSRecord } from 'aws-lambda';
import { ConnectorEvent } from '../domain/events.ts';
import {
  BadInputError,
  describeError,
  type FailureClass,
  failureClassOf,
  isConnectorError,
} from '../errors.ts';
import type { FailureQueue } from '../ports.ts';
import type { Outcome, WorkerDeps } from './flow.ts';
import { processEvent } from './process-event.ts';

export interface BatchDeps extends WorkerDeps {
  readonly failures: FailureQueue;
  readonly random?: () => number;
  /** Backoff of a message given back to the queue, by receive count: base and cap in seconds. */
  readonly visibilityBaseSeconds?: number;
  readonly visibilityCapSeconds?: number;
  /** In-invocation retries of a transient failure, while the deadline allows. */
  readonly inlineRetries?: number;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly observe?: (report: RecordReport) => void;
}

export interface RecordReport {
  readonly messageId: string;
  readonly receiveCount: number;
  readonly event?: Pick<ConnectorEvent, 'type' | 'externalId' | 'source'>;
  /** `late_refund`: done with, the refund held in the ledger for finance (see `LateRefundError`). */
  readonly status: 'done' | 'retry' | 'parked' | 'late_refund' | 'skipped_after_group_failure';
  readonly outcome?: Outcome;
  readonly failureClass?: FailureClass;
  readonly reason?: string;
  readonly platformStatus?: number;
}

/**
 * Processes an SQS FIFO batch the way Lambda's event source mapping expects with
 * ReportBatchItemFailures: message groups run concurrently, each group strictly in order, and once a
 * message of a group fails, the rest of that group in this batch is reported failed unprocessed (so
 * the order of one order's events is kept). Permanent failures are parked in the DLQ with readable
 * attributes and then count as handled; if parking fails, the message stays in the queue.
 *
 * Not Powertools' `SqsFifoPartialProcessorAsync`: it runs a batch one record at a time, so one
 * slow order would hold up every other order of the batch; and its `skipGroupOnError` fails the
 * held-back records with an error that does not carry the failed record's backoff, which they must
 * be hidden for too (or the group waits out the queue's whole visibility timeout).
 */
export async function processBatch(
  deps: BatchDeps,
  records: readonly SQSRecord[],
  deadline: number,
): Promise<SQSBatchResponse> {
  const groups = new Map<string, SQSRecord[]>();
  for (const record of records) {
    const group = record.attributes.MessageGroupId ?? record.messageId;
    const list = groups.get(group) ?? [];
    list.push(record);
    groups.set(group, list);
  }
  const failed: string[] = [];
  await Promise.all(
    [...groups.values()].map(async (group) => {
      for (const [index, record] of group.entries()) {
        const result = await processRecord(deps, record, deadline);
        if (result === true) continue;
        for (const rest of group.slice(index)) {
          failed.push(rest.messageId);
          if (rest === record) continue;
          // A FIFO group stays blocked while any of its messages is in flight: the ones behind the
          // failed message are hidden for the same backoff, so the group comes back when it does
          // (not after the queue's whole visibility timeout).
          if (result.hiddenForSeconds !== undefined) {
            await deps.failures.delay(rest.receiptHandle, result.hiddenForSeconds).catch(() => undefined);
          }
          deps.observe?.({
            messageId: rest.messageId,
            receiveCount: receiveCount(rest),
            status: 'skipped_after_group_failure',
          });
        }
        return;
      }
    }),
  );
  return { batchItemFailures: failed.map((itemIdentifier) => ({ itemIdentifier })) };
}

function receiveCount(record: SQSRecord): number {
  return Number(record.attributes.ApproximateReceiveCount ?? '1') || 1;
}

/** Not done with: left in the queue, hidden for this backoff when one was set. */
interface GivenBack {
  readonly hiddenForSeconds?: number;
}

/** True when the message is done with (applied, duplicate, or parked in the DLQ). */
async function processRecord(
  deps: BatchDeps,
  record: SQSRecord,
  deadline: number,
): Promise<true | GivenBack> {
  const count = receiveCount(record);
  let event: ConnectorEvent;
  try {
    event = ConnectorEvent.parse(JSON.parse(record.body));
  } catch {
    return park(
      deps,
      record,
      undefined,
      new BadInputError('message body is not a valid connector event'),
      count,
    );
  }
  const summary = { type: event.type, externalId: event.externalId, source: event.source };
  const sleep = deps.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const random = deps.random ?? Math.random;
  const inlineRetries = deps.inlineRetries ?? 2;

  for (let attempt = 0; ; attempt++) {
    try {
      const outcome = await processEvent(deps, event, { deadline });
      deps.observe?.({
        messageId: record.messageId,
        receiveCount: count,
        event: summary,
        status: 'done',
        outcome,
      });
      return true;
    } catch (error) {
      if (failureClassOf(error) === 'late_refund') {
        deps.observe?.({
          messageId: record.messageId,
          receiveCount: count,
          event: summary,
          status: 'late_refund',
          failureClass: 'late_refund',
          reason: reasonOf(error),
          platformStatus: isConnectorError(error) ? error.status : undefined,
        });
        return true;
      }
      if (failureClassOf(error) !== 'transient') return park(deps, record, summary, error, count);
      const hinted = isConnectorError(error) ? error.retryAfterMs : undefined;
      const wait = hinted ?? Math.round(random() * 200 * 2 ** attempt);
      // After an add without a clear answer the wait is spent hidden in the queue, not asleep here.
      const unclear = isConnectorError(error) && error.ambiguous === true;
      if (!unclear && attempt < inlineRetries && deps.now() + wait + 1000 < deadline) {
        await sleep(wait);
        continue;
      }
      // Give the message back, hidden for a backoff that grows with its receive count; past the
      // queue's maxReceiveCount, SQS's redrive moves it to the DLQ.
      const base = deps.visibilityBaseSeconds ?? 5;
      const cap = deps.visibilityCapSeconds ?? 900;
      const ceiling = Math.min(cap, base * 2 ** (count - 1));
      const seconds = Math.max(
        Math.ceil((hinted ?? 0) / 1000),
        Math.round(ceiling / 2 + (random() * ceiling) / 2),
      );
      const delayed = await deps.failures.delay(record.receiptHandle, seconds).then(
        () => true,
        () => false,
      );
      deps.observe?.({
        messageId: record.messageId,
        receiveCount: count,
        event: summary,
        status: 'retry',
        failureClass: 'transient',
        reason: reasonOf(error),
        platformStatus: isConnectorError(error) ? error.status : undefined,
      });
      return delayed ? { hiddenForSeconds: seconds } : {};
    }
  }
}

async function park(
  deps: BatchDeps,
  record: SQSRecord,
  summary: RecordReport['event'],
  error: unknown,
  count: number,
): Promise<true | GivenBack> {
  const now = new Date(deps.now()).toISOString();
  const attrs = record.messageAttributes ?? {};
  const priorAttempts = Number(attrs['attempts']?.stringValue ?? '0') || 0;
  const failureClass = failureClassOf(error);
  const reason = reasonOf(error);
  const platformStatus = isConnectorError(error) ? error.status : undefined;
  try {
    await deps.failures.park(
      {
        body: record.body,
        groupId: record.attributes.MessageGroupId ?? record.messageId,
        // A fresh dedup id: a message parked again after a replay must not be dropped as a repeat.
        deduplicationId: `${record.messageId}-${Date.now().toString(36)}`.slice(0, 128),
      },
      {
        failureClass,
        reason,
        platformStatus: platformStatus === undefined ? undefined : String(platformStatus),
        platformMessage: isConnectorError(error) ? error.platformMessage : undefined,
        attempts: String(priorAttempts + count),
        firstFailureAt: attrs['firstFailureAt']?.stringValue ?? now,
        lastFailureAt: now,
        eventType: summary?.type,
        externalId: summary?.externalId,
        source: summary?.source,
      },
    );
  } catch (parkError) {
    deps.observe?.({
      messageId: record.messageId,
      receiveCount: count,
      event: summary,
      status: 'retry',
      failureClass: 'transient',
      reason: `could not park in the DLQ (${(parkError as Error).name}); left in the queue`,
    });
    return {};
  }
  deps.observe?.({
    messageId: record.messageId,
    receiveCount: count,
    event: summary,
    status: 'parked',
    failureClass,
    reason,
    platformStatus,
  });
  return true;
}

/** The connector's own message; of anything else thrown (an AWS SDK error), `describeError`'s safe line. */
function reasonOf(error: unknown): string {
  if (isConnectorError(error)) return error.message.slice(0, 1000);
  return describeError(error);
}

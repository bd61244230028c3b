import type { SQSBatchResponse, SQSRecord } from 'aws-lambda';
import { ConnectorEvent } from '../domain/events.ts';
import {
  BadInputError,
  describeError,
  type FailureClass,
  failureClassOf,
  isConnectorError,
} from '../errors.ts';
import { ledgerKey } from '../ledger.ts';
import type { FailureAttributes, FailureQueue } from '../ports.ts';
import { DEFAULT_VERIFY_MS, type Outcome, settleMsFor, type WorkerDeps } from './flow.ts';
import { processEvent, withPrefix } from './process-event.ts';

export interface BatchDeps extends WorkerDeps {
  readonly failures: FailureQueue;
  readonly random?: () => number;
  /** Backoff of a message given back to the queue, by receive count: base and cap in seconds. */
  readonly visibilityBaseSeconds?: number;
  readonly visibilityCapSeconds?: number;
  /** In-invocation retries of a transient failure, while the deadline allows. */
  readonly inlineRetries?: number;
  /**
   * The main queue's redrive `maxReceiveCount`. On that receive a message still failing transiently
   * is parked with a reason, not left to SQS's redrive (which moves it with no attributes).
   * @default undefined: left to the redrive
   */
  readonly maxReceiveCount?: number;
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
 * ReportBatchItemFailures: message groups run concurrently, each group strictly in order (two groups
 * holding messages of one order one after the other, `orderOf`), and once a message of a group
 * fails, the rest of that group in this batch is reported failed unprocessed (so the order of one
 * order's events is kept). Permanent failures are parked in the DLQ with readable
 * attributes and then count as handled, and so are transient ones on the queue's last receive; if
 * parking fails, the message stays in the queue. A message held back is never on a later receive
 * than the failed one ahead of it (a FIFO queue hands out a group's later message only with the
 * earlier ones or once they are deleted; a replay joins the end of its group): when it is on its
 * last receive, so is the failed one, parked then, and the rest of its group is processed after it.
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
  // Each body read once: by the lanes below, then by the record's processing.
  const events = new Map(records.map((record) => [record, eventOf(record)] as const));
  const lanes = new Map<string, SQSRecord[][]>();
  for (const [id, group] of groups) {
    const lane = orderOf(deps, group, events) ?? `group ${id}`;
    lanes.set(lane, [...(lanes.get(lane) ?? []), group]);
  }
  const failed: string[] = [];
  await Promise.all(
    [...lanes.values()].map(async (lane) => {
      for (const group of lane) await processGroup(deps, group, events, deadline, failed);
    }),
  );
  return { batchItemFailures: failed.map((itemIdentifier) => ({ itemIdentifier })) };
}

/**
 * The ledger record a group's messages are about, when one of them says. Two groups can hold
 * messages of one order (a message queued under a source's older grouping keeps that group, and so
 * does its replay: docs/exactly-once.md, rule 4): they run one after the other, as side by side under
 * one worker id the marks of their sends left unconfirmed would be one.
 */
function orderOf(
  deps: BatchDeps,
  group: readonly SQSRecord[],
  events: ReadonlyMap<SQSRecord, ConnectorEvent | undefined>,
): string | undefined {
  for (const record of group) {
    const event = events.get(record);
    const source = event && deps.sources.get(event.source);
    if (event && source) return `order ${ledgerKey(source.program, withPrefix(source, event).externalId)}`;
  }
  return undefined;
}

/** The connector event a message carries; undefined when its body is not one. */
function eventOf(record: SQSRecord): ConnectorEvent | undefined {
  try {
    const parsed = ConnectorEvent.safeParse(JSON.parse(record.body));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Runs one group's records in order; once one fails, the rest are reported failed unprocessed. */
async function processGroup(
  deps: BatchDeps,
  group: readonly SQSRecord[],
  events: ReadonlyMap<SQSRecord, ConnectorEvent | undefined>,
  deadline: number,
  failed: string[],
): Promise<void> {
  for (const [index, record] of group.entries()) {
    const result = await processRecord(deps, record, events.get(record), deadline);
    if (result === true) continue;
    failed.push(record.messageId);
    for (const rest of group.slice(index + 1)) {
      failed.push(rest.messageId);
      // A FIFO group stays blocked while any of its messages is in flight: the ones behind the
      // failed message are hidden for the same backoff, so the group comes back when it does
      // (not after the queue's whole visibility timeout).
      if (result.hiddenForSeconds !== undefined) {
        await deps.failures.delay(rest.receiptHandle, result.hiddenForSeconds).catch(() => undefined);
      }
      // SQS counts this receive too. On its last, the failed one ahead of it, on its last as well,
      // could not be parked: the redrive moves both, in order, this one with no reason.
      deps.observe?.({
        messageId: rest.messageId,
        receiveCount: receiveCount(rest),
        status: 'skipped_after_group_failure',
        reason: isLastReceive(deps, rest) ? leftToRedrive(deps, rest, record) : undefined,
      });
    }
    return;
  }
}

function receiveCount(record: SQSRecord): number {
  return Number(record.attributes.ApproximateReceiveCount ?? '1') || 1;
}

function isLastReceive(deps: BatchDeps, record: SQSRecord): boolean {
  return deps.maxReceiveCount !== undefined && receiveCount(record) >= deps.maxReceiveCount;
}

/** Not done with: left in the queue, hidden for this backoff when one was set. */
interface GivenBack {
  readonly hiddenForSeconds?: number;
}

/**
 * True when the message is done with (applied, duplicate, or parked in the DLQ). `event`: what its
 * body carries (`eventOf`), undefined when it is not a connector event.
 */
async function processRecord(
  deps: BatchDeps,
  record: SQSRecord,
  event: ConnectorEvent | undefined,
  deadline: number,
): Promise<true | GivenBack> {
  const count = receiveCount(record);
  if (event === undefined) {
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
      // This invocation is done with it. On the queue's last receive SQS's redrive would move it to
      // the DLQ with no word of why: parked with its last error instead. Safe after an unclear add
      // too: the ledger keeps the order's lease and verification window for its replay.
      let parkRefused: string | undefined;
      if (isLastReceive(deps, record)) {
        parkRefused = await parkWith(deps, record, summary, error, count, exhaustedReason(error, count));
        if (parkRefused === undefined) return true;
      }
      // Give the message back, hidden for a backoff that grows with its receive count; past the
      // queue's maxReceiveCount, SQS's redrive moves it to the DLQ. A wait asked for (a retry-after,
      // a lease, the verification window) is honoured up to the longest the worker itself asks for,
      // which `longestQueueStaySeconds` counts: a platform asking for hours does not hide it for 12.
      const ceiling = backoffCeiling(count, deps.visibilityBaseSeconds, deps.visibilityCapSeconds);
      const seconds = Math.max(
        Math.min(Math.ceil((hinted ?? 0) / 1000), longestWaitSeconds(deps)),
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
        reason:
          parkRefused === undefined
            ? reasonOf(error)
            : `${reasonOf(error)}; could not park in the DLQ (${parkRefused}): left to the queue's redrive`,
        platformStatus: isConnectorError(error) ? error.status : undefined,
      });
      return delayed ? { hiddenForSeconds: seconds } : {};
    }
  }
}

/**
 * The longest backoff after receive `count` fails transiently: `base` seconds doubling with each
 * receive, capped at `cap`. The worker draws between half and all of it (a longer hint wins).
 */
function backoffCeiling(count: number, base = 5, cap = 900): number {
  return Math.min(cap, base * 2 ** (count - 1));
}

/**
 * The longest the worker hides a message for on a wait it was asked for (`retryAfterMs`): the
 * longest wait it asks for itself, of the add's lease (a lease held by another worker), the settle
 * period and the verification window after an unclear add. A platform's `retry-after` is honoured
 * up to that too (inline, it is bounded by the invocation's deadline).
 */
export function longestWaitSeconds(deps: Pick<WorkerDeps, 'leaseMs' | 'settleMs' | 'verifyMs'>): number {
  const settleMs = deps.settleMs ?? settleMsFor(5_000);
  return Math.ceil(Math.max(deps.leaseMs, settleMs, deps.verifyMs ?? DEFAULT_VERIFY_MS) / 1000);
}

/**
 * The longest a message failing transiently stays in the main queue before the worker parks it, or
 * SQS's redrive moves it to the DLQ: on each of its `maxReceiveCount` receives, the invocation's
 * whole time (inline retries and their waits included) then the longest it is hidden after it, or
 * the queue's visibility timeout when that is longer (an invocation that died, or a backoff that
 * could not be set, leaves it hidden that long). It is hidden for the longest backoff, or for a wait
 * it was asked for, up to `longestWaitSeconds`: a platform's `retry-after` (on every receive, the
 * invocation's deadline having cut the wait short inline), or the rest of the verification window
 * after an add that got no clear answer (every other receive: an add, then the wait for its window).
 * The last receive counts too: when its park fails, the redrive moves it at the next receive.
 * One message's own stay: one held back behind others of its order waits for theirs too.
 */
export function longestQueueStaySeconds(queue: {
  /** The main queue's redrive `maxReceiveCount`. */
  readonly maxReceiveCount: number;
  /** The main queue's `VisibilityTimeout`. */
  readonly visibilityTimeoutSeconds: number;
  /** The longest an invocation holds a message. @default 30: the worker function's timeout (infra/connector-stack.ts) */
  readonly invocationSeconds?: number;
  /**
   * The worker's `longestWaitSeconds`. @default 600: the deployed worker's, its verification window
   * (ADD_VERIFY_SECONDS unset), longer than its lease (LEASE_MS unset: 120 s) and settle period (10 s)
   */
  readonly longestWaitSeconds?: number;
}): number {
  const invocation = queue.invocationSeconds ?? 30;
  const wait = queue.longestWaitSeconds ?? DEFAULT_VERIFY_MS / 1000;
  let total = 0;
  for (let count = 1; count <= queue.maxReceiveCount; count++) {
    total += Math.max(queue.visibilityTimeoutSeconds, invocation + Math.max(backoffCeiling(count), wait));
  }
  return total;
}

/** Why a message held back on its last receive is left to SQS's redrive (its log line says it). */
function leftToRedrive(deps: BatchDeps, record: SQSRecord, ahead: SQSRecord): string {
  return `held back on its last receive (${receiveCount(record)} of the queue's ${deps.maxReceiveCount}) behind message ${ahead.messageId} of its order, which stays in the queue: left to the queue's redrive, which moves it to the DLQ without a reason (the log lines of ${ahead.messageId} say why it failed)`;
}

async function park(
  deps: BatchDeps,
  record: SQSRecord,
  summary: RecordReport['event'],
  error: unknown,
  count: number,
): Promise<true | GivenBack> {
  const refused = await parkWith(deps, record, summary, error, count, reasonOf(error));
  if (refused === undefined) return true;
  deps.observe?.({
    messageId: record.messageId,
    receiveCount: count,
    event: summary,
    status: 'retry',
    failureClass: 'transient',
    reason: `could not park in the DLQ (${refused}); left in the queue`,
  });
  return {};
}

/**
 * Parks the message in the DLQ with `reason` and its failure attributes, and reports it parked;
 * the name of the error when the DLQ refused it (nothing reported then: the caller gives it back).
 */
async function parkWith(
  deps: BatchDeps,
  record: SQSRecord,
  summary: RecordReport['event'],
  error: unknown,
  count: number,
  reason: string,
): Promise<string | undefined> {
  const refused = await toDlq(deps, record, failureAttributes(deps, record, summary, error, count, reason));
  if (refused !== undefined) return refused;
  deps.observe?.({
    messageId: record.messageId,
    receiveCount: count,
    event: summary,
    status: 'parked',
    failureClass: failureClassOf(error),
    reason,
    platformStatus: isConnectorError(error) ? error.status : undefined,
  });
  return undefined;
}

/** What `dlq list`/`show` read on a parked message, and what `dlq replay` carries on. */
function failureAttributes(
  deps: BatchDeps,
  record: SQSRecord,
  summary: RecordReport['event'],
  error: unknown,
  count: number,
  reason: string,
): FailureAttributes {
  const now = new Date(deps.now()).toISOString();
  const attrs = record.messageAttributes ?? {};
  const priorAttempts = Number(attrs['attempts']?.stringValue ?? '0') || 0;
  const platformStatus = isConnectorError(error) ? error.status : undefined;
  return {
    failureClass: failureClassOf(error),
    reason,
    platformStatus: platformStatus === undefined ? undefined : String(platformStatus),
    platformMessage: isConnectorError(error) ? error.platformMessage : undefined,
    attempts: String(priorAttempts + count),
    firstFailureAt: attrs['firstFailureAt']?.stringValue ?? now,
    lastFailureAt: now,
    eventType: summary?.type,
    externalId: summary?.externalId,
    source: summary?.source,
  };
}

/** Sends the message, unchanged, to the DLQ; the name of the error when that failed. */
async function toDlq(
  deps: BatchDeps,
  record: SQSRecord,
  failure: FailureAttributes,
): Promise<string | undefined> {
  try {
    await deps.failures.park(
      {
        body: record.body,
        // Its order's group, which `dlq replay` sends it back with.
        groupId: record.attributes.MessageGroupId ?? record.messageId,
        // A fresh dedup id: a message parked again after a replay must not be dropped as a repeat.
        deduplicationId: `${record.messageId}-${Date.now().toString(36)}`.slice(0, 128),
      },
      failure,
    );
    return undefined;
  } catch (parkError) {
    return parkError instanceof Error ? parkError.name : 'unknown error';
  }
}

/**
 * Why a message still failing transiently on the queue's last receive was parked: for an error the
 * connector did not classify (a bug, or an AWS call), so said, not left to read as the platform's.
 */
function exhaustedReason(error: unknown, count: number): string {
  const head = `gave up after ${count} receives (the queue's maxReceiveCount)`;
  const described = describeError(error);
  // Cut so that what follows it, the advice, always fits in the reason.
  const last = `last: ${described.length > 700 ? `${described.slice(0, 700)}…` : described}`;
  let reason: string;
  if (isConnectorError(error)) {
    reason = `${head}, still failing transiently; ${last}`;
    if (error.ambiguous) {
      reason +=
        '; that call got no clear answer, so the platform may have carried it out: replay it (the ledger applies it once), do not redo it by hand';
    }
  } else if (isAwsError(error)) {
    reason = `${head} on a failed AWS call (the worker's logs have each one; check the service, then replay); ${last}`;
  } else {
    reason = `${head} on an unexpected error (a bug? the worker's logs have each one; replay once it is fixed); ${last}`;
  }
  return reason;
}

/** What an AWS SDK client throws (a service's answer, or a network failure after its retries). */
function isAwsError(error: unknown): boolean {
  return error instanceof Error && typeof (error as { $metadata?: unknown }).$metadata === 'object';
}

/** The connector's own message; of anything else thrown (an AWS SDK error), `describeError`'s safe line. */
function reasonOf(error: unknown): string {
  if (isConnectorError(error)) return error.message.slice(0, 1000);
  return describeError(error);
}

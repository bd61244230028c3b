import type { SQSRecord } from 'aws-lambda';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEventInput } from '../../shared/domain/events.ts';
import { TransientError } from '../../shared/errors.ts';
import type { ConversionBackend, FailureAttributes, FailureQueue } from '../../shared/ports.ts';
import type { BatchDeps, RecordReport } from '../../shared/worker/batch.ts';
import { FakeClock } from './clock.ts';
import { MemoryLedger } from './memory-ledger.ts';
import { fifoRecord } from './sqs-records.ts';

/** When the fake clock of `batchHarness` starts (epoch ms). */
export const START = Date.parse('2026-03-02T09:00:00.000Z');
/** The program of `SOURCE`. */
export const PROGRAM = '5ad000000000000000000101';
/** The one source of `batchHarness`'s worker: Shopify shop `shop` of `PROGRAM`. */
export const SOURCE = SourceConfig.parse({
  id: 'shop',
  platform: 'shopify',
  program: PROGRAM,
  rule: '5ad000000000000000000201',
  secretRef: 'SHOP_SECRET',
});

/** The client's error for a Conversion Add the platform answered 503. */
export const unavailable = () =>
  new TransientError('conversions.add answered 503: Service Unavailable', {
    status: 503,
    platformMessage: 'Service Unavailable',
  });

/** Records what the worker asks of SQS besides the event source mapping; `parkError` makes `park` fail. */
export class RecordingFailureQueue implements FailureQueue {
  readonly delays: { receiptHandle: string; seconds: number }[] = [];
  readonly parked: {
    message: { body: string; groupId: string; deduplicationId: string };
    failure: FailureAttributes;
  }[] = [];
  parkError: Error | undefined;

  async park(
    message: { body: string; groupId: string; deduplicationId: string },
    failure: FailureAttributes,
  ): Promise<void> {
    if (this.parkError) throw this.parkError;
    this.parked.push({ message, failure });
  }

  async delay(receiptHandle: string, seconds: number): Promise<void> {
    this.delays.push({ receiptHandle, seconds });
  }
}

/** The worker's batch dependencies of `batchHarness`, and what they record. */
export interface BatchHarness {
  readonly deps: BatchDeps;
  readonly clock: FakeClock;
  readonly ledger: MemoryLedger;
  readonly failures: RecordingFailureQueue;
  /** Each record's report, in order. */
  readonly reports: RecordReport[];
}

/**
 * `processBatch`'s dependencies for `SOURCE` alone, calling `backend`, on a fake clock at `START` with
 * an in-memory ledger: worker `worker-1`, a 60 s lease, two inline retries, a backoff from 5 s capped
 * at 900 s, jitter drawing 0; `overrides` replaces any of them.
 */
export function batchHarness(backend: ConversionBackend, overrides: Partial<BatchDeps> = {}): BatchHarness {
  const clock = new FakeClock({ start: START });
  const ledger = new MemoryLedger(clock.now);
  const failures = new RecordingFailureQueue();
  const reports: RecordReport[] = [];
  const deps: BatchDeps = {
    ledger,
    sources: new Map([[SOURCE.id, SOURCE]]),
    backendFor: () => backend,
    now: clock.now,
    workerId: 'worker-1',
    leaseMs: 60_000,
    failures,
    random: () => 0,
    visibilityBaseSeconds: 5,
    visibilityCapSeconds: 900,
    inlineRetries: 2,
    sleep: clock.sleep,
    observe: (report) => reports.push(report),
    ...overrides,
  };
  return { deps, clock, ledger, failures, reports };
}

/** Order `externalId` of `SOURCE`, EUR 20.00, tracked by a click id and the buyer's IP. */
export function orderPlaced(externalId: string): ConnectorEventInput {
  return {
    type: 'OrderPlaced',
    eventId: `evt-${externalId}`,
    source: SOURCE.id,
    platform: 'shopify',
    externalId,
    receivedAt: new Date(START - 60_000).toISOString(),
    amount: 2000,
    currency: 'EUR',
    clickIds: ['0123456789abcdef01234567'],
    buyerIp: '203.0.113.7',
  };
}

/** `event` as message `messageId` of `PROGRAM`'s queue, sent a minute before `START`. */
export function sqsRecord(
  messageId: string,
  event: ConnectorEventInput,
  options: { receiveCount?: number; attributes?: Record<string, string> } = {},
): SQSRecord {
  return fifoRecord(event, { messageId, program: PROGRAM, sentAt: START - 60_000, ...options });
}

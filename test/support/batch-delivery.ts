import type { SQSBatchResponse } from 'aws-lambda';
import { backendFor } from '../../functions/worker.ts';
import type { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEventInput } from '../../shared/domain/events.ts';
import type { ConversionBackend, FailureAttributes, FailureQueue, Ledger } from '../../shared/ports.ts';
import { processBatch } from '../../shared/worker/batch.ts';
import { fifoRecord } from './sqs-records.ts';

/** A `FailureQueue` that keeps the failure of each message parked, in order, and delays nothing. */
class RecordingDlq implements FailureQueue {
  readonly parked: FailureAttributes[] = [];

  async park(_message: unknown, failure: FailureAttributes): Promise<void> {
    this.parked.push(failure);
  }

  async delay(): Promise<void> {}
}

/**
 * `event` as one message (`messageId`) through the worker's batch, as the Lambda runs it: `source`
 * alone, calling `current` as its current-API backend, no backoff waits. Answers the batch's answer
 * and the failures it parked.
 */
export async function deliverInBatch(
  event: ConnectorEventInput,
  through: {
    readonly ledger: Ledger;
    readonly source: SourceConfig;
    readonly current: ConversionBackend;
    readonly messageId: string;
  },
): Promise<{ answer: SQSBatchResponse; parked: FailureAttributes[] }> {
  const dlq = new RecordingDlq();
  const answer = await processBatch(
    {
      ledger: through.ledger,
      sources: new Map([[through.source.id, through.source]]),
      backendFor: backendFor({ current: through.current }),
      failures: dlq,
      now: Date.now,
      workerId: 'worker-1',
      leaseMs: 60_000,
      random: () => 0,
      sleep: async () => {},
    },
    [
      fifoRecord(event, {
        messageId: through.messageId,
        program: through.source.program,
        sentAt: Date.now(),
      }),
    ],
    Date.now() + 60_000,
  );
  return { answer, parked: dlq.parked };
}

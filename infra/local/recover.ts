import { ChangeMessageVisibilityCommand } from '@aws-sdk/client-sqs';
import type { Ledger } from '../../shared/ports.ts';
import type { Emulators } from './emulators.ts';

/**
 * What a restart of the local stack on a kept LOCAL_DATA_DIR finds from the process that died: one
 * process polls these queues, so messages still in flight and leases on adds were that process's and
 * nobody will finish them. Handing them back at once spares the wait for their timeouts; the worker
 * then asks the platform (Conversion info) whether each add went through before adding again.
 */
export interface RecoveredAfterCrash {
  /** Messages of the queue and the DLQ made visible again. */
  readonly messages: number;
  /** `adding` records whose lease was expired. */
  readonly leases: number;
}

/**
 * @param expireLeases only when the platform died with the process (the in-process sandbox): an
 *   external platform may still record an add sent just before the crash, so its settle period stands.
 */
export async function recoverAfterCrash(
  emulators: Emulators,
  ledger: Ledger,
  expireLeases: boolean,
): Promise<RecoveredAfterCrash> {
  let messages = 0;
  const queues = [
    [emulators.queueName, emulators.queueUrl],
    [emulators.dlqName, emulators.dlqUrl],
  ] as const;
  for (const [name, url] of queues) {
    for (const m of emulators.messages(name)) {
      if (m.state !== 'inflight' || !m.receiptHandle) continue;
      try {
        await emulators.sqs.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: url,
            ReceiptHandle: m.receiptHandle,
            VisibilityTimeout: 0,
          }),
        );
        messages += 1;
      } catch (error) {
        // Its visibility ran out since it was listed: it is visible again already.
        if ((error as Error).name !== 'MessageNotInflight') throw error;
      }
    }
  }
  let leases = 0;
  if (expireLeases) {
    const now = Date.now();
    for await (const record of ledger.list()) {
      if (record.state !== 'adding' || (record.leaseUntil ?? 0) <= now) continue;
      record.leaseUntil = 0;
      if (await ledger.update(record)) leases += 1;
    }
  }
  return { messages, leases };
}

import { waitingRefunds } from '../ledger.ts';
import type { Ledger } from '../ports.ts';

/** The input of the hourly EventBridge rule that has the worker measure refunds waiting for their order. */
export const WAITING_REFUNDS_CHECK = { check: 'waiting-refunds' } as const;

/** What the scheduled check reports: how many refunds wait for their order, and the oldest's age. */
export interface WaitingMeasure {
  readonly waiting: number;
  /** Seconds since the oldest waiting refund was received; 0 when none waits. */
  readonly oldestSeconds: number;
}

/**
 * Measures the refunds the ledger holds for orders not added yet. A refund whose order never comes
 * must not be silent: the worker runs this on a schedule and an alarm watches `oldestSeconds`.
 * It scans the whole ledger (DynamoDB Scan), which is why it runs hourly, not per batch.
 */
export async function measureWaitingRefunds(
  ledger: Pick<Ledger, 'list'>,
  now: () => number,
): Promise<WaitingMeasure> {
  let waiting = 0;
  let oldest: number | undefined;
  for await (const record of ledger.list()) {
    for (const refund of waitingRefunds([record])) {
      waiting += 1;
      const at = Date.parse(refund.since);
      if (oldest === undefined || at < oldest) oldest = at;
    }
  }
  return {
    waiting,
    oldestSeconds: oldest === undefined ? 0 : Math.max(0, Math.floor((now() - oldest) / 1000)),
  };
}

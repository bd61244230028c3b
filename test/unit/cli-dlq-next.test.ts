import { describe, expect, it } from 'vitest';
import { nextStep } from '../../cli/dlq.ts';
import type { DlqEntry } from '../../cli/dlq-reader.ts';

/**
 * `dlq list`'s NEXT column for a message the worker parked on the queue's last receive, still
 * failing transiently (shared/worker/batch.ts, `exhaustedReason`): its reason tells a platform that
 * kept failing from an AWS call that did and from an error nobody classified (a bug), and so must
 * the advice. "Replay once the platform is healthy" would send the operator to wait on the platform
 * for a bug.
 */
function parkedTransient(reason: string): DlqEntry {
  return {
    messageId: 'm-1',
    receiptHandle: 'r-1',
    body: '{}',
    receiveCount: 1,
    attributes: { failureClass: 'transient', reason },
    parked: true,
    externalId: '1001',
    eventType: 'OrderPlaced',
    failureClass: 'transient',
    reason,
    attempts: 6,
  } as DlqEntry;
}

describe('dlq list: what to do with a message parked on its last receive', () => {
  it.each([
    [
      "gave up after 6 receives (the queue's maxReceiveCount), still failing transiently; last: conversions.add answered 503",
      'replay once the platform is healthy',
    ],
    [
      "gave up after 6 receives (the queue's maxReceiveCount) on a failed AWS call (the worker's logs have each one; check the service, then replay); last: ProvisionedThroughputExceededException",
      'check the AWS service, then replay',
    ],
    [
      "gave up after 6 receives (the queue's maxReceiveCount) on an unexpected error (a bug? the worker's logs have each one; replay once it is fixed); last: TypeError: x is undefined",
      "read the worker's logs (a bug?); replay once fixed",
    ],
  ])('%s → %s', (reason, next) => {
    expect(nextStep(parkedTransient(reason))).toBe(next);
  });
});

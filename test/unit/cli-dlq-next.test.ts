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
    [
      "parked on receive 3 of the queue's 6, before its last, ahead of message m2 of its order, held back behind it on its last receive (so that it reaches the DLQ after this one, with a reason), still failing transiently; last: conversions.add answered 503",
      'replay once the platform is healthy',
    ],
    // Parked behind the one above: replayed first, it would be applied ahead of it.
    [
      "held back on receive 6 of the queue's 6 behind message m1 of its order (OrderPlaced, still failing transiently), and parked right after it: replay it with or after that one, never before",
      'replay with or after the one it waited behind',
    ],
    [
      "held back on receive 6 of the queue's 6 behind message m1 of its order (OrderPlaced, still failing on an unexpected error), and parked right after it: replay it with or after that one, never before",
      'replay with or after the one it waited behind',
    ],
  ])('%s → %s', (reason, next) => {
    expect(nextStep(parkedTransient(reason))).toBe(next);
  });
});

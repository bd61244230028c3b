import { describe, expect, it } from 'vitest';
import { DROP_AFTER_MS, DROP_MARGIN_MS, dropFloorOf, dropReservation } from '../../cli/reservations.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { longestQueueStaySeconds } from '../../shared/worker/batch.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * How young a reservation `--drop` leaves alone follows the main queue's redrive policy, read from
 * SQS: the longest its refund may still be retried there. What the queue does not say is not guessed.
 */

const URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/connector-Pipeline.fifo';
const DLQ_ARN = 'arn:aws:sqs:eu-west-1:123456789012:connector-Pipeline-dlq.fifo';
/** The stack's visibility timeout: 6 × the worker's 30 s. */
const DEPLOYED_VISIBILITY = '180';
const policy = (maxReceiveCount: unknown) =>
  JSON.stringify({ deadLetterTargetArn: DLQ_ARN, maxReceiveCount });

describe('dropFloorOf', () => {
  it('is 30 minutes when the longest stay and the margin are shorter', () => {
    // Act: one receive, 30 s in the worker and up to 10 minutes hidden after it.
    const floor = dropFloorOf(URL, { RedrivePolicy: policy(1), VisibilityTimeout: DEPLOYED_VISIBILITY });
    // Assess
    expect(floor).toMatchObject({ ms: DROP_AFTER_MS });
  });

  it('is 73 minutes for the stack’s default of 6 receives: a wait of up to 10 minutes after each', () => {
    // Act
    const floor = dropFloorOf(URL, { RedrivePolicy: policy(6), VisibilityTimeout: DEPLOYED_VISIBILITY });
    // Assess: 6 × (30 + 600) s, and the margin.
    expect(floor).toEqual({
      ms: 3_780_000 + DROP_MARGIN_MS,
      why: "the main queue's maxReceiveCount 6: a refund failing transiently may stay in it up to 63 minutes",
    });
  });

  it('is the longest stay in the queue plus the margin when that is longer, the count given as a number or a string', () => {
    // Prepare
    const stayMs = longestQueueStaySeconds({ maxReceiveCount: 10, visibilityTimeoutSeconds: 180 }) * 1000;
    // Act
    const asNumber = dropFloorOf(URL, { RedrivePolicy: policy(10), VisibilityTimeout: DEPLOYED_VISIBILITY });
    const asString = dropFloorOf(URL, {
      RedrivePolicy: policy('10'),
      VisibilityTimeout: DEPLOYED_VISIBILITY,
    });
    // Assess
    expect(asNumber).toEqual({
      ms: stayMs + DROP_MARGIN_MS,
      why: "the main queue's maxReceiveCount 10: a refund failing transiently may stay in it up to 116 minutes",
    });
    expect(asString).toEqual(asNumber);
  });

  it.each([
    ['no redrive policy (the DLQ)', { VisibilityTimeout: '180' }, /has no redrive policy/],
    [
      'a policy that is not JSON',
      { RedrivePolicy: '{', VisibilityTimeout: '180' },
      /without a maxReceiveCount/,
    ],
    [
      'a policy without a count',
      { RedrivePolicy: policy(undefined), VisibilityTimeout: '180' },
      /without a maxReceiveCount/,
    ],
    ['no visibility timeout', { RedrivePolicy: policy(6) }, /visibility timeout/],
  ])('is unknown for a queue with %s', (_what, attributes, reason) => {
    // Act
    const floor = dropFloorOf(URL, attributes);
    // Assess
    expect(floor).toEqual({ unknown: expect.stringMatching(reason) });
    expect('unknown' in floor ? floor.unknown : '').toContain(URL);
  });
});

describe('dropReservation when the main queue cannot tell how long it retries', () => {
  it('drops nothing (exit 2), without looking in the DLQ', async () => {
    // Prepare: a reservation a day old
    const ledger = new MemoryLedger();
    await ledger.saveReservations({
      key: ledgerKey('0123456789abcdef01234567', '7101'),
      version: 0,
      refunds: [{ refundId: 'RF-lost', amount: 2_000, reservedAt: '2026-05-01T10:00:00.000Z' }],
    });
    let dlqAsked = false;
    // Act
    const result = await dropReservation(
      {
        ledger,
        floor: async () => ({ unknown: 'the main queue could not be read (timed out)' }),
        parked: async () => {
          dlqAsked = true;
          return {};
        },
      },
      {
        program: '0123456789abcdef01234567',
        externalId: '7101',
        refundId: 'RF-lost',
        confirmed: true,
        now: new Date('2026-05-02T10:00:00.000Z'),
      },
    );
    // Assess
    expect(result).toMatchObject({ kind: 'refused', exitCode: 2 });
    expect(result.kind === 'refused' ? result.message : '').toMatch(
      /^cannot tell how long the worker may still be retrying refund RF-lost: the main queue could not be read \(timed out\)\. Without that, nothing is dropped/,
    );
    expect(dlqAsked).toBe(false);
    expect(
      (await ledger.reservationsOf(ledgerKey('0123456789abcdef01234567', '7101')))?.refunds,
    ).toHaveLength(1);
  });
});

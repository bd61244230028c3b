import { describe, expect, it } from 'vitest';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';
import { holdUpdates, KEY, NOW, SOURCE, staleSendThenCrash, workersOf } from '../support/stale-send.ts';

/**
 * docs/exactly-once.md, rule 4: two refunds of one order applied side by side each send the target
 * their copy of the record implies, and one ledger write wins. The loser's stale target may reach
 * the platform after the winner's. A loser that dies right after that send (a Lambda timeout, a
 * crash) never reads the record again; SQS hands its message back after the visibility timeout, and
 * that delivery (or the order's next refund) must bring the platform to the ledger's target.
 */

/** A refund of order 1001 (50.00 EUR); the same event object is what SQS delivers again. */
const refund = (refundId: string, amount: number): ConnectorEvent => partialRefund('shop', refundId, amount);

const worker = workersOf(SOURCE, () => NOW);

/** A worker once the visibility timeout (3 minutes) has run out: SQS hands a dead worker's message out again. */
const later = (ledger: MemoryLedger, platform: MemoryPlatform) =>
  workersOf(SOURCE, () => NOW + 180_000)(ledger, platform, 'w-later');

/**
 * Order 1001 added at 50.00; then refund r1 (20.00) in a worker that dies right after its Update
 * conversion amount reached the platform, while refund r2 (10.00) ran beside it from start to end:
 * r2's worker read r1 pending, sent 20.00 and recorded both applied, and r1's stale 30.00 landed
 * after it. Answers the ledger, the platform and r1's message, which SQS will deliver again.
 */
async function refundCrash() {
  const ledger = new MemoryLedger(() => NOW);
  const platform = new MemoryPlatform();
  const live = worker(ledger, platform, 'w-live');
  expect((await processEvent(live, trackedOrder('shop'))).result).toBe('added');
  const r1 = refund('r1', 2_000);
  await staleSendThenCrash({ ledger, platform, worker }, r1);
  return { ledger, platform, live, r1 };
}

describe('a refund whose worker died after a stale Update conversion amount', () => {
  it('is left by the crash with the platform off the ledger (the state the next steps start from)', async () => {
    // Prepare, Act
    const { ledger, platform } = await refundCrash();

    // Assess: the ledger says 50.00 − 20.00 − 10.00, the platform holds r1's stale 30.00
    const record = await ledger.get(KEY);
    expect(record?.currentAmount).toBe(2_000);
    expect(Object.values(record?.refunds ?? {}).map((r) => [r.refundId, r.status])).toEqual([
      ['r1', 'applied'],
      ['r2', 'applied'],
    ]);
    expect(platform.amountOf('1001')).toBe(3_000);
  });

  it("brings the platform to the ledger's target when SQS delivers its message again", async () => {
    // Prepare
    const { ledger, platform, r1 } = await refundCrash();
    platform.calls.length = 0;

    // Act: the visibility timeout (3 minutes) passed; the same message again
    const outcome = await processEvent(later(ledger, platform), r1);

    // Assess: one absolute update to the ledger's 20.00, nothing subtracted twice
    const record = await ledger.get(KEY);
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 2_000 });
    expect(platform.calls).toEqual(['update 2000']);
    expect(platform.amountOf('1001')).toBe(2_000);
    expect(record?.currentAmount).toBe(2_000);
    expect(Object.values(record?.refunds ?? {}).map((r) => r.resultingAmount)).toEqual([2_000, 2_000]);
  });

  it('stays right when the order’s next refund comes before the redelivery, and the redelivery after it', async () => {
    // Prepare
    const { ledger, platform, live, r1 } = await refundCrash();

    // Act: refund r3 (5.00), then r1's message again after the visibility timeout (3 minutes)
    const next = await processEvent(live, refund('r3', 500));
    const again = await processEvent(later(ledger, platform), r1);

    // Assess: 50.00 − 20.00 − 10.00 − 5.00 on both sides
    const record = await ledger.get(KEY);
    expect(next).toMatchObject({ result: 'refund_applied', amount: 1_500 });
    expect(again).toMatchObject({ amount: 1_500 });
    expect(record?.currentAmount).toBe(1_500);
    expect(platform.amountOf('1001')).toBe(1_500);
  });

  it('is settled by the redelivery: a later duplicate of the refund sends nothing', async () => {
    // Prepare: the redelivery comes once the visibility timeout (3 minutes) has run out, when the
    // dead worker's calls are long over (a mark of a worker that may still be sending stays)
    const { ledger, platform, r1 } = await refundCrash();
    const again = later(ledger, platform);
    await processEvent(again, r1);
    platform.calls.length = 0;

    // Act
    const duplicate = await processEvent(again, r1);

    // Assess
    expect(duplicate.result).toBe('refund_duplicate');
    expect(platform.calls).toEqual([]);
    expect(platform.amountOf('1001')).toBe(2_000);
  });
});

describe('a refund applied without a crash', () => {
  it('costs no platform call when its message is delivered again', async () => {
    // Prepare: order 1001 at 50.00 and refund r1 applied by one worker
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    const live = worker(ledger, platform, 'w-live');
    await processEvent(live, trackedOrder('shop'));
    const r1 = refund('r1', 2_000);
    expect((await processEvent(live, r1)).result).toBe('refund_applied');
    platform.calls.length = 0;

    // Act
    const duplicate = await processEvent(live, r1);

    // Assess
    expect(duplicate.result).toBe('refund_duplicate');
    expect(platform.calls).toEqual([]);
    expect(platform.amountOf('1001')).toBe(3_000);
  });

  it('confirms its own send when a worker beside it recorded it applied, so a duplicate sends nothing', async () => {
    // Prepare: r1's Update conversion amount is held until r2's worker has recorded both applied
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    const live = worker(ledger, platform, 'w-live');
    await processEvent(live, trackedOrder('shop'));
    const held = holdUpdates(platform);
    const r1 = refund('r1', 2_000);
    const first = processEvent(worker(ledger, held.backend, 'w-slow'), r1);
    await held.sending;
    await processEvent(worker(ledger, platform, 'w-beside'), refund('r2', 1_000));
    held.land();

    // Act: r1's worker lives on, reads the record again and sends the ledger's target
    const outcome = await first;
    platform.calls.length = 0;
    const duplicate = await processEvent(live, r1);

    // Assess
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 2_000 });
    expect(platform.amountOf('1001')).toBe(2_000);
    expect(duplicate.result).toBe('refund_duplicate');
    expect(platform.calls).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { KillableLedger } from '../support/killable-ledger.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';
import { holdUpdates, KEY, NOW, SOURCE, workersOf } from '../support/stale-send.ts';

/**
 * A counterexample of test/integration/exactly-once-interleavings.test.ts, written down. Two
 * deliveries of one refund run side by side (docs/exactly-once.md, rule 4: a batch the event source
 * invoked late still runs when SQS hands its message out again). The second one must not take the
 * first one's unconfirmed send for its own: when the first one's stale target lands after the
 * order's next refund and its worker dies, the message's delivery again has to know, and put the
 * platform right.
 */

describe('two deliveries of one refund side by side', () => {
  it("leave the platform at the ledger's amount when the first one's stale send lands last and its worker dies", async () => {
    // Prepare: order 1001 at 50.00
    const clock = { now: NOW };
    const ledger = new MemoryLedger(() => clock.now);
    const platform = new MemoryPlatform();
    const worker = workersOf(SOURCE, () => clock.now);
    expect((await processEvent(worker(ledger, platform, 'w-order'), trackedOrder('shop'))).result).toBe(
      'added',
    );

    // Refund r2 (7.00): its first delivery records it, then its Update conversion amount (43.00) is
    // held in flight. Its delivery again beside it sends nothing while the first one's hold lasts,
    // then refund r1 (10.00) runs (33.00, r2 with it). The held 43.00 reaches the platform last; its
    // worker dies right after.
    const r2 = partialRefund('shop', 'r2', 700);
    const dying = new KillableLedger(ledger);
    const held = holdUpdates(platform);
    const first = processEvent(worker(dying, held.backend, 'w-first'), r2);
    await held.sending;
    await expect(processEvent(worker(ledger, platform, 'w-beside'), r2)).rejects.toMatchObject({
      name: 'TransientError',
      retryAfterMs: 60_000,
    });
    expect(
      await processEvent(worker(ledger, platform, 'w-r1'), partialRefund('shop', 'r1', 1_000)),
    ).toMatchObject({ result: 'refund_applied', amount: 3_300 });
    dying.kill();
    held.land();
    await expect(first).rejects.toThrow('worker killed');
    expect(platform.amountOf('1001')).toBe(4_300);

    // Act: the first worker's message, delivered again once its visibility timeout has run out
    clock.now += 180_000;
    await processEvent(worker(ledger, platform, 'w-again'), r2);

    // Assess: the platform at the ledger's 33.00, both refunds applied once, no mark left
    const record = await ledger.get(KEY);
    expect(record?.currentAmount).toBe(3_300);
    expect(platform.amountOf('1001')).toBe(3_300);
    expect(
      Object.values(record?.refunds ?? {}).map((r) => [r.refundId, r.status, r.unconfirmedSend]),
    ).toEqual([
      ['r2', 'applied', undefined],
      ['r1', 'applied', undefined],
    ]);
  });
});

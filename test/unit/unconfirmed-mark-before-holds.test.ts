import { describe, expect, it } from 'vitest';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';
import { KEY, NOW, SOURCE, workersOf } from '../support/stale-send.ts';

/**
 * Records written before the marks named their worker and its hold: `unconfirmedSend` alone, no
 * `unconfirmedBy` (docs/exactly-once.md, rule 4). Whoever left such a mark is long gone, so nothing
 * waits for it; a delivery treats it as it did: it sends the ledger's target again and clears it.
 */

const worker = workersOf(SOURCE, () => NOW);

/** Order 1001 at 50.00 with refund r1 (20.00) applied at 30.00, the platform at `platformAmount`. */
async function appliedRefund(platformAmount: number) {
  const ledger = new MemoryLedger(() => NOW);
  const platform = new MemoryPlatform();
  const live = worker(ledger, platform, 'w-live');
  expect((await processEvent(live, trackedOrder('shop'))).result).toBe('added');
  expect((await processEvent(live, partialRefund('shop', 'r1', 2_000))).result).toBe('refund_applied');
  await platform.updateAmount(SOURCE.program, platform.conversions.get('1001')?.id ?? '', platformAmount);
  platform.calls.length = 0;
  return { ledger, platform, live };
}

describe('a mark written before holds were kept (no unconfirmedBy)', () => {
  it("on an applied refund: its message's delivery sends the ledger's amount at once and clears it; a duplicate sends nothing", async () => {
    // Prepare: r1 marked as the worker before holds left it; the platform at a stale 40.00
    const { ledger, platform, live } = await appliedRefund(4_000);
    const record = await ledger.get(KEY);
    if (!record?.refunds['r1']) throw new Error('r1 is recorded');
    record.refunds['r1'].unconfirmedSend = true;
    expect(await ledger.update(record)).toBe(true);

    // Act
    const again = await processEvent(live, partialRefund('shop', 'r1', 2_000));
    const duplicate = await processEvent(
      worker(ledger, platform, 'w-other'),
      partialRefund('shop', 'r1', 2_000),
    );

    // Assess
    expect(again).toMatchObject({ result: 'refund_applied', amount: 3_000 });
    expect(platform.calls).toEqual(['update 3000']);
    expect(platform.amountOf('1001')).toBe(3_000);
    const after = await ledger.get(KEY);
    expect(after?.refunds['r1']?.unconfirmedSend).toBeUndefined();
    expect(after?.refunds['r1']?.unconfirmedBy).toBeUndefined();
    expect(duplicate.result).toBe('refund_duplicate');
  });

  it('on a pending refund: its delivery applies it at once and clears the mark', async () => {
    // Prepare: order 1001 at 50.00; r1 recorded pending and marked by a worker before holds
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    const live = worker(ledger, platform, 'w-live');
    await processEvent(live, trackedOrder('shop'));
    const record = await ledger.get(KEY);
    if (!record) throw new Error('order 1001 is recorded');
    record.refunds['r1'] = {
      refundId: 'r1',
      amount: 2_000,
      full: false,
      origin: 'shop',
      source: 'shop',
      currency: 'EUR',
      receivedAt: new Date(NOW).toISOString(),
      status: 'pending',
      unconfirmedSend: true,
    };
    expect(await ledger.update(record)).toBe(true);
    platform.calls.length = 0;

    // Act
    const outcome = await processEvent(worker(ledger, platform, 'w-new'), partialRefund('shop', 'r1', 2_000));

    // Assess
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 3_000 });
    expect(platform.calls).toEqual(['update 3000']);
    const after = await ledger.get(KEY);
    expect(after?.refunds['r1']).toMatchObject({ status: 'applied' });
    expect(after?.refunds['r1']?.unconfirmedSend).toBeUndefined();
    expect(after?.refunds['r1']?.unconfirmedBy).toBeUndefined();
  });

  it("on the record (the order's own message): its delivery sends the ledger's amount at once and clears it", async () => {
    // Prepare: the record marked as the order's worker before holds left it; the platform at 40.00
    const { ledger, platform } = await appliedRefund(4_000);
    const record = await ledger.get(KEY);
    if (!record) throw new Error('order 1001 is recorded');
    record.unconfirmedSend = true;
    expect(await ledger.update(record)).toBe(true);

    // Act
    const again = await processEvent(worker(ledger, platform, 'w-new'), trackedOrder('shop'));
    const duplicate = await processEvent(worker(ledger, platform, 'w-other'), trackedOrder('shop'));

    // Assess
    expect(again).toMatchObject({ amount: 3_000 });
    expect(platform.calls).toEqual(['update 3000']);
    expect(platform.amountOf('1001')).toBe(3_000);
    const after = await ledger.get(KEY);
    expect(after?.unconfirmedSend).toBeUndefined();
    expect(after?.unconfirmedBy).toBeUndefined();
    expect(duplicate.result).toBe('duplicate');
  });
});

import { describe, expect, it } from 'vitest';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { TransientError } from '../../shared/errors.ts';
import type { OrderRecord } from '../../shared/ledger.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';
import {
  holdUpdates,
  KEY,
  NOW,
  PROGRAM,
  SOURCE,
  staleSendThenCrash,
  workersOf,
} from '../support/stale-send.ts';

/**
 * docs/exactly-once.md, rule 4, for the ORDER's message: when it applies the refunds held for it (on
 * the conversion it adopted, or on its retry after that update failed) it sends the target its copy
 * of the record implies, as a refund's worker does. A refund of the same order recorded beside it
 * (a message queued in another group, or one SQS handed out again while a late-started invocation
 * still ran) sends its own, and one ledger write wins. Should the order's worker die right after a
 * stale send, the order's message comes back after the visibility timeout and must bring the
 * platform to the ledger's target, not answer duplicate.
 */

/** A refund of order 1001 (50.00 EUR). */
const refund = (refundId: string, amount: number): ConnectorEvent => partialRefund('shop', refundId, amount);

const worker = workersOf(SOURCE, () => NOW);

/** A worker `ms` after the crash: SQS hands a dead worker's message out again after its visibility timeout. */
const later = (ledger: MemoryLedger, platform: MemoryPlatform, ms: number) =>
  workersOf(SOURCE, () => NOW + ms)(ledger, platform, 'w-later');

/**
 * Refund r1 (20.00) came before order 1001 (50.00) and is held; the platform has the order already
 * (its pixel, at 50.00), so the order's add will be answered 409 and its worker adopt that
 * conversion. Answers what r1's delivery answered too.
 */
async function heldRefundAndPixel() {
  const ledger = new MemoryLedger(() => NOW);
  const platform = new MemoryPlatform();
  const live = worker(ledger, platform, 'w-live');
  const r1 = await processEvent(live, refund('r1', 2_000));
  platform.has('1001', 5_000);
  return { ledger, platform, live, r1 };
}

/**
 * Refund r1 (20.00) came before order 1001 (50.00) and was held; the platform had the order already
 * (its pixel, at 50.00), so the order's add was answered 409 and its worker adopted that conversion,
 * then died right after its stale Update conversion amount (see `staleSendThenCrash`).
 */
async function adoptionCrash() {
  const { ledger, platform, live, r1 } = await heldRefundAndPixel();
  expect(r1.result).toBe('refund_waiting');
  const order = trackedOrder('shop');
  await staleSendThenCrash({ ledger, platform, worker }, order);
  return { ledger, platform, live, order };
}

describe("an order's message that died after a stale send applying the refunds held for it", () => {
  it('is left by the crash with the platform off the ledger (the state the next steps start from)', async () => {
    // Prepare, Act
    const { ledger, platform } = await adoptionCrash();

    // Assess: the ledger says 50.00 − 20.00 − 10.00, the platform holds the order's stale 30.00
    const record = await ledger.get(KEY);
    expect(record).toMatchObject({ state: 'added', currentAmount: 2_000 });
    expect(Object.values(record?.refunds ?? {}).map((r) => [r.refundId, r.status])).toEqual([
      ['r1', 'applied'],
      ['r2', 'applied'],
    ]);
    expect(platform.amountOf('1001')).toBe(3_000);
  });

  it("after an adoption, brings the platform to the ledger's target when SQS delivers the order again", async () => {
    // Prepare
    const { ledger, platform, order } = await adoptionCrash();
    platform.calls.length = 0;

    // Act: the visibility timeout (3 minutes) passed; the same message again
    const outcome = await processEvent(later(ledger, platform, 180_000), order);

    // Assess: one absolute update to the ledger's 20.00, nothing subtracted twice, no add
    const record = await ledger.get(KEY);
    expect(outcome).toMatchObject({ amount: 2_000 });
    expect(platform.calls).toEqual(['update 2000']);
    expect(platform.amountOf('1001')).toBe(2_000);
    expect(record).toMatchObject({ state: 'added', currentAmount: 2_000 });
  });

  it('is settled by that delivery: a later duplicate of the order sends nothing', async () => {
    // Prepare: that delivery comes once the visibility timeout (3 minutes) has run out, when the
    // dead worker's calls are long over (a mark of a worker that may still be sending stays)
    const { ledger, platform, order } = await adoptionCrash();
    const again = later(ledger, platform, 180_000);
    await processEvent(again, order);
    platform.calls.length = 0;

    // Act
    const duplicate = await processEvent(again, order);

    // Assess
    expect(duplicate.result).toBe('duplicate');
    expect(platform.calls).toEqual([]);
    expect(platform.amountOf('1001')).toBe(2_000);
  });

  it("on the order's retry after the adoption's update failed, brings the platform to the ledger's target", async () => {
    // Prepare: r1 held; the adoption's Update conversion amount is answered 503, so the record is
    // added with r1 still pending and the order's message comes back, to another worker once the
    // first one's hold (its 60 s lease) is over; that retry dies after its stale send beside r2
    const { ledger, platform, live } = await heldRefundAndPixel();
    platform.updateFaults.push(new TransientError('conversions.update answered 503', { status: 503 }));
    const order = trackedOrder('shop');
    await expect(processEvent(live, order)).rejects.toThrow(/503/);
    expect((await ledger.get(KEY))?.refunds['r1']?.status).toBe('pending');
    await staleSendThenCrash({ ledger, platform, worker: workersOf(SOURCE, () => NOW + 60_000) }, order);
    expect(platform.amountOf('1001')).toBe(3_000);
    platform.calls.length = 0;

    // Act: the order's message once more, after the visibility timeout (3 minutes)
    await processEvent(later(ledger, platform, 240_000), order);

    // Assess
    expect(platform.calls).toEqual(['update 2000']);
    expect(platform.amountOf('1001')).toBe(2_000);
    expect((await ledger.get(KEY))?.currentAmount).toBe(2_000);
  });

  it('on the retry of an order whose record was written before the mark existed (added, a held refund pending)', async () => {
    // Prepare: the record as an earlier version left it after a failed update, no mark on it
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    platform.has('1001', 5_000);
    const earlier: OrderRecord = {
      key: KEY,
      program: PROGRAM,
      externalId: '1001',
      source: 'shop',
      state: 'added',
      version: 0,
      conversionId: platform.conversions.get('1001')?.id,
      originalAmount: 5_000,
      currentAmount: 5_000,
      currency: 'EUR',
      refunds: {
        r1: {
          refundId: 'r1',
          amount: 2_000,
          full: false,
          origin: 'shop',
          source: 'shop',
          currency: 'EUR',
          receivedAt: new Date(NOW).toISOString(),
          status: 'pending',
        },
      },
      createdAt: new Date(NOW).toISOString(),
      updatedAt: new Date(NOW).toISOString(),
    };
    await ledger.create(earlier);
    const order = trackedOrder('shop');
    await staleSendThenCrash({ ledger, platform, worker }, order);
    expect(platform.amountOf('1001')).toBe(3_000);
    platform.calls.length = 0;

    // Act: the order's message again, after the visibility timeout (3 minutes)
    await processEvent(later(ledger, platform, 180_000), order);

    // Assess
    expect(platform.calls).toEqual(['update 2000']);
    expect(platform.amountOf('1001')).toBe(2_000);
  });
});

describe("an order's message that applied the refunds held for it without a crash", () => {
  it('costs no platform call when it is delivered again', async () => {
    // Prepare: r1 held, the order adopts the pixel's conversion and lowers it to 30.00
    const { platform, live } = await heldRefundAndPixel();
    const order = trackedOrder('shop');
    expect(await processEvent(live, order)).toMatchObject({ amount: 3_000 });
    platform.calls.length = 0;

    // Act
    const duplicate = await processEvent(live, order);

    // Assess
    expect(duplicate.result).toBe('duplicate');
    expect(platform.calls).toEqual([]);
    expect(platform.amountOf('1001')).toBe(3_000);
  });

  it('confirms its own send when a refund beside it recorded the held one applied, so a duplicate sends nothing', async () => {
    // Prepare: the adoption's update is held until r2's worker has recorded both applied
    const { ledger, platform, live } = await heldRefundAndPixel();
    const held = holdUpdates(platform);
    const order = trackedOrder('shop');
    const first = processEvent(worker(ledger, held.backend, 'w-slow'), order);
    await held.sending;
    await processEvent(worker(ledger, platform, 'w-beside'), refund('r2', 1_000));
    held.land();

    // Act: the order's worker lives on, reads the record again and sends the ledger's target
    const outcome = await first;
    platform.calls.length = 0;
    const duplicate = await processEvent(live, order);

    // Assess
    expect(outcome).toMatchObject({ amount: 2_000 });
    expect(platform.amountOf('1001')).toBe(2_000);
    expect(duplicate.result).toBe('duplicate');
    expect(platform.calls).toEqual([]);
  });
});

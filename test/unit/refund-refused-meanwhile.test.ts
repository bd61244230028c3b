import { describe, expect, it } from 'vitest';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { TransientError } from '../../shared/errors.ts';
import type { ConversionBackend } from '../../shared/ports.ts';
import { type BatchDeps, processBatch, type RecordReport } from '../../shared/worker/batch.ts';
import { partialRefund, trackedOrder, workerEvent } from '../support/events.ts';
import { ModelPlatform } from '../support/interleavings.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { fifoRecord } from '../support/sqs-records.ts';
import { holdUpdates, KEY, NOW, PROGRAM, SOURCE } from '../support/stale-send.ts';

/**
 * Counterexamples of test/integration/exactly-once-interleavings.test.ts, written down: a platform
 * refusal that only says the conversion is refused already is no reason to park a refund's message.
 * Every fault in them is one a retry gets past (a lost answer, a 429), or no fault at all but two
 * messages of one order run side by side (docs/exactly-once.md, rule 4), yet each message was parked
 * in the DLQ as permanent, for an operator to replay.
 */

/** The platform as the sandbox keeps conversions (a second refusal, an update of a refused one: 422). */
function backendOf(
  platform: ModelPlatform,
  faults: { refuseLostAnswer?: number; findRateLimited?: number } = {},
): ConversionBackend {
  return {
    add: async (input) => platform.add(input),
    async find(_program, externalId) {
      if (faults.findRateLimited) {
        faults.findRateLimited -= 1;
        throw new TransientError('conversions.info answered 429: rate limited', { status: 429 });
      }
      return platform.find(externalId);
    },
    updateAmount: async (_program, id, amount) => platform.updateAmount(id, amount),
    async refuse(_program, id) {
      platform.refuse(id);
      if (faults.refuseLostAnswer) {
        faults.refuseLostAnswer -= 1;
        throw new TransientError('conversions.refuse: no answer in time', { ambiguous: true });
      }
    },
    accept: async () => {},
  };
}

/** A worker instance taking whole SQS batches, its parks and reports kept. */
function instance(ledger: MemoryLedger, backend: ConversionBackend, workerId: string) {
  const parked: string[] = [];
  const reports: RecordReport[] = [];
  const deps: BatchDeps = {
    ledger,
    sources: new Map([[SOURCE.id, SOURCE]]),
    backendFor: () => backend,
    now: () => NOW,
    workerId,
    leaseMs: 60_000,
    failures: {
      park: async (_message, failure) => {
        parked.push(`${failure.failureClass}: ${failure.reason}`);
      },
      delay: async () => {},
    },
    sleep: async () => {},
    random: () => 0.5,
  };
  return {
    parked,
    reports,
    /** Hands `event` over as receive `receiveCount` of its message; the report of how it ended. */
    async deliver(event: ConnectorEvent, receiveCount = 1): Promise<RecordReport | undefined> {
      // One message per event: SQS hands the same message out again
      const messageId = `m-${event.eventId}`;
      await processBatch(
        { ...deps, observe: (report) => reports.push(report) },
        [fifoRecord(event, { messageId, program: PROGRAM, sentAt: NOW, receiveCount })],
        NOW + 30_000,
      );
      return reports.filter((r) => r.messageId === messageId).at(-1);
    },
  };
}

const fullRefund = (): ConnectorEvent =>
  workerEvent('shop', {
    type: 'OrderRefunded',
    eventId: 'refund-rf',
    refundId: 'rf',
    full: true,
    currency: 'EUR',
  });

describe('a refusal the platform answers "already refused"', () => {
  it('is retried, not parked, when the lookup that checks it is rate limited', async () => {
    // Prepare: order 1001 at 50.00; its full refund's Conversion refuse went through, its answer lost
    const ledger = new MemoryLedger(() => NOW);
    const platform = new ModelPlatform({ duplicates: 'reject', bareAdds: false });
    const faults = { refuseLostAnswer: 1, findRateLimited: 0 };
    const worker = instance(ledger, backendOf(platform, faults), 'w1');
    expect((await worker.deliver(trackedOrder('shop')))?.outcome?.result).toBe('added');
    expect(await worker.deliver(fullRefund())).toMatchObject({ status: 'retry' });
    faults.findRateLimited = 1;

    // Act: SQS delivers it again; the refusal is answered 422, the Conversion info checking it 429
    const again = await worker.deliver(fullRefund(), 2);

    // Assess: refused on the platform and in the ledger, the message done, nothing in the DLQ
    expect(worker.parked).toEqual([]);
    expect(again).toMatchObject({ status: 'done', outcome: { result: 'refused' } });
    expect(platform.of('1001').map((c) => c.status)).toEqual(['refused']);
    const record = await ledger.get(KEY);
    expect(record?.state).toBe('refused');
    expect(record?.refunds['rf']).toMatchObject({ status: 'applied' });
    expect(record?.refunds['rf']?.unconfirmedSend).toBeUndefined();
  });
});

describe('a refund whose Update conversion amount meets a conversion refused meanwhile', () => {
  it('is done, not parked, when a refund of the same order beside it refused the conversion', async () => {
    // Prepare: order 1001 at 10.00. Refund r1 (8.00) in one worker, its Update conversion amount
    // (to 2.00) held in flight while refund r2 (16.00) runs beside it from start to end: r2 reads r1
    // recorded, the two pass the order's amount, so r2 refuses the conversion and records both.
    const ledger = new MemoryLedger(() => NOW);
    const platform = new ModelPlatform({ duplicates: 'reject', bareAdds: false });
    const backend = backendOf(platform);
    const order = workerEvent('shop', { ...trackedOrder('shop'), type: 'OrderPlaced', amount: 1_000 });
    const w2 = instance(ledger, backend, 'w2');
    expect((await w2.deliver(order))?.outcome?.result).toBe('added');
    const held = holdUpdates(backend);
    const w1 = instance(ledger, held.backend, 'w1');
    const first = w1.deliver(partialRefund('shop', 'r1', 800));
    await held.sending;
    expect(await w2.deliver(partialRefund('shop', 'r2', 1_600))).toMatchObject({
      status: 'done',
      outcome: { result: 'refused' },
    });

    // Act: r1's update reaches the platform, which answers 422 (the conversion is refused)
    held.land();
    const report = await first;

    // Assess: r1 is done as applied by the worker beside it; nothing parked
    expect(w1.parked).toEqual([]);
    expect(report).toMatchObject({ status: 'done', outcome: { result: 'refused' } });
    const record = await ledger.get(KEY);
    expect(record?.state).toBe('refused');
    expect(record?.refunds['r1']).toMatchObject({ status: 'applied' });
    expect(record?.refunds['r1']?.unconfirmedSend).toBeUndefined();
    expect(platform.of('1001').map((c) => c.status)).toEqual(['refused']);
  });

  it('is done, not parked, when its delivery again sends the ledger amount after a cancellation beside it', async () => {
    // Prepare: order 1001 at 50.00 with refund r1 (10.00) applied at 40.00, its own worker's send
    // unconfirmed (it died after its call). SQS delivers r1 again: its send of the ledger's 40.00 is
    // held in flight while the order's cancellation runs beside it and refuses the conversion.
    const ledger = new MemoryLedger(() => NOW);
    const platform = new ModelPlatform({ duplicates: 'reject', bareAdds: false });
    const backend = backendOf(platform);
    const w2 = instance(ledger, backend, 'w2');
    expect((await w2.deliver(trackedOrder('shop')))?.outcome?.result).toBe('added');
    expect((await w2.deliver(partialRefund('shop', 'r1', 1_000)))?.outcome?.result).toBe('refund_applied');
    const record = await ledger.get(KEY);
    if (!record?.refunds['r1']) throw new Error('r1 is recorded');
    record.refunds['r1'].unconfirmedSend = true;
    expect(await ledger.update(record)).toBe(true);
    const held = holdUpdates(backend);
    const w1 = instance(ledger, held.backend, 'w1');
    const again = w1.deliver(partialRefund('shop', 'r1', 1_000), 2);
    await held.sending;
    const cancelled = workerEvent('shop', { type: 'OrderCancelled', reason: 'changed their mind' });
    expect(await w2.deliver(cancelled)).toMatchObject({ status: 'done', outcome: { result: 'refused' } });

    // Act: r1's send again reaches the platform, which answers 422 (the conversion is refused)
    held.land();
    const report = await again;

    // Assess: r1's delivery is done, its mark cleared; nothing parked
    expect(w1.parked).toEqual([]);
    expect(report).toMatchObject({ status: 'done', outcome: { result: 'refused' } });
    const after = await ledger.get(KEY);
    expect(after?.state).toBe('refused');
    expect(after?.refunds['r1']?.unconfirmedSend).toBeUndefined();
    expect(platform.of('1001').map((c) => c.status)).toEqual(['refused']);
  });
});

import { describe, expect, it } from 'vitest';
import { runAccept } from '../../shared/accept/job.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { ConversionBackend } from '../../shared/ports.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { acceptDeps, acceptingShop } from '../support/accept-deps.ts';
import { trackedOrder, workerEvent } from '../support/events.ts';
import { ModelPlatform, modelBackend } from '../support/interleavings.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { workersOf } from '../support/stale-send.ts';

/**
 * A counterexample of test/integration/exactly-once-interleavings.test.ts, written down: the accept
 * job took its lease on an order past its return window, and before its accept call reached the
 * platform the shop's full refund (or cancellation) came, was recorded and refused the conversion
 * (the worker did not wait for the job). The platform answered the accept 422 (refused), the job
 * looked the conversion up, found it refused and parked a ConversionAccept message as permanent,
 * telling an operator to check whether it was refused by hand and to accept it there if it should
 * be, and gave up on the order (`acceptError`): a DLQ alarm for the connector's own refusal, and a
 * prompt to accept a conversion refunded in full. The refund now waits for the accept in flight, then
 * refuses the accepted conversion (the platform refuses an accepted one until it locks).
 */

const PROGRAM = '5ad000000000000000000101';
/** Two months after order 1001 (2026-05-01): its 30-day return window is long over. */
const NOW = Date.parse('2026-07-01T10:00:00.000Z');
const KEY = ledgerKey(PROGRAM, '1001');
const SOURCE = acceptingShop(PROGRAM);

const fullRefund = workerEvent('shop', {
  type: 'OrderRefunded',
  refundId: 'rf',
  full: true,
  currency: 'EUR',
});
const cancellation = workerEvent('shop', { type: 'OrderCancelled', reason: 'changed their mind' });

/** The platform, whose accept calls reach it once `meanwhile` has run. */
function acceptLandsAfter(platform: ModelPlatform, meanwhile: () => Promise<unknown>): ConversionBackend {
  const backend = modelBackend(platform);
  return {
    ...backend,
    accept: async (program, id, call) => {
      await meanwhile();
      return backend.accept(program, id, call);
    },
  };
}

/** What a delivery came to: its outcome's result, or the error's message (its message given back). */
const settled = (delivery: Promise<{ readonly result: string }>) =>
  delivery.then(
    (outcome) => outcome.result,
    (error: Error) => error.message,
  );

describe.each([
  ['a full refund', fullRefund],
  ['a cancellation', cancellation],
] as [string, ConnectorEvent][])(
  '%s refusing the conversion while the accept job accepts it',
  (_, refund) => {
    it('parks nothing: the refund waits for the accept, then refuses the accepted conversion', async () => {
      // Prepare: order 1001 added, due for accept
      let now = NOW;
      const ledger = new MemoryLedger(() => now);
      const platform = new ModelPlatform({ duplicates: 'reject', bareAdds: false });
      const worker = workersOf(SOURCE, () => now)(ledger, modelBackend(platform), 'w1');
      expect((await processEvent(worker, trackedOrder('shop'))).result).toBe('added');
      let first: string | undefined;
      const backend = acceptLandsAfter(platform, async () => {
        first = await settled(processEvent(worker, refund));
      });

      // Act: the job runs, the refund's first delivery beside its accept call; then the refund's
      // message comes back (SQS, after the wait it was given)
      const { deps, parked } = acceptDeps(ledger, backend, SOURCE, () => now);
      const summary = await runAccept(deps, { limit: 10 });
      now += 5 * 60_000;
      const again = await settled(processEvent(worker, refund));

      // Assess
      expect(parked.map((p) => p.reason)).toEqual([]);
      expect(summary).toMatchObject({ accepted: 1, failed: 0 });
      expect(first).toMatch(/accept job is accepting/);
      expect(again).toBe('refused');
      const record = await ledger.get(KEY);
      expect(record).toMatchObject({ state: 'refused' });
      expect(record?.acceptError).toBeUndefined();
      expect(record?.acceptLeaseUntil).toBeUndefined();
      expect(platform.of('1001')).toMatchObject([{ status: 'refused' }]);
    });
  },
);

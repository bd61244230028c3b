import { describe, expect, it } from 'vitest';
import { settleByHand } from '../../cli/dlq-discard.ts';
import { runAccept } from '../../shared/accept/job.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { TransientError } from '../../shared/errors.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { CANCELLATION_REFUND_ID } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { acceptDeps, acceptingShop } from '../support/accept-deps.ts';
import { trackedOrder, workerEvent } from '../support/events.ts';
import { ModelPlatform, modelBackend } from '../support/interleavings.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { workersOf } from '../support/stale-send.ts';

/**
 * A counterexample of test/integration/exactly-once-interleavings.test.ts, written down: a full
 * refund (or the cancellation) whose message reached the DLQ (the platform answering 429 on its every
 * receive), settled by hand as its runbook entry says (the conversion refused on the platform, then
 * `connector dlq discard`). The ledger recorded the refund `manual` and kept the order `added`, so
 * the accept job, its return window passed, tried to accept a refused conversion: the platform
 * answered 422, and the job parked a ConversionAccept message for an operator who had done
 * everything asked, and gave up on the order (`acceptError`); `status` and `reconcile` called the
 * ledger and the platform different.
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

describe.each([
  ['a full refund', fullRefund, 'rf'],
  ['a cancellation', cancellation, CANCELLATION_REFUND_ID],
] as [string, ConnectorEvent, string][])(
  '%s settled by hand and discarded from the DLQ',
  (_, refund, refundId) => {
    it('leaves the order refused in the ledger, as on the platform: the accept job neither accepts nor parks it', async () => {
      // Prepare: order 1001 added; the refusal answered 429 on the message's every receive (parked)
      const ledger = new MemoryLedger(() => NOW);
      const platform = new ModelPlatform({ duplicates: 'reject', bareAdds: false });
      const refuse429 = [
        new TransientError('conversions.refuse answered 429: rate limited', { status: 429 }),
      ];
      const worker = workersOf(SOURCE, () => NOW)(
        ledger,
        modelBackend(platform, { refuse: refuse429 }),
        'w1',
      );
      expect((await processEvent(worker, trackedOrder('shop'))).result).toBe('added');
      await expect(processEvent(worker, refund)).rejects.toThrow(/429/);
      const [conversion] = platform.of('1001');

      // Act: the operator refuses the conversion on the platform, discards the message, the job runs
      platform.refuse(conversion?.id ?? '');
      const settled = await settleByHand(ledger, { key: KEY, refundId }, new Date(NOW));
      const { deps, parked } = acceptDeps(ledger, modelBackend(platform), SOURCE, () => NOW);
      const summary = await runAccept(deps, { limit: 10 });

      // Assess
      expect(settled).toMatchObject({ kind: 'settled', refund: { refundId, status: 'manual' } });
      expect(parked.map((p) => p.reason)).toEqual([]);
      expect(summary.items).toEqual([]);
      const record = await ledger.get(KEY);
      expect(record).toMatchObject({ state: 'refused' });
      expect(record?.acceptError).toBeUndefined();
      expect(platform.of('1001')).toMatchObject([{ status: 'refused' }]);
    });
  },
);

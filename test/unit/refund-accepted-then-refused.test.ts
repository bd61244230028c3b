import { describe, expect, it } from 'vitest';
import { runAccept } from '../../shared/accept/job.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { failureClassOf } from '../../shared/errors.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { ConversionBackend } from '../../shared/ports.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { acceptDeps, acceptingShop } from '../support/accept-deps.ts';
import { partialRefund, trackedOrder, workerEvent } from '../support/events.ts';
import { ModelPlatform, modelBackend } from '../support/interleavings.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { workersOf } from '../support/stale-send.ts';

/**
 * A counterexample of test/integration/exactly-once-interleavings.test.ts, written down: order 1001
 * accepted after its return window; partial refund r1 came, was recorded, and its update answered
 * 422 (the conversion is accepted). The worker read the record again (unchanged), then looked the
 * conversion up to tell a late refund: meanwhile the shop's full refund (or the cancellation) had
 * been recorded and had refused the accepted conversion beside it. Refused is neither locked nor
 * accepted, so the 422 was thrown as it was and r1's message parked as permanent, for an operator to
 * replay a refund the full refund had already settled. As for a conversion refused meanwhile before
 * the 422 was read again (`refund-refused-meanwhile`), the record says what happened: r1 counted in
 * the refusal, nothing parked.
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
  ['a full refund', fullRefund],
  ['a cancellation', cancellation],
] as [string, ConnectorEvent][])(
  'a partial refund of an accepted conversion that %s refuses meanwhile',
  (_, refusing) => {
    it('is counted in the refusal, its message not parked', async () => {
      // Prepare: order 1001 added and accepted
      const ledger = new MemoryLedger(() => NOW);
      const platform = new ModelPlatform({ duplicates: 'reject', bareAdds: false });
      const worker = workersOf(SOURCE, () => NOW);
      expect(
        (await processEvent(worker(ledger, modelBackend(platform), 'w1'), trackedOrder('shop'))).result,
      ).toBe('added');
      const { deps } = acceptDeps(ledger, modelBackend(platform), SOURCE, () => NOW);
      expect(await runAccept(deps, { limit: 10 })).toMatchObject({ accepted: 1 });
      // r1's worker: its look-up after the 422 comes once the refusing refund has run to its end
      let beside: unknown;
      const lookingUpLate: ConversionBackend = {
        ...modelBackend(platform),
        async find(program, externalId, call) {
          beside ??= await processEvent(worker(ledger, modelBackend(platform), 'w3'), refusing);
          return modelBackend(platform).find(program, externalId, call);
        },
      };

      // Act
      const outcome = await processEvent(
        worker(ledger, lookingUpLate, 'w2'),
        partialRefund('shop', 'r1', 2_000),
      ).then(
        (o) => o,
        (error: unknown) => ({ failureClass: failureClassOf(error), message: (error as Error).message }),
      );

      // Assess
      expect(beside).toMatchObject({ result: 'refused' });
      expect(outcome).toMatchObject({ result: 'refused' });
      expect(platform.of('1001')).toMatchObject([{ status: 'refused' }]);
      const record = await ledger.get(KEY);
      expect(record).toMatchObject({ state: 'refused' });
      expect(record?.refunds['r1']?.status).toBe('applied');
    });
  },
);

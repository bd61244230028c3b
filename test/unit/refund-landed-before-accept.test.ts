import { describe, expect, it } from 'vitest';
import { lateRefunds } from '../../cli/late-refunds.ts';
import { runAccept } from '../../shared/accept/job.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { ConversionBackend } from '../../shared/ports.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { acceptDeps, acceptingShop } from '../support/accept-deps.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { ModelPlatform, modelBackend } from '../support/interleavings.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { workersOf } from '../support/stale-send.ts';

/**
 * A counterexample of test/integration/exactly-once-interleavings.test.ts, written down: the accept
 * job took its lease on order 1001 (50.00, past its return window); refund r1 (31.00) was recorded
 * next (the worker did not wait for the job) and its Update conversion amount, 19.00, reached the
 * platform before the accept did. The conversion was accepted at 19.00, r1 in it. The job's write of
 * the accept then came before the worker's confirming write, which lost; the worker read the record
 * again, sent 19.00 again, got the platform's 422 for an accepted conversion, and recorded r1 late,
 * for finance to take its commission back by hand: r1 counted twice, once in the amount accepted and
 * once in `connector late-refunds`, and the ledger left at 50.00 while the platform shows 19.00.
 */

const PROGRAM = '5ad000000000000000000101';
/** Two months after order 1001 (2026-05-01): its 30-day return window is long over. */
const NOW = Date.parse('2026-07-01T10:00:00.000Z');
const KEY = ledgerKey(PROGRAM, '1001');
const SOURCE = acceptingShop(PROGRAM);

describe('a partial refund coming while the accept job accepts its conversion', () => {
  it('waits for the accept, then is recorded late at the amount accepted and counted once', async () => {
    // Prepare: order 1001 added. The accept call goes once r1's first delivery has sent its update
    // (or has given its message back); that delivery waits, between its update and its confirming
    // write, for the job to end.
    let now = NOW;
    const ledger = new MemoryLedger(() => now);
    const platform = new ModelPlatform({ duplicates: 'reject', bareAdds: false });
    const worker = workersOf(SOURCE, () => now);
    const r1 = partialRefund('shop', 'r1', 3_100);
    expect(
      (await processEvent(worker(ledger, modelBackend(platform), 'w1'), trackedOrder('shop'))).result,
    ).toBe('added');
    const sent = Promise.withResolvers<void>();
    const jobDone = Promise.withResolvers<void>();
    const refundBackend: ConversionBackend = {
      ...modelBackend(platform),
      async updateAmount(_program, id, amount) {
        platform.updateAmount(id, amount);
        sent.resolve();
        await jobDone.promise;
      },
    };
    let first: Promise<string> | undefined;
    const jobBackend: ConversionBackend = {
      ...modelBackend(platform),
      async accept(_program, id) {
        first = processEvent(worker(ledger, refundBackend, 'w2'), r1).then(
          (outcome) => outcome.result,
          (error: Error) => error.message,
        );
        await Promise.race([sent.promise, first]);
        platform.accept(id);
      },
    };

    // Act: the job runs; then r1's message comes back (SQS, after the wait it was given)
    const { deps, parked } = acceptDeps(ledger, jobBackend, SOURCE, () => now);
    const summary = await runAccept(deps, { limit: 10 });
    jobDone.resolve();
    const firstOutcome = await first;
    now += 5 * 60_000;
    // A late refund is thrown (`LateRefundError`): its message is done, never retried
    const again = await processEvent(worker(ledger, modelBackend(platform), 'w3'), r1).then(
      (outcome) => outcome.result,
      (error: Error) => error.message,
    );

    // Assess
    expect(summary).toMatchObject({ accepted: 1 });
    expect(parked).toEqual([]);
    expect(platform.of('1001')).toMatchObject([{ status: 'accepted', amount: 5_000 }]);
    const record = await ledger.get(KEY);
    expect(lateRefunds(record ? [record] : [])).toMatchObject([
      { refundId: 'r1', refundAmount: 3_100, conversionAmount: 5_000, because: 'accepted' },
    ]);
    expect(record).toMatchObject({ state: 'added', currentAmount: 5_000 });
    expect(record?.acceptedAt).toBeDefined();
    expect(firstOutcome).toMatch(/accept job is accepting/);
    expect(again).toMatch(/late refund r1/);
  });
});

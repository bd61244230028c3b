import { describe, expect, it } from 'vitest';
import { settleByHand } from '../../cli/dlq-discard.ts';
import { TransientError } from '../../shared/errors.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { ModelPlatform, modelBackend } from '../support/interleavings.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { holdUpdates, SOURCE, workersOf } from '../support/stale-send.ts';

/**
 * A counterexample of test/integration/exactly-once-interleavings.test.ts, written down: refund r1's
 * message reached the DLQ (429 on its every receive), r1 pending in the ledger. Another delivery of
 * r1 (the shop's resend, or finance's refund of the same id) was sending the ledger's target when an
 * operator set the same amount on the platform by hand and discarded the parked message, which
 * records r1 settled by hand (`manual`) and leaves the ledger's `currentAmount` at what the
 * connector last set, 50.00. That delivery's write then lost to the operator's, it read the record
 * again, took 50.00 for where the ledger says the platform is and sent it: the operator's refund
 * undone on the platform, the ledger calling it settled, the accept job then accepting 50.00.
 */

const KEY = ledgerKey(SOURCE.program, '1001');
const NOW = Date.parse('2026-05-01T10:00:00.000Z');

describe('a refund settled by hand while another delivery of it is sending', () => {
  it('stays settled on the platform: that delivery does not send the amount from before it', async () => {
    // Prepare: order 1001 (50.00) added; r1 (20.00) recorded, its sends answered 429 (parked)
    let now = NOW;
    const ledger = new MemoryLedger(() => now);
    const platform = new ModelPlatform({ duplicates: 'reject', bareAdds: false });
    const worker = workersOf(SOURCE, () => now);
    const r1 = partialRefund('shop', 'r1', 2_000);
    expect(
      (await processEvent(worker(ledger, modelBackend(platform), 'w1'), trackedOrder('shop'))).result,
    ).toBe('added');
    const rateLimited = () => [new TransientError('answered 429: rate limited', { status: 429 })];
    const throttled = modelBackend(platform, { update: rateLimited(), find: rateLimited() });
    await expect(processEvent(worker(ledger, throttled, 'w2'), r1)).rejects.toThrow(/429/);
    now += 3 * 60_000;

    // Act: another delivery of r1 sends 30.00; while it is in flight the operator sets 30.00 by hand
    // and discards the parked message; then it lands
    const held = holdUpdates(modelBackend(platform));
    const again = processEvent(worker(ledger, held.backend, 'w3'), r1);
    await held.sending;
    const [conversion] = platform.of('1001');
    platform.updateAmount(conversion?.id ?? '', 3_000);
    const settled = await settleByHand(ledger, { key: KEY, refundId: 'r1' }, new Date(now));
    held.land();
    await again;

    // Assess
    expect(settled).toMatchObject({ kind: 'settled', refund: { status: 'manual' } });
    expect(platform.of('1001')).toMatchObject([{ status: 'pending', amount: 3_000 }]);
    expect((await ledger.get(KEY))?.refunds['r1']).toMatchObject({ status: 'manual' });
  });
});

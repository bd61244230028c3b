import { describe, expect, it } from 'vitest';
import { settleByHand } from '../../cli/dlq-discard.ts';
import { runAccept } from '../../shared/accept/job.ts';
import { PermanentError, TransientError } from '../../shared/errors.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { acceptDeps, acceptingShop } from '../support/accept-deps.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';
import { workersOf } from '../support/stale-send.ts';

/**
 * docs/exactly-once.md, rules 4 and 7: a refund's mark (`unconfirmedSend`) is kept when another
 * worker records that refund applied, and only a delivery of its own message (or the accept job,
 * seeing the platform at the ledger's amount) clears it. With no crash at all, a refund whose message
 * went to the DLQ after its sends failed (429 until the 6th receive) leaves its mark there while the
 * order's next refund applies it. What an operator does next (settle another refund by hand, accept
 * the conversion by hand) must not turn the mark into a wrong amount or a message parked for ever.
 */

const PROGRAM = '5ad000000000000000000101';
const NOW = Date.parse('2026-11-23T12:00:00.000Z');
const DAY = 86_400_000;
const KEY = ledgerKey(PROGRAM, '1001');
const SOURCE = acceptingShop(PROGRAM);

const r1 = partialRefund('shop', 'r1', 2_000);

/**
 * Order 1001 (50.00 EUR, its return window long over at `now`); refund r1 (20.00) answered 429 on
 * every receive until its message was redriven to the DLQ; refund r2 (10.00) then applied both: the
 * platform and the ledger at 20.00, r1 applied and still marked.
 */
async function refundParkedThenApplied() {
  let now = NOW - 40 * DAY;
  const ledger = new MemoryLedger(() => now);
  const platform = new MemoryPlatform();
  const worker = workersOf(SOURCE, () => now)(ledger, platform, 'w-live');
  expect((await processEvent(worker, trackedOrder('shop'))).result).toBe('added');
  platform.updateFaults.push(new TransientError('conversions.update answered 429', { status: 429 }));
  await expect(processEvent(worker, r1)).rejects.toThrow(/429/);
  expect(await processEvent(worker, partialRefund('shop', 'r2', 1_000))).toMatchObject({
    result: 'refund_applied',
    amount: 2_000,
  });
  expect((await ledger.get(KEY))?.refunds['r1']).toMatchObject({ status: 'applied', unconfirmedSend: true });
  expect(platform.amountOf('1001')).toBe(2_000);
  const later = (ms: number) => {
    now = ms;
  };
  return { ledger, platform, worker, later };
}

/**
 * Then refund r3 (5.00) was refused by the platform for good (422), parked, settled by hand on the
 * platform (the amount set to 15.00 there) and its message discarded (`connector dlq discard`).
 */
async function thenSettledByHand() {
  const scene = await refundParkedThenApplied();
  const { ledger, platform, worker } = scene;
  platform.updateFaults.push(new PermanentError('conversions.update answered 422', { status: 422 }));
  await expect(processEvent(worker, partialRefund('shop', 'r3', 500))).rejects.toThrow(/422/);
  const id = platform.conversions.get('1001')?.id ?? '';
  await platform.updateAmount(PROGRAM, id, 1_500);
  expect(await settleByHand(ledger, { key: KEY, refundId: 'r3' }, new Date(NOW - 39 * DAY))).toMatchObject({
    kind: 'settled',
  });
  platform.calls.length = 0;
  return scene;
}

describe('a refund settled by hand after another refund’s send was left unconfirmed', () => {
  it('is not undone when that other refund’s message is replayed from the DLQ', async () => {
    // Prepare
    const { platform, worker } = await thenSettledByHand();

    // Act: the operator replays r1 (its 429s are over)
    const replay = await processEvent(worker, r1);

    // Assess: the operator's 15.00 stands; nothing sent
    expect(platform.amountOf('1001')).toBe(1_500);
    expect(platform.calls).toEqual([]);
    expect(replay.result).toBe('refund_duplicate');
  });

  it('does not hold the conversion’s accept for ever', async () => {
    // Prepare
    const { ledger, platform, later } = await thenSettledByHand();
    later(NOW);
    const { deps } = acceptDeps(ledger, platform, SOURCE, () => NOW);

    // Act
    const run = await runAccept(deps, { limit: 10 });

    // Assess: accepted at the amount settled by hand, no lookup needed
    expect(run).toMatchObject({ accepted: 1, held: 0 });
    expect(platform.conversions.get('1001')).toMatchObject({ status: 'accepted', amount: 1_500 });
    expect(platform.calls.filter((c) => c.startsWith('find'))).toEqual([]);
  });
});

describe('a refund whose mark was kept, replayed once its conversion no longer changes', () => {
  it('is not parked again when the conversion was accepted on the platform at the ledger’s amount', async () => {
    // Prepare: the advertiser accepted the conversion by hand at 20.00; an update is refused now
    const { ledger, platform, worker } = await refundParkedThenApplied();
    const conversion = platform.conversions.get('1001');
    if (conversion) platform.conversions.set('1001', { ...conversion, status: 'accepted' });
    platform.updateFaults.push(
      new PermanentError('conversions.update answered 422: only a pending conversion can change', {
        status: 422,
      }),
    );
    platform.calls.length = 0;

    // Act
    const replay = await processEvent(worker, r1);
    const again = await processEvent(worker, r1);

    // Assess: done, the mark confirmed (the platform shows the ledger's amount); a later delivery sends nothing
    expect(replay).toMatchObject({ result: 'refund_applied', amount: 2_000 });
    expect(again.result).toBe('refund_duplicate');
    expect(platform.calls.filter((c) => c.startsWith('update'))).toHaveLength(1);
    expect((await ledger.get(KEY))?.refunds['r1']?.unconfirmedSend).toBeUndefined();
  });

  it('is parked once, naming both amounts, when the conversion locked at another amount; a later delivery sends nothing', async () => {
    // Prepare: the platform shows 30.00 (what r1's worker may have sent last) and has locked it
    const { ledger, platform, worker } = await refundParkedThenApplied();
    const conversion = platform.conversions.get('1001');
    if (conversion) platform.conversions.set('1001', { ...conversion, amount: 3_000, isLocked: true });
    platform.updateFaults.push(
      new PermanentError('conversions.update answered 422: the conversion is locked', { status: 422 }),
    );
    platform.calls.length = 0;

    // Act
    const replay = processEvent(worker, r1);

    // Assess
    await expect(replay).rejects.toThrow(/locked.*EUR 30\.00.*EUR 20\.00/);
    platform.calls.length = 0;
    expect((await processEvent(worker, r1)).result).toBe('refund_duplicate');
    expect(platform.calls).toEqual([]);
    expect((await ledger.get(KEY))?.refunds['r1']?.unconfirmedSend).toBeUndefined();
  });
});

describe('the accept job’s lookup of an order whose send was left unconfirmed', () => {
  it('parks it on that lookup when the platform has no conversion, without calling accept or looking again', async () => {
    // Prepare: r1 still marked; the conversion was removed on the platform meanwhile
    const { ledger, platform } = await refundParkedThenApplied();
    platform.conversions.delete('1001');
    platform.calls.length = 0;
    const { deps, parked } = acceptDeps(ledger, platform, SOURCE, () => NOW);

    // Act
    const run = await runAccept(deps, { limit: 10 });

    // Assess: one Conversion info, and the reason it gives
    expect(platform.calls).toEqual(['find 1001']);
    expect(run.items).toMatchObject([{ result: 'failed' }]);
    expect(parked).toMatchObject([{ reason: expect.stringMatching(/no conversion with externalId 1001/) }]);
  });
});

import { describe, expect, it } from 'vitest';
import { runAccept } from '../../shared/accept/job.ts';
import type { RefundRecord } from '../../shared/ledger.ts';
import { acceptDeps, acceptingShop } from '../support/accept-deps.ts';
import { dueRecord } from '../support/due-record.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';

/**
 * The accept job's `limit` bounds the platform calls of a run (the stack's `accept.maxPerRun`, sized
 * for the function's 5 minutes). An order whose last send is unconfirmed is looked up on the
 * platform before it is accepted; when the platform shows another amount than the ledger it stays
 * held. That lookup is a platform call like any other and counts towards the limit.
 */

const PROGRAM = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const NOW = Date.parse('2026-11-23T12:00:00.000Z');

/** Refund r1 of an order, applied a day ago by another worker than its own: its send unconfirmed. */
function unconfirmedRefund(): RefundRecord {
  const at = new Date(NOW - 86_400_000).toISOString();
  return {
    refundId: 'r1',
    amount: 2_000,
    full: false,
    origin: 'shop',
    source: 'shop',
    currency: 'EUR',
    receivedAt: at,
    status: 'applied',
    appliedAt: at,
    resultingAmount: 3_000,
    unconfirmedSend: true,
  };
}

describe('the accept job’s limit', () => {
  it('counts the lookups of orders it then holds, so a run makes no more platform calls than its limit', async () => {
    // Prepare: three orders due, each with an unconfirmed send and the platform showing a stale amount
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    for (const id of ['1001', '1002', '1003']) {
      await ledger.create(
        dueRecord(PROGRAM, id, NOW, 40, {
          originalAmount: 5_000,
          currentAmount: 3_000,
          currency: 'EUR',
          refunds: { r1: unconfirmedRefund() },
        }),
      );
      platform.has(id, 5_000);
    }
    const { deps } = acceptDeps(ledger, platform, acceptingShop(PROGRAM), () => NOW);

    // Act
    const run = await runAccept(deps, { limit: 2 });

    // Assess: two lookups, the third order left for the next run
    expect(platform.calls).toEqual(['find 1001', 'find 1002']);
    expect(run.held).toBe(2);
    expect(run.dueLeft).toBe(3);
  });
});

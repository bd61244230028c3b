import { describe, expect, it } from 'vitest';
import { runAccept } from '../../shared/accept/job.ts';
import { TransientError } from '../../shared/errors.ts';
import { ledgerKey, type OrderRecord, type RefundRecord } from '../../shared/ledger.ts';
import type { ConversionBackend, PlatformConversion } from '../../shared/ports.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { acceptDeps, acceptingShop } from '../support/accept-deps.ts';
import { dueRecord } from '../support/due-record.ts';
import { partialRefund } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { workersOf } from '../support/stale-send.ts';

/**
 * The accept job and a send left unconfirmed (`unconfirmedSend`, docs/exactly-once.md rules 4 and 7):
 * a refund's worker (or the order's own, applying the refunds held for it) that died after a stale
 * Update conversion amount may have left the platform off the ledger, and only its message's next
 * delivery puts it right. An accept before that would fix the wrong amount for good (an accepted
 * conversion's amount no longer changes), so the job holds such an order until the platform shows
 * the ledger's amount, and never while the worker that left the mark may still be sending.
 */

const PROGRAM = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const NOW = Date.parse('2026-11-23T12:00:00.000Z');
const MINUTE = 60_000;
const KEY = ledgerKey(PROGRAM, '1001');
const SOURCE = acceptingShop(PROGRAM);

/** One conversion per externalId, `conv-<externalId>`: its amount set absolutely, accepted once. */
class Platform implements ConversionBackend {
  /** Every call, in order: `find 1001`, `update 2000`, `accept conv-1001`. */
  readonly calls: string[] = [];
  readonly conversions = new Map<string, PlatformConversion>();
  /** Errors the next lookups throw, first in, first out. */
  readonly findFaults: Error[] = [];

  has(externalId: string, amount: number): void {
    const id = `conv-${externalId}`;
    this.conversions.set(externalId, { id, externalId, amount, currency: 'EUR', status: 'pending' });
  }

  async find(_program: string, externalId: string): Promise<PlatformConversion | undefined> {
    this.calls.push(`find ${externalId}`);
    const fault = this.findFaults.shift();
    if (fault) throw fault;
    const found = this.conversions.get(externalId);
    return found ? { ...found } : undefined;
  }

  async updateAmount(_program: string, id: string, amount: number): Promise<void> {
    this.calls.push(`update ${amount}`);
    this.#change(id, { amount });
  }

  async accept(_program: string, id: string): Promise<void> {
    this.calls.push(`accept ${id}`);
    this.#change(id, { status: 'accepted' });
  }

  async refuse(_program: string, id: string): Promise<void> {
    this.calls.push('refuse');
    this.#change(id, { status: 'refused' });
  }

  async add(): Promise<{ id: string | undefined }> {
    throw new Error('not used');
  }

  amountOf(externalId: string): number | undefined {
    return this.conversions.get(externalId)?.amount;
  }

  #change(id: string, change: Partial<PlatformConversion>): void {
    for (const [externalId, c] of this.conversions) {
      if (c.id === id) this.conversions.set(externalId, { ...c, ...change });
    }
  }
}

/** Refund `refundId` of order 1001, recorded applied at `appliedAt` (ms) with the conversion at `resulting`. */
function applied(
  refundId: string,
  amount: number,
  resulting: number,
  appliedAt: number,
  extra: Partial<RefundRecord> = {},
): RefundRecord {
  return {
    refundId,
    amount,
    full: false,
    origin: 'shop',
    source: 'shop',
    currency: 'EUR',
    receivedAt: new Date(appliedAt).toISOString(),
    status: 'applied',
    appliedAt: new Date(appliedAt).toISOString(),
    resultingAmount: resulting,
    ...extra,
  };
}

/**
 * Order 1001 (50.00 EUR), due for accept, after a worker died as in test/unit/refund-crash-after-send:
 * refund r1 (20.00) recorded applied by the worker of r2 (10.00) beside it, `minutesAgo` minutes
 * ago, the ledger at 20.00; r1 still marked, as its own worker never confirmed its call.
 */
function afterRefundCrash(minutesAgo: number, extra: Partial<OrderRecord> = {}): OrderRecord {
  const at = NOW - minutesAgo * MINUTE;
  return dueRecord(PROGRAM, '1001', NOW, 40, {
    originalAmount: 5_000,
    currentAmount: 2_000,
    currency: 'EUR',
    refunds: {
      r1: applied('r1', 2_000, 2_000, at, { unconfirmedSend: true }),
      r2: applied('r2', 1_000, 2_000, at),
    },
    ...extra,
  });
}

/**
 * The same order after the ORDER's worker died (test/unit/order-crash-after-send): it adopted the
 * conversion and applied r1, held for it; r2's worker recorded both applied `minutesAgo` minutes
 * ago; the record keeps the order's own mark.
 */
function afterOrderCrash(minutesAgo: number): OrderRecord {
  const at = NOW - minutesAgo * MINUTE;
  return dueRecord(PROGRAM, '1001', NOW, 40, {
    originalAmount: 5_000,
    currentAmount: 2_000,
    currency: 'EUR',
    unconfirmedSend: true,
    refunds: {
      r1: applied('r1', 2_000, 2_000, at),
      r2: applied('r2', 1_000, 2_000, at),
    },
  });
}

async function setup(record: OrderRecord, platformAmount: number) {
  const ledger = new MemoryLedger(() => NOW);
  await ledger.create(structuredClone(record));
  const platform = new Platform();
  platform.has('1001', platformAmount);
  const { deps, parked } = acceptDeps(ledger, platform, SOURCE, () => NOW);
  const worker = workersOf(SOURCE, () => NOW)(ledger, platform, 'w-live');
  return { ledger, platform, parked, deps, worker };
}

const r1 = partialRefund('shop', 'r1', 2_000);

describe('the accept job, for an order whose refund was applied while its own worker’s send stayed unconfirmed', () => {
  it('holds it while the platform shows another amount than the ledger (the stale one), however long ago', async () => {
    // Prepare: the crash left r1's stale 30.00 on the platform, a day ago
    const { platform, parked, deps } = await setup(afterRefundCrash(24 * 60), 3_000);

    // Act
    const run = await runAccept(deps, { limit: 10 });

    // Assess: not accepted, and the operator is told why and what puts it right
    expect(run).toMatchObject({ accepted: 0, held: 1, dueLeft: 1 });
    expect(run.items[0]?.detail).toMatch(/r1/);
    expect(run.items[0]?.detail).toMatch(/EUR 30\.00/);
    expect(run.items[0]?.detail).toMatch(/EUR 20\.00/);
    expect(platform.calls.filter((c) => c.startsWith('accept'))).toEqual([]);
    expect(parked).toEqual([]);
  });

  it('is accepted after the refund’s message is delivered again and sends the ledger’s amount', async () => {
    // Prepare: held by a first run
    const { platform, deps, worker } = await setup(afterRefundCrash(24 * 60), 3_000);
    expect((await runAccept(deps, { limit: 10 })).held).toBe(1);

    // Act: SQS delivers r1 again (or an operator replays it from the DLQ); the next run
    await processEvent(worker, r1);
    const run = await runAccept(deps, { limit: 10 });

    // Assess
    expect(platform.amountOf('1001')).toBe(2_000);
    expect(run).toMatchObject({ accepted: 1, held: 0 });
    expect(platform.conversions.get('1001')?.status).toBe('accepted');
  });

  it('holds it while the worker that left the mark may still be sending, even if the platform agrees now', async () => {
    // Prepare: r1 recorded applied a minute ago; the platform shows the ledger's 20.00 for now
    const { platform, deps } = await setup(afterRefundCrash(1), 2_000);

    // Act
    const run = await runAccept(deps, { limit: 10 });

    // Assess
    expect(run).toMatchObject({ accepted: 0, held: 1 });
    expect(run.items[0]?.detail).toMatch(/r1/);
    expect(platform.calls.filter((c) => c.startsWith('accept'))).toEqual([]);
  });

  it('accepts it once that worker is long gone and the platform shows the ledger’s amount; a late delivery of the refund then sends nothing', async () => {
    // Prepare: the stale send never landed last (or was put right by hand); r1's message is in the
    // DLQ, so no delivery will confirm the mark
    const { ledger, platform, deps, worker } = await setup(afterRefundCrash(60), 2_000);

    // Act: the run, then r1 replayed from the DLQ after all
    const run = await runAccept(deps, { limit: 10 });
    platform.calls.length = 0;
    const replay = await processEvent(worker, r1);

    // Assess
    expect(run).toMatchObject({ accepted: 1, held: 0 });
    expect(platform.conversions.get('1001')).toMatchObject({ status: 'accepted', amount: 2_000 });
    expect(replay.result).toBe('refund_duplicate');
    expect(platform.calls).toEqual([]);
    expect((await ledger.get(KEY))?.acceptedAt).toBe(new Date(NOW).toISOString());
  });

  it('leaves it to the next run when the lookup that would tell fails transiently', async () => {
    // Prepare
    const { platform, deps } = await setup(afterRefundCrash(60), 2_000);
    platform.findFaults.push(new TransientError('conversions.info answered 503', { status: 503 }));

    // Act
    const first = await runAccept(deps, { limit: 10 });
    const second = await runAccept(deps, { limit: 10 });

    // Assess
    expect(first.items).toMatchObject([{ result: 'retry', detail: expect.stringMatching(/503/) }]);
    expect(second).toMatchObject({ accepted: 1 });
  });

  it('in a dry run reports it held, and changes nothing', async () => {
    // Prepare
    const { ledger, platform, deps } = await setup(afterRefundCrash(24 * 60), 3_000);
    const before = await ledger.get(KEY);

    // Act
    const run = await runAccept(deps, { limit: 10, dryRun: true });

    // Assess
    expect(run.items).toMatchObject([{ result: 'held' }]);
    expect(await ledger.get(KEY)).toEqual(before);
    expect(platform.calls.filter((c) => !c.startsWith('find'))).toEqual([]);
  });
});

describe('the accept job, for an order whose own message left its send unconfirmed', () => {
  it('holds it while the platform shows another amount than the ledger', async () => {
    // Prepare
    const { platform, deps } = await setup(afterOrderCrash(24 * 60), 3_000);

    // Act
    const run = await runAccept(deps, { limit: 10 });

    // Assess
    expect(run).toMatchObject({ accepted: 0, held: 1 });
    expect(run.items[0]?.detail).toMatch(/order 1001/);
    expect(platform.calls.filter((c) => c.startsWith('accept'))).toEqual([]);
  });

  it('accepts it once the platform shows the ledger’s amount', async () => {
    // Prepare
    const { platform, deps } = await setup(afterOrderCrash(60), 2_000);

    // Act
    const run = await runAccept(deps, { limit: 10 });

    // Assess
    expect(run).toMatchObject({ accepted: 1 });
    expect(platform.conversions.get('1001')?.status).toBe('accepted');
  });
});

describe('the accept job, for an order whose refunds were all confirmed', () => {
  it('accepts it without looking it up', async () => {
    // Prepare: the same refunds, no mark left
    const record = afterRefundCrash(1);
    delete record.refunds['r1']?.unconfirmedSend;
    const { platform, deps } = await setup(record, 2_000);

    // Act
    const run = await runAccept(deps, { limit: 10 });

    // Assess
    expect(run).toMatchObject({ accepted: 1 });
    expect(platform.calls).toEqual(['accept conv-1001']);
  });
});

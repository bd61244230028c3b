import { describe, expect, it } from 'vitest';
import { inPeriod, lateRefunds, lateRefundsCsv } from '../../cli/late-refunds.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { LateRefundError, PermanentError } from '../../shared/errors.ts';
import { ledgerKey, type OrderRecord, type RefundRecord } from '../../shared/ledger.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, trackedOrder, workerEvent } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';

/**
 * docs/runbook.md, "Late refunds": a late refund finance sent again once the platform let its
 * conversion change is applied there. What finance reads of it (`connector late-refunds`, settled a
 * month at a time), and what the worker does when the platform locks the conversion again between
 * its lookup and its call.
 */

const CONVERSION = 'c'.repeat(24);
const late = {
  because: 'locked' as const,
  conversionId: CONVERSION,
  conversionAmount: 10_000,
  commission: 1_000,
};

const refund = (refundId: string, fields: Partial<RefundRecord>): RefundRecord => ({
  refundId,
  amount: 3_000,
  full: false,
  origin: 'shop',
  receivedAt: '2026-05-20T09:00:00.000Z',
  status: 'late',
  appliedAt: '2026-05-20T09:00:01.000Z',
  late,
  ...fields,
});

/** Order 8501, EUR 100.00 (commission 10.00), locked; `refunds` recorded for it. */
const order = (refunds: readonly RefundRecord[]): OrderRecord => ({
  key: 'p#8501',
  program: 'p',
  externalId: '8501',
  source: 'shop',
  state: 'added',
  version: 4,
  conversionId: CONVERSION,
  originalAmount: 10_000,
  currentAmount: 7_000,
  currency: 'EUR',
  refunds: Object.fromEntries(refunds.map((r) => [r.refundId, r])),
  createdAt: '2026-04-01T10:00:00.000Z',
  updatedAt: '2026-06-03T10:00:00.000Z',
});

/** r-may: 30.00 late in May, sent again and applied on June 3; r-other: 20.00 late in May too. */
const reappliedInJune = () =>
  order([
    refund('r-may', {
      status: 'applied',
      appliedAt: '2026-06-03T10:00:00.000Z',
      resultingAmount: 7_000,
      late: { ...late, lateAt: '2026-05-20T09:00:01.000Z' },
    }),
    refund('r-other', {
      amount: 2_000,
      receivedAt: '2026-05-21T09:00:00.000Z',
      appliedAt: '2026-05-21T09:00:01.000Z',
    }),
  ]);

describe('late-refunds, a late refund re-applied', () => {
  it('lists it with a share of 0 and when it was re-applied, and leaves the other late refunds their share', () => {
    // Act
    const rows = lateRefunds([reappliedInJune()]);
    // Assess
    expect(rows).toEqual([
      expect.objectContaining({
        refundId: 'r-may',
        refundAmount: 3_000,
        commissionShare: 0,
        recordedAt: '2026-05-20T09:00:01.000Z',
        reappliedAt: '2026-06-03T10:00:00.000Z',
      }),
      expect.objectContaining({ refundId: 'r-other', commissionShare: 200 }),
    ]);
    expect(rows[0]?.refusedBy).toBeUndefined();
    expect(rows[1]?.reappliedAt).toBeUndefined();
  });

  it('lists it in the month it came late and again in the month it was re-applied, not in between', () => {
    // Prepare
    const rows = lateRefunds([reappliedInJune()]);
    const month = (from: string, to: string) =>
      inPeriod(rows, new Date(from), new Date(to)).map((r) => r.refundId);
    // Act, Assess
    expect(month('2026-05-01T00:00:00.000Z', '2026-05-31T23:59:59.999Z')).toEqual(['r-may', 'r-other']);
    expect(month('2026-06-01T00:00:00.000Z', '2026-06-30T23:59:59.999Z')).toEqual(['r-may']);
    expect(month('2026-07-01T00:00:00.000Z', '2026-07-31T23:59:59.999Z')).toEqual([]);
  });

  it('says so in the CSV', () => {
    // Act
    const csv = lateRefundsCsv(lateRefunds([reappliedInJune()])).split('\n');
    // Assess
    expect(csv[0]).toMatch(/,refusedBy,reappliedAt$/);
    expect(csv[1]).toMatch(
      /^8501,r-may,30\.00,false,c{24},100\.00,10\.00,0\.00,EUR,locked,.*,2026-06-03T10:00:00\.000Z$/,
    );
  });

  it('lists one sent again and not yet applied as late, at its share, in the month it came late', () => {
    // Prepare: sent again; the platform's answer to its call is still to come.
    const record = order([
      refund('r-may', {
        status: 'pending',
        appliedAt: undefined,
        late: { ...late, lateAt: '2026-05-20T09:00:01.000Z' },
      }),
    ]);
    // Act
    const rows = lateRefunds([record]);
    // Assess
    expect(rows).toEqual([
      expect.objectContaining({
        refundId: 'r-may',
        commissionShare: 300,
        recordedAt: '2026-05-20T09:00:01.000Z',
      }),
    ]);
    expect(rows[0]?.reappliedAt).toBeUndefined();
  });

  it('counts a full refund after a re-applied one at what the platform’s conversion then showed', () => {
    // Prepare: r-may re-applied (EUR 70.00 left), then a full refund late after the conversion locked again.
    const record = order([
      refund('r-may', {
        status: 'applied',
        appliedAt: '2026-06-03T10:00:00.000Z',
        late: { ...late, lateAt: '2026-05-20T09:00:01.000Z' },
      }),
      refund('r-full', {
        amount: 0,
        full: true,
        receivedAt: '2026-07-01T09:00:00.000Z',
        appliedAt: '2026-07-01T09:00:01.000Z',
        late: { ...late, conversionAmount: 7_000, commission: 700 },
      }),
    ]);
    // Act
    const rows = lateRefunds([record]);
    // Assess
    expect(rows.find((r) => r.refundId === 'r-full')).toMatchObject({
      refundAmount: 7_000,
      commissionShare: 700,
    });
  });
});

const PROGRAM = '5ad000000000000000000101';
const KEY = ledgerKey(PROGRAM, '1001');
const NOW = Date.parse('2026-06-03T10:00:00.000Z');

/** A platform that locks the conversion as the worker's update reaches it, and answers 422. */
class LockingPlatform extends MemoryPlatform {
  lockOnUpdate = false;

  override async updateAmount(program: string, id: string, amount: number): Promise<void> {
    if (!this.lockOnUpdate) return super.updateAmount(program, id, amount);
    this.calls.push(`update ${amount}`);
    this.lockAll();
    throw new PermanentError(`conversions.update answered 422: conversion ${id} is locked`, { status: 422 });
  }

  lockAll(): void {
    for (const [externalId, c] of this.conversions) {
      this.conversions.set(externalId, { ...c, status: 'accepted', isLocked: true, commission: 500 });
    }
  }

  reopenAll(): void {
    for (const [externalId, c] of this.conversions) {
      this.conversions.set(externalId, { ...c, status: 'pending', isLocked: false });
    }
  }
}

function worker(ledger: MemoryLedger, platform: MemoryPlatform): WorkerDeps {
  const source = SourceConfig.parse({
    id: 'shop',
    platform: 'generic',
    program: PROGRAM,
    rule: '5ad000000000000000000201',
    secretRef: 'SHOP_SECRET',
  });
  return {
    ledger,
    sources: new Map([[source.id, source]]),
    backendFor: () => platform,
    now: () => NOW,
    workerId: 'w-1',
    leaseMs: 60_000,
  };
}

/** Finance's `POST /refunds` of refund `refundId` of order 1001, EUR `amount` minor units. */
const financeRefund = (refundId: string, amount: number) =>
  workerEvent('shop', {
    type: 'OrderRefunded',
    eventId: `finance:${refundId}`,
    platform: 'finance',
    refundId,
    amount,
    currency: 'EUR',
    origin: 'finance',
  });

describe('a late refund sent again, its conversion locked again before the call', () => {
  it('stays late, listed in the period it first came late, and the next sending again applies it', async () => {
    // Prepare: EUR 50.00 order; the shop refunds 10.00 while the conversion is locked (late).
    const ledger = new MemoryLedger(() => NOW);
    const platform = new LockingPlatform();
    await processEvent(worker(ledger, platform), trackedOrder('shop'));
    platform.lockAll();
    platform.lockOnUpdate = true;
    await expect(processEvent(worker(ledger, platform), partialRefund('shop', 'r1', 1_000))).rejects.toThrow(
      LateRefundError,
    );
    const first = (await ledger.get(KEY))?.refunds['r1'];
    expect(first).toMatchObject({ status: 'late' });
    platform.reopenAll();
    // Act: sent again; the platform locks the conversion again as the update reaches it.
    const again = await processEvent(worker(ledger, platform), financeRefund('r1', 1_000)).catch(
      (e: unknown) => e,
    );
    // Assess
    expect(again).toBeInstanceOf(LateRefundError);
    const record = await ledger.get(KEY);
    expect(record?.refunds['r1']).toMatchObject({ status: 'late', appliedAt: first?.appliedAt });
    expect(lateRefunds(record ? [record] : [])).toEqual([
      expect.objectContaining({ refundId: 'r1', recordedAt: first?.appliedAt, commissionShare: 100 }),
    ]);

    // Act: reopened again, sent again, and this time taken.
    platform.reopenAll();
    platform.lockOnUpdate = false;
    const outcome = await processEvent(worker(ledger, platform), financeRefund('r1', 1_000));
    // Assess
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 4_000 });
    expect(platform.amountOf('1001')).toBe(4_000);
    expect((await ledger.get(KEY))?.refunds['r1']).toMatchObject({
      status: 'applied',
      resultingAmount: 4_000,
    });
  });

  it('is a duplicate, with nothing looked up, when sent again at another amount', async () => {
    // Prepare
    const ledger = new MemoryLedger(() => NOW);
    const platform = new LockingPlatform();
    await processEvent(worker(ledger, platform), trackedOrder('shop'));
    platform.lockAll();
    platform.lockOnUpdate = true;
    await processEvent(worker(ledger, platform), partialRefund('shop', 'r1', 1_000)).catch(() => undefined);
    platform.reopenAll();
    const calls = platform.calls.length;
    // Act
    const outcome = await processEvent(worker(ledger, platform), financeRefund('r1', 1_500));
    // Assess
    expect(outcome).toMatchObject({ result: 'refund_duplicate', detail: 'refund r1 already late' });
    expect(platform.calls.slice(calls)).toEqual([]);
  });
});

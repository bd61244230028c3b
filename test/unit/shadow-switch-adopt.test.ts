import { describe, expect, it } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import { PermanentError } from '../../shared/errors.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, trackedOrder, workerEvent } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';

/**
 * docs/deploy.md, "Shadow mode: before switching the pixel off": what the worker does, once a source
 * is live, with a pixel's conversion it finds for an order shadow mode skipped (no click id), and
 * with one the platform has refused. Every call to the platform is counted.
 */

const PROGRAM = '5ad000000000000000000101';
const KEY = ledgerKey(PROGRAM, '1001');
const NOW = Date.parse('2026-05-01T10:00:00.000Z');

const source = (mode: 'live' | 'shadow', extra: Record<string, unknown> = {}) =>
  SourceConfig.parse({
    id: 'pilot',
    platform: 'generic',
    program: PROGRAM,
    rule: '5ad000000000000000000201',
    secretRef: 'PILOT_SECRET',
    mode,
    ...extra,
  });

function worker(
  ledger: MemoryLedger,
  platform: MemoryPlatform,
  mode: 'live' | 'shadow',
  extra: Record<string, unknown> = {},
): WorkerDeps {
  const config = source(mode, mode === 'live' ? { lookupBeforeAdd: true, ...extra } : extra);
  return {
    ledger,
    sources: new Map([[config.id, config]]),
    backendFor: () => platform,
    now: () => NOW,
    workerId: `w-${mode}`,
    leaseMs: 60_000,
  };
}

/** Order 1001, EUR 50.00, without a click id: attribution skips it. */
const unattributedOrder = () => workerEvent('pilot', { type: 'OrderPlaced', amount: 5_000, currency: 'EUR' });

/** The pixel's conversion of order 1001, refused by the advertiser. */
function refusedPixel(platform: MemoryPlatform, amount = 5_000): string {
  platform.has('1001', amount);
  const pixel = platform.conversions.get('1001');
  if (!pixel) throw new Error('seeded above');
  platform.conversions.set('1001', { ...pixel, status: 'refused' });
  return pixel.id;
}

describe('a refund after the switch, of an order shadow mode skipped (no click id)', () => {
  it("brings the pixel's conversion to the order's amount less every refund, those of the shadow period too", async () => {
    // Prepare: skipped in shadow mode, refunded 10.00 then; the pixel recorded the order.
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'shadow'), unattributedOrder());
    await processEvent(worker(ledger, platform, 'shadow'), partialRefund('pilot', 'r0', 1_000));
    platform.has('1001', 5_000);
    const pixelId = platform.conversions.get('1001')?.id;
    // Act
    const outcome = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 500));
    // Assess: 50.00 − 10.00 − 5.00, once, on the pixel's conversion, which the ledger now holds
    expect(outcome).toMatchObject({ result: 'refund_applied', conversionId: pixelId, amount: 3_500 });
    expect(platform.calls).toEqual(['find 1001', 'update 3500']);
    const record = await ledger.get(KEY);
    expect(record).toMatchObject({ state: 'added', conversionId: pixelId, currentAmount: 3_500 });
    expect(record?.shadow).toBeUndefined();
    expect(record?.skipReason).toBeUndefined();
    expect(record?.refunds.r0).toMatchObject({ status: 'applied', resultingAmount: 3_500 });
    expect(record?.refunds.r1).toMatchObject({ status: 'applied', resultingAmount: 3_500 });
    // A delivery again of the refund changes nothing.
    const again = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 500));
    expect(again.result).toBe('refund_duplicate');
    expect(platform.calls).toEqual(['find 1001', 'update 3500']);
  });

  it('stays skipped, as before, when the platform has no conversion of the order', async () => {
    // Prepare
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'shadow'), unattributedOrder());
    // Act
    const outcome = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 500));
    // Assess
    expect(outcome.result).toBe('refund_skipped');
    expect(platform.calls).toEqual(['find 1001']);
    expect(await ledger.get(KEY)).toMatchObject({ state: 'skipped', shadow: true });
  });

  it('parks the refund, changing nothing, when the pixel recorded the order in another currency; its replay applies it once the platform is put right', async () => {
    // Prepare
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'shadow'), unattributedOrder());
    platform.has('1001', 5_000, 'USD');
    const r1 = partialRefund('pilot', 'r1', 500);
    // Act
    const parked = processEvent(worker(ledger, platform, 'live'), r1);
    // Assess
    await expect(parked).rejects.toThrow(PermanentError);
    await expect(parked).rejects.toThrow(/is in USD \(USD 50\.00\).*not adopted/);
    expect(platform.calls.filter((c) => !c.startsWith('find'))).toEqual([]);
    expect(await ledger.get(KEY)).toMatchObject({ state: 'skipped', shadow: true });
    // The platform put right, the parked message replayed
    const pixel = platform.conversions.get('1001');
    if (pixel) platform.conversions.set('1001', { ...pixel, currency: 'EUR' });
    expect(await processEvent(worker(ledger, platform, 'live'), r1)).toMatchObject({
      result: 'refund_applied',
      amount: 4_500,
    });
  });

  it("records the pixel's refused conversion as refused, and sends nothing to it", async () => {
    // Prepare
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'shadow'), unattributedOrder());
    const pixelId = refusedPixel(platform);
    // Act
    const outcome = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 500));
    // Assess
    expect(outcome).toMatchObject({ result: 'refund_skipped', detail: 'conversion already refused' });
    expect(platform.calls).toEqual(['find 1001']);
    expect(await ledger.get(KEY)).toMatchObject({ state: 'refused', conversionId: pixelId });
  });

  it('leaves an order skipped while its source was live skipped: no lookup, nothing sent', async () => {
    // Prepare: skipped by the live source; a conversion of the order on the platform all the same.
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'live'), unattributedOrder());
    platform.has('1001', 5_000);
    // Act
    const outcome = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 500));
    // Assess
    expect(outcome.result).toBe('refund_skipped');
    expect(platform.calls).toEqual([]);
    expect(platform.amountOf('1001')).toBe(5_000);
    expect(await ledger.get(KEY)).toMatchObject({ state: 'skipped' });
  });
});

describe('adopting a conversion the platform has refused, on the order’s delivery', () => {
  it('records a shadow-mode order refused, closes its held refunds, and never updates or accepts the conversion', async () => {
    // Prepare: a refund in shadow mode; the advertiser refused the pixel's conversion.
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'shadow'), trackedOrder('pilot'));
    await processEvent(worker(ledger, platform, 'shadow'), partialRefund('pilot', 'r0', 1_000));
    const pixelId = refusedPixel(platform);
    const live = worker(ledger, platform, 'live', { acceptAfterDays: 14 });
    // Act
    const outcome = await processEvent(live, trackedOrder('pilot'));
    const later = await processEvent(live, partialRefund('pilot', 'r1', 500));
    const again = await processEvent(live, trackedOrder('pilot'));
    // Assess
    expect(outcome).toMatchObject({ result: 'already_refused', conversionId: pixelId });
    const record = await ledger.get(KEY);
    expect(record).toMatchObject({ state: 'refused', conversionId: pixelId });
    expect(record?.acceptDueAt).toBeUndefined();
    expect(record?.leaseOwner).toBeUndefined();
    expect(record?.refunds.r0).toMatchObject({ status: 'skipped', outcome: 'conversion already refused' });
    expect(later).toMatchObject({ result: 'refund_skipped', detail: 'conversion already refused' });
    expect(again.result).toBe('duplicate');
    expect(platform.calls).toEqual(['find 1001']);
    expect(platform.conversions.get('1001')?.status).toBe('refused');
  });

  it('closes the refunds of the shadow period when a refund after the switch finds the conversion refused', async () => {
    // Prepare
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'shadow'), trackedOrder('pilot'));
    await processEvent(worker(ledger, platform, 'shadow'), partialRefund('pilot', 'r0', 1_000));
    const pixelId = refusedPixel(platform);
    // Act
    const outcome = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 500));
    // Assess: no refund of the order left pending, as if a call were still to come
    expect(outcome).toMatchObject({ result: 'refund_skipped', detail: 'conversion already refused' });
    const record = await ledger.get(KEY);
    expect(record).toMatchObject({ state: 'refused', conversionId: pixelId });
    expect(record?.refunds.r0).toMatchObject({ status: 'skipped', outcome: 'conversion already refused' });
    expect(platform.calls).toEqual(['find 1001']);
  });

  it('records a new order refused when lookupBeforeAdd finds its conversion refused: no add', async () => {
    // Prepare
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    const pixelId = refusedPixel(platform);
    // Act
    const outcome = await processEvent(worker(ledger, platform, 'live'), trackedOrder('pilot'));
    // Assess
    expect(outcome).toMatchObject({ result: 'already_refused', conversionId: pixelId });
    expect(platform.calls).toEqual(['find 1001']);
    expect(await ledger.get(KEY)).toMatchObject({ state: 'refused', conversionId: pixelId });
  });

  it('records an order refused when its add is answered 409 for a refused conversion', async () => {
    // Prepare: a live source without lookupBeforeAdd
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    const pixelId = refusedPixel(platform);
    // Act
    const outcome = await processEvent(
      worker(ledger, platform, 'live', { lookupBeforeAdd: false }),
      trackedOrder('pilot'),
    );
    // Assess
    expect(outcome).toMatchObject({ result: 'already_refused', conversionId: pixelId });
    expect(platform.calls).toEqual(['add 1001 5000', 'find 1001']);
    expect(await ledger.get(KEY)).toMatchObject({ state: 'refused', conversionId: pixelId });
  });
});

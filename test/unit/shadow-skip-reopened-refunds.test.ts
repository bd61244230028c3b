import { describe, expect, it } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, workerEvent } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';

/**
 * docs/deploy.md, "Shadow mode: before switching the pixel off", attacked: a refund after the switch
 * adopts the pixel's conversion of an order shadow mode skipped (no click id), and the refunds of the
 * shadow period, closed `skipped` with the order, count against it. Each of them is judged as a
 * refund held for an order is judged on the order's first delivery: one in another currency, or from
 * another shop, is rejected, not taken off; one stating a gross is turned net from the order's lines.
 */

const PROGRAM = '5ad000000000000000000101';
const KEY = ledgerKey(PROGRAM, '1001');
const NOW = Date.parse('2026-05-01T10:00:00.000Z');

const sourceOf = (id: string, mode: 'live' | 'shadow') =>
  SourceConfig.parse({
    id,
    platform: 'generic',
    program: PROGRAM,
    rule: '5ad000000000000000000201',
    secretRef: `${id.toUpperCase()}_SECRET`,
    mode,
    ...(mode === 'live' ? { lookupBeforeAdd: true } : {}),
  });

/** The pilot shop in `mode`, and another shop of the same program (always in shadow mode). */
function worker(ledger: MemoryLedger, platform: MemoryPlatform, mode: 'live' | 'shadow'): WorkerDeps {
  const pilot = sourceOf('pilot', mode);
  const other = sourceOf('other', 'shadow');
  return {
    ledger,
    sources: new Map([
      [pilot.id, pilot],
      [other.id, other],
    ]),
    backendFor: () => platform,
    now: () => NOW,
    workerId: `w-${mode}`,
    leaseMs: 60_000,
  };
}

/** Order 1001 without a click id, EUR 21.21 net: line A 10.00 + 2.00 tax, line B 11.21 + 0.79 tax. */
const unattributedOrder = () =>
  workerEvent('pilot', {
    type: 'OrderPlaced',
    amount: 2_121,
    currency: 'EUR',
    basis: {
      taxesIncluded: false,
      net: 2_121,
      tax: 279,
      lines: [
        { id: 'A', net: 1_000, tax: 200, quantity: 1 },
        { id: 'B', net: 1_121, tax: 79, quantity: 1 },
      ],
    },
  });

const refund = (source: string, refundId: string, fields: Record<string, unknown>) =>
  workerEvent(source, { type: 'OrderRefunded', eventId: `refund-${refundId}`, refundId, ...fields });

/** Runs `event` and gives back whatever it ends with (an outcome, or the error that parks it). */
const settle = (deps: WorkerDeps, event: ReturnType<typeof workerEvent>) =>
  processEvent(deps, event).catch((error: unknown) => error);

describe("the refunds of the shadow period, taken with the pixel's conversion of an order shadow mode skipped", () => {
  it('rejects one in another currency than the order’s instead of taking its number off', async () => {
    // Prepare: the shop refunded USD 10.00 of the EUR order in shadow mode; the pixel recorded EUR 21.21.
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'shadow'), unattributedOrder());
    await settle(
      worker(ledger, platform, 'shadow'),
      refund('pilot', 'r-usd', { amount: 1_000, currency: 'USD' }),
    );
    platform.has('1001', 2_121);
    // Act: a refund of EUR 1.00 after the switch
    const outcome = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 100));
    // Assess: 21.21 − 1.00; the USD refund is other money, as the live flow would have said.
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 2_021 });
    expect(platform.amountOf('1001')).toBe(2_021);
    const record = await ledger.get(KEY);
    expect(record?.refunds['r-usd']).toMatchObject({
      status: 'rejected',
      outcome: expect.stringContaining('refund currency USD differs'),
    });
  });

  it('rejects one another shop sent before the order came instead of taking it off', async () => {
    // Prepare: shop "other" refunded an order 1001 of its own before the pilot's order came.
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await settle(
      worker(ledger, platform, 'shadow'),
      refund('other', 'r-other', { amount: 1_000, currency: 'EUR' }),
    );
    await processEvent(worker(ledger, platform, 'shadow'), unattributedOrder());
    platform.has('1001', 2_121);
    // Act
    const outcome = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 100));
    // Assess
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 2_021 });
    expect(platform.amountOf('1001')).toBe(2_021);
    expect((await ledger.get(KEY))?.refunds['r-other']).toMatchObject({
      status: 'rejected',
      outcome: expect.stringContaining('refund from source "other"'),
    });
  });

  it("turns a refund stating only its gross net from the order's lines, as for an order added", async () => {
    // Prepare: EUR 12.00 paid back in shadow mode: line A's gross, 10.00 net.
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'shadow'), unattributedOrder());
    await processEvent(
      worker(ledger, platform, 'shadow'),
      refund('pilot', 'r-gross', { amount: 1_200, gross: 1_200, currency: 'EUR' }),
    );
    platform.has('1001', 2_121);
    // Act
    const outcome = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 100));
    // Assess: 21.21 − 10.00 − 1.00, not 21.21 − 12.00 − 1.00: the tax was never in the conversion.
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 1_021 });
    expect(platform.amountOf('1001')).toBe(1_021);
    expect((await ledger.get(KEY))?.refunds['r-gross']).toMatchObject({ status: 'applied', amount: 1_000 });
  });

  it('nets a refund skipped after the switch, the pixel not found yet, after those of the shadow period', async () => {
    // Prepare: 12.00 back in shadow mode (line A); after the switch, 12.00 more while the platform
    // showed nothing yet (line B: line A is gone); then the pixel's conversion shows.
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'shadow'), unattributedOrder());
    await processEvent(
      worker(ledger, platform, 'shadow'),
      refund('pilot', 'r-a', { amount: 1_200, gross: 1_200, currency: 'EUR' }),
    );
    const unseen = await processEvent(
      worker(ledger, platform, 'live'),
      refund('pilot', 'r-b', { amount: 1_200, gross: 1_200, currency: 'EUR' }),
    );
    expect(unseen.result).toBe('refund_skipped');
    platform.has('1001', 2_121);
    // Act
    const outcome = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 100));
    // Assess: 21.21 − 10.00 − 11.21 leaves nothing: refused, each line counted once.
    expect(outcome.result).toBe('refused');
    const record = await ledger.get(KEY);
    expect(record?.refunds['r-a']).toMatchObject({ status: 'applied', amount: 1_000 });
    expect(record?.refunds['r-b']).toMatchObject({ status: 'applied', amount: 1_121 });
  });

  it('still refuses the conversion for a cancellation of the shadow period, whatever refund comes after', async () => {
    // Prepare: the order cancelled in shadow mode
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'shadow'), unattributedOrder());
    await processEvent(
      worker(ledger, platform, 'shadow'),
      workerEvent('pilot', { type: 'OrderCancelled', reason: 'out of stock' }),
    );
    platform.has('1001', 2_121);
    // Act
    const outcome = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 100));
    // Assess
    expect(outcome.result).toBe('refused');
    expect(platform.conversions.get('1001')?.status).toBe('refused');
    expect(platform.calls).toEqual(['find 1001', 'refuse']);
  });
});

import { describe, expect, it } from 'vitest';
import { runAccept } from '../../shared/accept/job.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { acceptDeps } from '../support/accept-deps.ts';
import { CLICK, partialRefund, workerEvent } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';

/**
 * docs/deploy.md, "Shadow mode: before switching the pixel off", with a return window
 * (`acceptAfterDays`): the pixel's conversion a refund after the switch adopts is accepted once the
 * window after the order has passed, whether shadow mode had the order `shadowed` (a click id) or
 * `skipped` (none, where the pixel may still have seen the click).
 */

const PROGRAM = '5ad000000000000000000101';
const KEY = ledgerKey(PROGRAM, '1001');
const NOW = Date.parse('2026-05-01T10:00:00.000Z');
/** The shop's order date, 11 days before the connector saw the order (a backfill of the shadow period). */
const ORDERED = '2026-04-20T08:00:00.000Z';
const DUE = '2026-05-20T08:00:00.000Z';

const source = (mode: 'live' | 'shadow') =>
  SourceConfig.parse({
    id: 'pilot',
    platform: 'generic',
    program: PROGRAM,
    rule: '5ad000000000000000000201',
    secretRef: 'PILOT_SECRET',
    mode,
    acceptAfterDays: 30,
  });

function worker(ledger: MemoryLedger, platform: MemoryPlatform, mode: 'live' | 'shadow'): WorkerDeps {
  const config = source(mode);
  return {
    ledger,
    sources: new Map([[config.id, config]]),
    backendFor: () => platform,
    now: () => NOW,
    workerId: `w-${mode}`,
    leaseMs: 60_000,
  };
}

/** Order 1001, EUR 50.00, placed on `ORDERED`; tracked by a click id or not. */
const order = (tracked: boolean) =>
  workerEvent('pilot', {
    type: 'OrderPlaced',
    amount: 5_000,
    currency: 'EUR',
    orderDate: ORDERED,
    ...(tracked ? { clickIds: [CLICK], buyerIp: '198.51.100.4' } : {}),
  });

/**
 * Shadow mode records order 1001, the pixel records EUR 50.00 for it, the source goes live and a
 * refund of EUR 10.00 adopts the pixel's conversion.
 */
async function adoptedAfterSwitch(
  tracked: boolean,
): Promise<{ ledger: MemoryLedger; platform: MemoryPlatform }> {
  const ledger = new MemoryLedger(() => NOW);
  const platform = new MemoryPlatform();
  await processEvent(worker(ledger, platform, 'shadow'), order(tracked));
  platform.has('1001', 5_000);
  const outcome = await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 1_000));
  expect(outcome).toMatchObject({ result: 'refund_applied', amount: 4_000 });
  return { ledger, platform };
}

describe("the accept due date of a pixel's conversion adopted after the switch", () => {
  it.each([
    ['shadowed (a click id)', true],
    ['skipped (no click id)', false],
  ])('is the order date plus the return window for an order shadow mode had %s', async (_, tracked) => {
    // Prepare
    const { ledger } = await adoptedAfterSwitch(tracked);
    // Act
    const record = await ledger.get(KEY);
    // Assess
    expect(record).toMatchObject({ state: 'added', acceptDueAt: DUE });
  });

  it('is dated from when the ledger first saw the order for a record shadow mode skipped without a due date (written before it kept one)', async () => {
    // Prepare: the record as shadow mode skipped it before: no due date, created at NOW.
    const ledger = new MemoryLedger(() => NOW);
    const platform = new MemoryPlatform();
    await processEvent(worker(ledger, platform, 'shadow'), order(false));
    const older = await ledger.get(KEY);
    if (!older) throw new Error('recorded above');
    older.acceptDueAt = undefined;
    expect(await ledger.update(older)).toBe(true);
    platform.has('1001', 5_000);
    // Act
    await processEvent(worker(ledger, platform, 'live'), partialRefund('pilot', 'r1', 1_000));
    // Assess: never before the order's own window ends (the order came before the ledger saw it).
    expect(await ledger.get(KEY)).toMatchObject({ state: 'added', acceptDueAt: '2026-05-31T10:00:00.000Z' });
  });

  it('lets the accept job accept the conversion adopted for an order shadow mode skipped once it is due', async () => {
    // Prepare
    const { ledger, platform } = await adoptedAfterSwitch(false);
    const before = platform.calls.length;
    const { deps } = acceptDeps(ledger, platform, source('live'), () => Date.parse(DUE) + 60_000);
    // Act
    const summary = await runAccept(deps, { limit: 10 });
    // Assess
    expect(summary).toMatchObject({ accepted: 1 });
    expect(platform.calls.slice(before)).toContain('accept');
    expect(platform.conversions.get('1001')?.status).toBe('accepted');
    expect((await ledger.get(KEY))?.acceptedAt).toBeDefined();
  });

  it('leaves it to wait before the window after the order has passed', async () => {
    // Prepare
    const { ledger, platform } = await adoptedAfterSwitch(false);
    const before = platform.calls.length;
    const { deps } = acceptDeps(ledger, platform, source('live'), () => Date.parse(DUE) - 60_000);
    // Act
    await runAccept(deps, { limit: 10 });
    // Assess
    expect(platform.calls.slice(before)).not.toContain('accept');
    expect(platform.conversions.get('1001')?.status).toBe('pending');
  });
});

import { afterEach, describe, expect, it } from 'vitest';
import { type LocalStack, type LocalStackOptions, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import type { RecordReport } from '../../shared/worker/batch.ts';
import { localStateDir, runCli } from '../support/cli.ts';
import { CLICK } from '../support/events.ts';
import { sandboxConversions } from '../support/sandbox.ts';
import { until } from '../support/until.ts';

/**
 * `reconcile` and `--repair` against the worker's own safety rules and the platform's list: a repair
 * must not shorten the verification window the worker keeps after an add whose worker died, a
 * period that cuts through an order's life must not hide a second conversion of it, and a
 * platform list longer than one page is read whole.
 */
const IP = '203.0.113.7';
const MINUTE = 60_000;

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function world(options: LocalStackOptions = {}) {
  const stack: LocalStack = await startLocalStack({ port: 0, sandbox: { port: 0 }, ...options });
  const state = localStateDir(stack);
  cleanups.push(
    () => stack.close(),
    () => state.remove(),
  );
  const program = stack.sources.get('generic')?.program ?? '';
  return {
    stack,
    program,
    cli: (argv: readonly string[]) => runCli(argv, { cwd: state.dir }),
    record: (externalId: string) => stack.ledger.get(ledgerKey(program, externalId)),
  };
}

function order(program: string, externalId: string, fields: Partial<OrderRecord>): OrderRecord {
  const at = new Date().toISOString();
  return {
    key: ledgerKey(program, externalId),
    program,
    externalId,
    source: 'generic',
    state: 'added',
    version: 0,
    kind: 'tracking',
    originalAmount: 4990,
    currentAmount: 4990,
    currency: 'EUR',
    refunds: {},
    createdAt: at,
    updatedAt: at,
    ...fields,
  };
}

describe('reconcile --repair of an add whose worker died, within the worker’s verification window', () => {
  it('leaves the window in place: the order sent again waits it out as it would have without the repair', async () => {
    // Prepare: a worker verification window of 40 minutes (ADD_VERIFY_SECONDS=2400: a platform known
    // to record adds late). Two orders whose worker died mid-add 20 minutes ago: their add may still
    // land until 20 minutes from now. 7901 is repaired; 7902, identical, is not (created before the
    // period reconciled). Both are then sent again.
    const reports: RecordReport[] = [];
    const w = await world({
      verifyMs: 40 * MINUTE,
      visibilityBaseSeconds: 1,
      observe: (report) => reports.push(report),
    });
    const leaseEnd = Date.now() - 20 * MINUTE;
    const died = {
      state: 'adding' as const,
      leaseOwner: 'a-worker-that-died',
      leaseUntil: leaseEnd,
      updatedAt: new Date(leaseEnd).toISOString(),
    };
    const from = new Date(Date.now() - 2 * 3_600_000).toISOString();
    await w.stack.ledger.create(
      order(w.program, '7901', { ...died, createdAt: new Date(leaseEnd - MINUTE).toISOString() }),
    );
    await w.stack.ledger.create(
      order(w.program, '7902', { ...died, createdAt: new Date(Date.parse(from) - MINUTE).toISOString() }),
    );

    // Act
    const repaired = await w.cli(['reconcile', '--from', from, '--repair', '--yes']);
    for (const externalId of ['7901', '7902']) {
      const sent = await w.cli([
        'send',
        'generic',
        '--order-id',
        externalId,
        '--click-id',
        CLICK,
        '--ip',
        IP,
      ]);
      expect(sent.code, sent.stdout + sent.stderr).toBe(0);
    }
    await until(
      () => new Set(reports.map((r) => r.event?.externalId)),
      (seen) => seen.has('7901') && seen.has('7902'),
      'the first receive of both orders',
    );

    // Assess: no new add for either before the window after the dead worker's lease has passed.
    expect(repaired.stdout).toMatch(/7901\s+failed: no conversion on the platform/);
    expect(sandboxConversions(w.stack, '7901')).toEqual([]);
    expect(sandboxConversions(w.stack, '7902')).toEqual([]);
    for (const externalId of ['7901', '7902']) {
      const held = await w.record(externalId);
      expect(held?.state, externalId).toBe('adding');
      expect(held?.leaseUntil, externalId).toBeGreaterThanOrEqual(leaseEnd + 40 * MINUTE - 1000);
    }
  });
});

describe('reconcile over a period that cuts through an order’s life', () => {
  it('reports a second conversion of an order created in the period when its first was created before it', async () => {
    // Prepare: order 8001 was recorded and added on 2026-03-09 just before midnight; a second
    // conversion of it (an add recorded twice, a hand-made one) was created on 2026-03-10.
    const w = await world();
    await w.stack.ledger.create(order(w.program, '8001', { createdAt: '2026-03-09T23:59:00.000Z' }));
    const control = w.stack.sandbox?.control;
    control?.seedConversion({
      program: w.program,
      externalId: '8001',
      amount: 4990,
      createdAt: '2026-03-09T23:59:30.000Z',
    });
    control?.seedConversion({
      program: w.program,
      externalId: '8001',
      amount: 4990,
      createdAt: '2026-03-10T00:00:30.000Z',
    });

    // Act
    const day = await w.cli(['reconcile', '--from', '2026-03-10', '--to', '2026-03-10', '--json']);

    // Assess
    expect(day.code, day.stdout + day.stderr).toBe(1);
    const report = JSON.parse(day.stdout) as { differences: { kind: string; externalId: string }[] };
    expect(report.differences).toContainEqual(
      expect.objectContaining({ kind: 'duplicate', externalId: '8001' }),
    );
  });
});

describe('reconcile across the platform list’s page boundary', () => {
  it('reads every page: an order on the second page is compared, and a duplicate split across pages is one', async () => {
    // Prepare: 1001 conversions on 2026-02-01 (a page is 1000): 1000 the ledger knows, then 8999's
    // second conversion (1001st, second page). 8998 is the 1000th; its ledger amount is off.
    const w = await world();
    const control = w.stack.sandbox?.control;
    for (let i = 0; i < 999; i++) {
      const externalId = String(8000 + i);
      const createdAt = new Date(Date.parse('2026-02-01T00:00:00Z') + i * 1000).toISOString();
      control?.seedConversion({ program: w.program, externalId, amount: 4990, createdAt });
      await w.stack.ledger.create(order(w.program, externalId, { createdAt }));
    }
    control?.seedConversion({
      program: w.program,
      externalId: '8999',
      amount: 4990,
      createdAt: '2026-02-01T12:00:00.000Z',
    });
    control?.seedConversion({
      program: w.program,
      externalId: '8999',
      amount: 4990,
      createdAt: '2026-02-01T12:00:01.000Z',
    });
    await w.stack.ledger.create(order(w.program, '8999', { createdAt: '2026-02-01T11:59:00.000Z' }));
    await w.stack.ledger.update({
      ...((await w.record('8998')) as OrderRecord),
      currentAmount: 3990,
    });

    // Act
    const day = await w.cli(['reconcile', '--from', '2026-02-01', '--to', '2026-02-01', '--json']);

    // Assess
    const report = JSON.parse(day.stdout) as {
      platformConversions: number;
      ledgerRecords: number;
      differences: { kind: string; externalId: string }[];
    };
    expect(report.platformConversions).toBe(1001);
    expect(report.ledgerRecords).toBe(1000);
    expect(report.differences.map((d) => `${d.kind} ${d.externalId}`).sort()).toEqual([
      'amount_mismatch 8998',
      'duplicate 8999',
    ]);
  });
});

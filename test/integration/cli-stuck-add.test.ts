import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { localStateDir, runCli } from '../support/cli.ts';

/**
 * Ledger records left in `adding` for good (their worker died mid-add and their message is gone):
 * status and reconcile report them, and `reconcile --repair` settles them through Conversion info.
 */
const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';
const LONG_AGO = 20 * 60_000;

let stack: LocalStack;
let state: { dir: string; remove(): void };
let program: string;
const startedAt = new Date(Date.now() - 2 * 3_600_000).toISOString();

/** As a worker killed mid-add leaves it: `adding`, its lease long expired. */
function stuck(record: OrderRecord): OrderRecord {
  const then = Date.now() - LONG_AGO;
  return {
    ...record,
    state: 'adding',
    conversionId: undefined,
    leaseOwner: 'a-worker-that-died',
    leaseUntil: then,
    updatedAt: new Date(then).toISOString(),
  };
}

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 } });
  state = localStateDir(stack);
  program = [...stack.sources.values()][0]?.program ?? '';
  // 7001: added on the platform, then its ledger record left in `adding` (the worker died after the add).
  const sent = await runCli(['send', 'generic', '--order-id', '7001', '--click-id', CLICK, '--ip', IP], {
    cwd: state.dir,
  });
  if (sent.code !== 0) throw new Error(sent.stdout + sent.stderr);
  await stack.waitForIdle();
  const added = await stack.ledger.get(ledgerKey(program, '7001'));
  if (!added) throw new Error('7001 not in the ledger');
  await stack.ledger.update(stuck(added));
  // 7002: the add never reached the platform.
  const now = new Date().toISOString();
  await stack.ledger.create(
    stuck({
      key: ledgerKey(program, '7002'),
      program,
      externalId: '7002',
      source: 'generic',
      state: 'adding',
      version: 0,
      kind: 'tracking',
      originalAmount: 1500,
      currentAmount: 1500,
      currency: 'EUR',
      refunds: {},
      createdAt: now,
      updatedAt: now,
    }),
  );
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const cli = (argv: string[], input?: string) =>
  runCli(argv, { cwd: state.dir, ...(input === undefined ? {} : { input }) });
const stateOf = async (id: string) => (await stack.ledger.get(ledgerKey(program, id)))?.state;

describe('an add left unfinished for good', () => {
  it('makes status exit 1 and say so, instead of "in flight"', async () => {
    // Act
    const shown = await cli(['status', '7001']);
    // Assess
    expect(shown.code).toBe(1);
    expect(shown.stdout).not.toContain('look again in a moment');
    expect(shown.stdout).toContain('✗ stuck_add: an add left unfinished 20 min ago');
  });

  it('is reported by reconcile, and --repair --dry-run changes nothing', async () => {
    // Act
    const report = await cli(['reconcile', '--from', startedAt]);
    const dry = await cli(['reconcile', '--from', startedAt, '--repair', '--dry-run']);
    // Assess
    expect(report.code).toBe(1);
    expect(report.stdout).toMatch(/stuck_add\s+7001/);
    expect(report.stdout).toMatch(/stuck_add\s+7002/);
    expect(dry.code).toBe(1);
    expect(dry.stdout).toMatch(/7001\s+added: the platform has conversion \S+/);
    expect(dry.stdout).toMatch(/7002\s+failed: no conversion on the platform/);
    expect(dry.stdout).toContain('dry run: 2 stuck adds would be repaired');
    expect([await stateOf('7001'), await stateOf('7002')]).toEqual(['adding', 'adding']);
  });

  it('is left as it is when the repair is declined (exit 1)', async () => {
    // Act
    const declined = await cli(['reconcile', '--from', startedAt, '--repair'], 'n\n');
    // Assess
    expect(declined.code).toBe(1);
    expect(declined.stderr).toContain('not confirmed; nothing repaired');
    expect(await stateOf('7001')).toBe('adding');
  });

  it('is settled by reconcile --repair through the platform lookup, exit 1 for the order left without a conversion', async () => {
    // Act
    const repaired = await cli(['reconcile', '--from', startedAt, '--repair', '--yes']);
    // Assess
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(1);
    expect(repaired.stdout).toContain('repaired 2 stuck adds');
    expect(repaired.stdout).toMatch(/^7002: failed: no conversion on the platform/m);
    const first = await stack.ledger.get(ledgerKey(program, '7001'));
    const conversion = stack.sandbox?.control.conversions().find((c) => c.externalId === '7001');
    expect(first).toMatchObject({ state: 'added', conversionId: conversion?.id });
    expect(await stateOf('7002')).toBe('failed');
    expect((await cli(['status', '7001'])).code).toBe(0);
    // 7002 still has no conversion: it stays in sight until it is sent again or replayed.
    const after = await cli(['reconcile', '--from', startedAt]);
    expect(after.code).toBe(1);
    expect(after.stdout).toMatch(/^failed_add\s+7002\s/m);
    expect(after.stdout).not.toMatch(/^\S+\s+7001\s/m);
  });
});

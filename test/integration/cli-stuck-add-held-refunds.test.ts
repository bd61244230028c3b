import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { localStateDir, runCli } from '../support/cli.ts';

/**
 * A stuck add whose order had a refund held for it (the refund came first): the add that went
 * through carried the order's amount less that refund, and the worker died before it recorded the
 * refund applied. `reconcile --repair` adopts the conversion; the refund the add carried must not
 * stay "pending" for good (status would say it is being applied, and the accept job would hold the
 * conversion forever).
 */
const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';
const LONG_AGO = 20 * 60_000;

let stack: LocalStack;
let state: { dir: string; remove(): void };
let program: string;
const startedAt = new Date(Date.now() - 2 * 3_600_000).toISOString();

/** The record as the worker left it when it died after the add's call, before recording its result. */
function diedMidAdd(record: OrderRecord): OrderRecord {
  const then = Date.now() - LONG_AGO;
  const refunds: OrderRecord['refunds'] = {};
  for (const [id, refund] of Object.entries(record.refunds)) {
    refunds[id] = { ...refund, status: 'pending', appliedAt: undefined, resultingAmount: undefined };
  }
  return {
    ...record,
    state: 'adding',
    conversionId: undefined,
    refunds,
    awaitingSince: record.createdAt,
    leaseOwner: 'a-worker-that-died',
    leaseUntil: then,
    updatedAt: new Date(then).toISOString(),
  };
}

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 } });
  state = localStateDir(stack);
  program = [...stack.sources.values()][0]?.program ?? '';
  // 7101: its partial refund first (held), then the order, added at its amount less the refund.
  for (const argv of [
    ['send', 'generic', '--order-id', '7101', '--sample', 'partial-refund'],
    ['send', 'generic', '--order-id', '7101', '--click-id', CLICK, '--ip', IP],
  ]) {
    const sent = await runCli(argv, { cwd: state.dir });
    if (sent.code !== 0) throw new Error(sent.stdout + sent.stderr);
    await stack.waitForIdle();
  }
  const added = await stack.ledger.get(ledgerKey(program, '7101'));
  if (added?.state !== 'added') throw new Error(`7101 not added: ${JSON.stringify(added)}`);
  await stack.ledger.update(diedMidAdd(added));
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const cli = (argv: string[]) => runCli(argv, { cwd: state.dir });

describe('reconcile --repair of a stuck add that carried a held refund', () => {
  it('records the refund the adopted add carried as applied, so status agrees and nothing stays pending', async () => {
    // Prepare
    const conversion = stack.sandbox?.control.conversions().find((c) => c.externalId === '7101');
    const before = await stack.ledger.get(ledgerKey(program, '7101'));
    expect(conversion?.amount).toBe(before?.currentAmount);

    // Act
    const repaired = await cli(['reconcile', '--from', startedAt, '--repair', '--yes']);
    const status = await cli(['status', '7101']);

    // Assess
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    const after = await stack.ledger.get(ledgerKey(program, '7101'));
    expect(after).toMatchObject({ state: 'added', conversionId: conversion?.id });
    expect(Object.values(after?.refunds ?? {}).map((r) => r.status)).toEqual(['applied']);
    expect(Object.values(after?.refunds ?? {})[0]?.resultingAmount).toBe(conversion?.amount);
    expect(after?.awaitingSince).toBeUndefined();
    expect(status.code, status.stdout + status.stderr).toBe(0);
    expect(status.stdout).not.toContain('refund pending');
    expect(status.stdout).toMatch(/r-1\s+shop\s+EUR 10\.00\s+applied\s+EUR 39\.90/);
    expect(status.stdout).toContain('✓ ledger and platform agree');
  });
});

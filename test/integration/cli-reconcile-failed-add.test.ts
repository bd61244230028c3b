import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { localStateDir, runCli } from '../support/cli.ts';
import { CLICK } from '../support/events.ts';
import { sandboxConversions } from '../support/sandbox.ts';

/**
 * An order the ledger holds `failed` has no conversion: money the affiliate is never paid until an
 * operator replays its message or sends the order again. `reconcile` must keep such orders of its
 * period in sight (kind `failed_add`, exit 1) whatever made them failed: a stuck add `--repair`
 * found nothing for (its message gone), or an add the platform refused (its message parked in the
 * DLQ); and must let go of one once it is added.
 */
const IP = '203.0.113.7';
const LONG_AGO = 20 * 60_000;
const ADD_ROUTE = '/advertiser/conversions.add';

let stack: LocalStack;
let state: { dir: string; remove(): void };
let program: string;
const startedAt = new Date(Date.now() - 2 * 3_600_000).toISOString();

interface Reported {
  readonly kind: string;
  readonly externalId: string;
  readonly ledgerState?: string;
  readonly ledgerAmount?: number;
  readonly currency?: string;
  readonly detail: string;
}

const cli = (...argv: string[]) => runCli(argv, { cwd: state.dir });
const recordOf = (externalId: string) => stack.ledger.get(ledgerKey(program, externalId));

async function differences(): Promise<Reported[]> {
  const report = await cli('reconcile', '--from', startedAt, '--json');
  return (JSON.parse(report.stdout) as { differences: Reported[] }).differences;
}

async function sendOrder(externalId: string): Promise<void> {
  const sent = await cli('send', 'generic', '--order-id', externalId, '--click-id', CLICK, '--ip', IP);
  if (sent.code !== 0) throw new Error(sent.stdout + sent.stderr);
  await stack.waitForIdle();
}

/** As a worker killed mid-add leaves an order whose add never reached the platform, message gone. */
function stuckAdd(externalId: string): OrderRecord {
  const then = new Date(Date.now() - LONG_AGO).toISOString();
  return {
    key: ledgerKey(program, externalId),
    program,
    externalId,
    source: 'generic',
    state: 'adding',
    version: 0,
    kind: 'tracking',
    originalAmount: 1500,
    currentAmount: 1500,
    currency: 'EUR',
    refunds: {},
    leaseOwner: 'a-worker-that-died',
    leaseUntil: Date.parse(then),
    createdAt: then,
    updatedAt: then,
  };
}

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, visibilityBaseSeconds: 1 });
  state = localStateDir(stack);
  program = stack.sources.get('generic')?.program ?? '';
  // 7A01: a stuck add, its message gone.
  await stack.ledger.create(stuckAdd('7A01'));
  // 7B01: the platform refuses its add for good (a 422): failed, its message parked in the DLQ.
  const control = stack.sandbox?.control;
  control?.setFaults({ errorRate: 1, errorStatus: 422, routes: [ADD_ROUTE] });
  try {
    await sendOrder('7B01');
  } finally {
    control?.setFaults({});
  }
  const parked = await recordOf('7B01');
  if (parked?.state !== 'failed') throw new Error(`7B01 not failed: ${JSON.stringify(parked)}`);
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

describe('reconcile --repair of a stuck add the platform has no conversion of', () => {
  it('exits 1 and says the order is left without a conversion, instead of calling the run clean', async () => {
    // Act
    const repaired = await cli('reconcile', '--from', startedAt, '--program', program, '--repair', '--yes');

    // Assess
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(1);
    expect(repaired.stdout).toContain('repaired 1 stuck add');
    expect(repaired.stdout).toMatch(/^7A01: failed: no conversion on the platform/m);
    expect((await recordOf('7A01'))?.state).toBe('failed');
  });

  it('is listed by the next reconcile as failed_add, with why and what to do', async () => {
    // Act
    const table = await cli('reconcile', '--from', startedAt);
    const listed = await differences();

    // Assess
    expect(table.code, table.stdout + table.stderr).toBe(1);
    expect(table.stdout).toMatch(/^failed_add\s+7A01\s+-\s+failed EUR 15\.00\s+-\s+/m);
    const repairedOne = listed.find((d) => d.externalId === '7A01');
    expect(repairedOne).toMatchObject({
      kind: 'failed_add',
      ledgerState: 'failed',
      ledgerAmount: 1500,
      currency: 'EUR',
    });
    expect(repairedOne?.detail).toContain((await recordOf('7A01'))?.lastError);
    expect(repairedOne?.detail).toContain('connector dlq list --external-id 7A01');
    expect(repairedOne?.detail).toContain('send the order again');
  });
});

describe('reconcile of an order whose add the platform refused, its message parked', () => {
  it('lists it as failed_add with the platform’s reason and the DLQ advice, which finds the message', async () => {
    // Act
    const listed = await differences();
    const inDlq = await cli('dlq', 'list', '--external-id', '7B01', '--json');

    // Assess
    const parked = listed.find((d) => d.externalId === '7B01');
    expect(parked).toMatchObject({ kind: 'failed_add', ledgerState: 'failed' });
    const lastError = (await recordOf('7B01'))?.lastError ?? '';
    expect(lastError).toContain('422');
    expect(parked?.detail).toContain(lastError);
    expect(parked?.detail).toContain('connector dlq list --external-id 7B01');
    expect(inDlq.code, inDlq.stderr).toBe(0);
    expect((JSON.parse(inDlq.stdout) as { messages: unknown[] }).messages).toHaveLength(1);
  });
});

describe('reconcile once the failed orders are added after all', () => {
  it('lists neither: the parked one replayed, the repaired one sent again', async () => {
    // Prepare
    const replayed = await cli('dlq', 'replay', '--external-id', '7B01', '--yes');
    expect(replayed.code, replayed.stderr).toBe(0);
    await stack.waitForIdle();
    await sendOrder('7A01');

    // Act
    const clean = await cli('reconcile', '--from', startedAt);

    // Assess
    expect((await recordOf('7B01'))?.state).toBe('added');
    expect((await recordOf('7A01'))?.state).toBe('added');
    expect(sandboxConversions(stack, '7A01')).toHaveLength(1);
    expect(sandboxConversions(stack, '7B01')).toHaveLength(1);
    expect(clean.code, clean.stdout + clean.stderr).toBe(0);
    expect(clean.stdout).toContain('✓ no differences');
  });
});

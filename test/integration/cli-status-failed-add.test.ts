import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { localStateDir, runCli } from '../support/cli.ts';
import { CLICK } from '../support/events.ts';
import { postRefund } from '../support/finance-refunds.ts';
import { sandboxConversions } from '../support/sandbox.ts';

/**
 * An order the ledger holds `failed` has no conversion: no affiliate is paid for it until it is
 * added. `connector status <order>` must say so as `reconcile` does (`failed_add`, exit 1, the way
 * out), not "✓ ledger and platform agree". And the refunds held for such an order wait for an add
 * that only an operator brings about: replaying the order's message if it is parked, else sending
 * the order again (its message discarded, expired, or a stuck add `reconcile --repair` turned
 * `failed`, which never had one in the DLQ). `status` and `reconcile` must not tell them to replay a
 * parked message that may not exist.
 */
const IP = '203.0.113.7';
const LONG_AGO = 20 * 60_000;
const ADD_ROUTE = '/advertiser/conversions.add';

let stack: LocalStack;
let state: { dir: string; remove(): void };
let program: string;
const startedAt = new Date(Date.now() - 2 * 3_600_000).toISOString();

const cli = (...argv: string[]) => runCli(argv, { cwd: state.dir });
const recordOf = (externalId: string) => stack.ledger.get(ledgerKey(program, externalId));

async function sendOrder(externalId: string): Promise<void> {
  const sent = await cli('send', 'generic', '--order-id', externalId, '--click-id', CLICK, '--ip', IP);
  if (sent.code !== 0) throw new Error(sent.stdout + sent.stderr);
  await stack.waitForIdle();
}

async function financeRefund(externalId: string, refundId: string, amount: string): Promise<void> {
  const answer = await postRefund(stack, { externalId, refundId, amount, source: 'generic' });
  if (answer.status !== 202) throw new Error(`${answer.status} ${answer.text}`);
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
    currentAmount: 1000,
    currency: 'EUR',
    refunds: {
      'RF-8A01-1': {
        refundId: 'RF-8A01-1',
        amount: 500,
        full: false,
        origin: 'finance',
        source: 'generic',
        receivedAt: then,
        status: 'pending',
      },
    },
    awaitingSince: then,
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
  // 8A01: a stuck add holding a refund, its message gone; --repair finds nothing: failed, no message.
  await stack.ledger.create(stuckAdd('8A01'));
  const repaired = await cli('reconcile', '--from', startedAt, '--program', program, '--repair', '--yes');
  if ((await recordOf('8A01'))?.state !== 'failed') throw new Error(repaired.stdout + repaired.stderr);
  // 8B01: the platform refuses its add for good (a 422): failed, its message parked in the DLQ; then
  // finance refunds part of it, which the ledger holds for the add.
  const control = stack.sandbox?.control;
  control?.setFaults({ errorRate: 1, errorStatus: 422, routes: [ADD_ROUTE] });
  try {
    await sendOrder('8B01');
  } finally {
    control?.setFaults({});
  }
  await financeRefund('8B01', 'RF-8B01-1', '5.00');
  const parked = await recordOf('8B01');
  if (parked?.state !== 'failed' || parked.refunds['RF-8B01-1']?.status !== 'pending')
    throw new Error(`8B01 not failed with a held refund: ${JSON.stringify(parked)}`);
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

describe('connector status of an order the ledger holds failed, with no conversion on the platform', () => {
  it('reports the failed_add difference with its way out and exits 1, instead of "agree"', async () => {
    // Act
    const shown = await cli('status', '8B01');

    // Assess
    expect(shown.code, shown.stdout + shown.stderr).toBe(1);
    expect(shown.stdout).not.toContain('✓ ledger and platform agree');
    expect(shown.stdout).toMatch(/state\s+failed\s+-/);
    const lastError = (await recordOf('8B01'))?.lastError ?? '';
    expect(lastError).toContain('422');
    expect(shown.stdout).toContain(
      "✗ failed_add: no conversion on the platform: replay the order's message if it is parked " +
        '(connector dlq list --external-id 8B01), else send the order again (the shop, or connector backfill); ' +
        `the ledger holds it failed: ${lastError}`,
    );
  });

  it('gives the same difference as reconcile in --json', async () => {
    // Act
    const shown = await cli('status', '8A01', '--json');
    const reconciled = await cli('reconcile', '--from', startedAt, '--json');

    // Assess
    expect(shown.code, shown.stderr).toBe(1);
    const fromStatus = (JSON.parse(shown.stdout) as { differences: unknown[] }).differences;
    const fromReconcile = (
      JSON.parse(reconciled.stdout) as { differences: { externalId: string }[] }
    ).differences.filter((d) => d.externalId === '8A01');
    expect(fromStatus).toEqual([
      expect.objectContaining({
        kind: 'failed_add',
        externalId: '8A01',
        ledgerState: 'failed',
        ledgerAmount: 1000,
        currency: 'EUR',
      }),
    ]);
    expect(fromStatus).toEqual(fromReconcile);
  });
});

describe('refunds held for an order the ledger holds failed', () => {
  it('status says to replay the order if parked, else to send it again, whether or not a message is parked', async () => {
    // Act
    const withMessage = await cli('status', '8B01');
    const withoutMessage = await cli('status', '8A01');
    const inDlq = await cli('dlq', 'list', '--external-id', '8A01', '--json');

    // Assess: 8A01 never had a message in the DLQ; both get words true of either.
    expect((JSON.parse(inDlq.stdout) as { messages: unknown[] }).messages).toEqual([]);
    for (const [shown, id] of [
      [withMessage, '8B01'],
      [withoutMessage, '8A01'],
    ] as const) {
      const line = shown.stdout.split('\n').find((l) => l.includes('refund waiting for the order')) ?? '';
      expect(line).toMatch(
        new RegExp(
          `^… 1 refund waiting for the order since \\S+: applied once order ${id} is added: replay the order's message if it is parked ` +
            `\\(connector dlq list --external-id ${id}\\), else send the order again \\(the shop, or connector backfill\\)$`,
        ),
      );
      expect(shown.stdout).not.toContain('when the parked order is replayed');
    }
  });

  it('reconcile lists them with the same way out, not "parked in the DLQ: replay it"', async () => {
    // Act
    const table = await cli('reconcile', '--from', startedAt);

    // Assess
    expect(table.stdout).toContain('2 refunds waiting for their order (applied when it is added):');
    expect(table.stdout).not.toContain('parked in the DLQ: replay it');
    for (const id of ['8A01', '8B01']) {
      expect(table.stdout).toMatch(
        new RegExp(
          `^\\S+\\s+${id}\\s+RF-${id}-1\\s+generic\\s+failed: replay the order's message if it is parked ` +
            `\\(connector dlq list --external-id ${id}\\), else send the order again \\(the shop, or connector backfill\\)$`,
          'm',
        ),
      );
    }
  });
});

describe('connector status once the failed order is added after all', () => {
  it('agrees again (exit 0): the replayed order added, its held refund applied', async () => {
    // Prepare
    const replayed = await cli('dlq', 'replay', '--external-id', '8B01', '--yes');
    expect(replayed.code, replayed.stderr).toBe(0);
    await stack.waitForIdle();

    // Act
    const shown = await cli('status', '8B01');

    // Assess
    expect((await recordOf('8B01'))?.state).toBe('added');
    expect(sandboxConversions(stack, '8B01')).toHaveLength(1);
    expect(shown.code, shown.stdout + shown.stderr).toBe(0);
    expect(shown.stdout).toContain('✓ ledger and platform agree');
    expect(shown.stdout).not.toContain('failed_add');
  });
});

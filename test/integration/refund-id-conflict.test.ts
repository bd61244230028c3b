import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ledgerKey } from '../../shared/ledger.ts';
import { localStackForCli, runCli } from '../support/cli.ts';
import { sandboxConversions } from '../support/sandbox.ts';

/**
 * Finance sends refund RF-1 of an order for 10.00 (applied), then RF-1 again for 20.00. A refund id
 * counts once: the worker found RF-1 recorded and dropped the message as a duplicate, yet the door
 * had answered 202 "queued … 20.00", so finance believed 20.00 refunded. The door, and the CLI before
 * it sends, now refuse it with a 409 naming `refundId` and what is recorded (or reserved). Real
 * handlers on dynalite and fauxqs, the worker, the sandbox and the `connector` CLI.
 */

const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';
const COUNTS_ONCE = 'a refund id counts once; send another refund id for another refund';

const local = localStackForCli();

const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });
const program = () => local.stack.sources.get('generic')?.program ?? '';

/** The generic sample order (EUR 49.90) as `orderId`, added as a conversion. */
async function placeOrder(orderId: string): Promise<void> {
  const sent = await cli('send', 'generic', '--order-id', orderId, '--click-id', CLICK, '--ip', IP);
  expect(sent.code, sent.stderr).toBe(0);
  await local.stack.waitForIdle();
  expect(sandboxConversions(local.stack, orderId)).toMatchObject([{ amount: 4_990 }]);
}

async function financeRefund(body: Record<string, unknown>) {
  const res = await fetch(`${local.stack.url}/refunds`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': local.stack.secrets['FINANCE_API_KEY'] ?? '',
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const amountsOf = (orderId: string) =>
  sandboxConversions(local.stack, orderId)[0]?.amountHistory.map((h) => h.amount);

describe('POST /refunds: a refund id already recorded at another amount', () => {
  it('answers 409 naming refundId and the recorded amount, queues nothing, and takes the same refund again', async () => {
    // Prepare
    await placeOrder('7501');
    const first = await financeRefund({ externalId: '7501', refundId: 'RF-1', amount: '10.00' });
    await local.stack.waitForIdle();
    // Act
    const other = await financeRefund({ externalId: '7501', refundId: 'RF-1', amount: '20.00' });
    const full = await financeRefund({ externalId: '7501', refundId: 'RF-1', full: true });
    const same = await financeRefund({ externalId: '7501', refundId: 'RF-1', amount: '10.00' });
    await local.stack.waitForIdle();
    // Assess
    expect(first.status).toBe(202);
    expect(other).toEqual({
      status: 409,
      body: {
        error: 'conflict',
        field: 'refundId',
        message: `refund RF-1 of order 7501 is recorded at EUR 10.00 (applied): ${COUNTS_ONCE}`,
      },
    });
    expect(full.status).toBe(409);
    expect(same.status).toBe(202);
    expect(amountsOf('7501')).toEqual([3_990]);
    const record = await local.stack.ledger.get(ledgerKey(program(), '7501'));
    expect(record?.refunds['RF-1']).toMatchObject({ amount: 1_000, status: 'applied' });
  });

  it('answers 409 naming the reserved amount while the first is queued and not yet recorded', async () => {
    // Prepare
    await placeOrder('7502');
    await local.stack.stopPolling();
    const first = await financeRefund({ externalId: '7502', refundId: 'RF-1', amount: '10.00' });
    // Act
    const other = await financeRefund({ externalId: '7502', refundId: 'RF-1', amount: '20.00' });
    const resent = await financeRefund({ externalId: '7502', refundId: 'RF-1', amount: '10.00' });
    local.stack.startPolling();
    await local.stack.waitForIdle();
    // Assess
    expect(first.status).toBe(202);
    expect(other).toMatchObject({ status: 409, body: { error: 'conflict', field: 'refundId' } });
    expect(other.body['message']).toBe(
      `refund RF-1 of order 7502 is reserved at EUR 10.00 (requested, not yet applied): ${COUNTS_ONCE}`,
    );
    expect(resent.status).toBe(202);
    expect(amountsOf('7502')).toEqual([3_990]);
  });
});

describe('connector refund: a refund id already recorded at another amount', () => {
  it('says so naming --refund-id before sending, exits 2, and sends the same refund again', async () => {
    // Prepare
    await placeOrder('7503');
    const first = await cli('refund', '--external-id', '7503', '--refund-id', 'RF-1', '--amount', '10.00');
    await local.stack.waitForIdle();
    // Act
    const other = await cli('refund', '--external-id', '7503', '--refund-id', 'RF-1', '--amount', '20.00');
    const full = await cli('refund', '--external-id', '7503', '--refund-id', 'RF-1', '--full');
    const same = await cli('refund', '--external-id', '7503', '--refund-id', 'RF-1', '--amount', '10.00');
    await local.stack.waitForIdle();
    // Assess
    expect(first.code, first.stderr).toBe(0);
    expect(other.code).toBe(2);
    expect(other.stderr).toContain(
      `--refund-id: refund RF-1 of order 7503 is recorded at EUR 10.00 (applied): ${COUNTS_ONCE}\n`,
    );
    expect(other.stderr).toContain('nothing sent');
    expect(other.stdout).toBe('');
    expect(full.code).toBe(2);
    expect(full.stderr).toContain(
      '--refund-id: refund RF-1 of order 7503 is recorded at EUR 10.00 (applied)',
    );
    expect(same.code, same.stderr).toBe(0);
    expect(amountsOf('7503')).toEqual([3_990]);
  });

  it('lists the rows of a CSV that reuse a recorded refund id at another amount, full rows too, and sends nothing', async () => {
    // Prepare
    await placeOrder('7504');
    await placeOrder('7505');
    const sent = await cli('refund', '--external-id', '7504', '--refund-id', 'RF-1', '--amount', '10.00');
    expect(sent.code, sent.stderr).toBe(0);
    await local.stack.waitForIdle();
    const csv = join(local.dir, 'refunds-reused-id.csv');
    writeFileSync(
      csv,
      [
        'externalId,refundId,amount,full,reason',
        '7505,RF-2,5.00,,',
        '7504,RF-1,20.00,,typo fixed',
        '7504,RF-1-b,,true,',
      ].join('\n'),
    );
    const csvFull = join(local.dir, 'refunds-reused-id-full.csv');
    writeFileSync(csvFull, 'externalId,refundId,amount,full\n7504,RF-1,,true\n');
    // Act
    const refunded = await cli('refund', '--csv', csv);
    const refundedFull = await cli('refund', '--csv', csvFull, '--dry-run');
    await local.stack.waitForIdle();
    // Assess
    expect(refunded.code).toBe(2);
    expect(refunded.stderr).toContain(
      `line 3: refundId: refund RF-1 of order 7504 is recorded at EUR 10.00 (applied): ${COUNTS_ONCE}\n`,
    );
    expect(refunded.stderr).toContain('error: 1 problem; ');
    expect(refunded.stdout).toBe('');
    expect(refundedFull.code).toBe(2);
    expect(refundedFull.stderr).toContain(
      'line 2: refundId: refund RF-1 of order 7504 is recorded at EUR 10.00',
    );
    expect(amountsOf('7504')).toEqual([3_990]);
    expect(amountsOf('7505')).toEqual([]);
  });
});

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ledgerKey } from '../../shared/ledger.ts';
import { localStackForCli, placeSampleOrder, runCli } from '../support/cli.ts';
import { postRefund, postRefundWithQueueDown } from '../support/finance-refunds.ts';
import { sandboxConversions } from '../support/sandbox.ts';

/**
 * `connector refund` checks a whole file before it sends a row, "with the same rules as the API".
 * Two of `POST /refunds`'s rules were missing from that check: a partial refund of an order being
 * refunded in full, and the refunds the door reserved that the worker has not recorded yet (they
 * take from what is left). Such a row passed the check and failed only when sent (400 `amount`,
 * exit 1), after the file's earlier rows had been sent: a half-applied file. Real handlers on dynalite
 * and fauxqs, the worker, the sandbox and the `connector` CLI.
 */

const local = localStackForCli();
const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });
const program = () => local.stack.sources.get('generic')?.program ?? '';

/** The Generic sample order (EUR 49.90) as `orderId`, added as a conversion. */
const placeOrder = (orderId: string) => placeSampleOrder(local, 'generic', orderId);
const conversionOf = (orderId: string) => sandboxConversions(local.stack, orderId)[0];
const recordOf = (orderId: string) => local.stack.ledger.get(ledgerKey(program(), orderId));

function csvFile(name: string, rows: readonly string[]): string {
  const path = join(local.dir, name);
  writeFileSync(path, `externalId,refundId,amount,full,source\n${rows.join('\n')}\n`);
  return path;
}

/** The worker runs again and drains what the test queued. */
async function drain(): Promise<void> {
  local.stack.startPolling();
  await local.stack.waitForIdle();
}

describe('connector refund --csv: a partial refund of an order being refunded in full', () => {
  it('is refused before anything is sent when POST /refunds reserved the full refund (worker stopped): exit 2, no row sent', async () => {
    // Prepare: RF-F, a full refund of 7701, reserved and queued; the worker has not recorded it
    await placeOrder('7701');
    await placeOrder('7702');
    await local.stack.stopPolling();
    const full = await postRefund(local.stack, { externalId: '7701', refundId: 'RF-F', full: true });
    const csv = csvFile('behind-full.csv', ['7702,RF-7702-1,5.00,,generic', '7701,RF-7701-P,10.00,,generic']);
    // Act
    const dryRun = await cli('refund', '--csv', csv, '--dry-run');
    const sent = await cli('refund', '--csv', csv);
    await drain();
    // Assess
    expect(full.status, full.text).toBe(202);
    const refusal =
      'line 3: amount: order 7701 is being refunded in full (refund RF-F, requested and not yet applied): ' +
      'a partial refund of it would never be applied; the full refund gives back all of it';
    expect(dryRun.code, dryRun.stdout).toBe(2);
    expect(dryRun.stderr).toContain(refusal);
    expect(dryRun.stdout).not.toContain('would POST');
    expect(sent.code, sent.stdout).toBe(2);
    expect(sent.stderr).toContain(refusal);
    expect(sent.stderr).not.toContain('line 2:');
    expect(sent.stdout).not.toContain('queued');
    expect(conversionOf('7702')).toMatchObject({ status: 'pending', amount: 4_990, amountHistory: [] });
    expect((await recordOf('7702'))?.refunds).toEqual({});
    expect(conversionOf('7701')).toMatchObject({ status: 'refused' });
  });

  it('is refused before anything is sent when the full refund is recorded already', async () => {
    // Prepare: RF-F applied, the conversion refused
    await placeOrder('7703');
    const full = await postRefund(local.stack, { externalId: '7703', refundId: 'RF-F', full: true });
    await local.stack.waitForIdle();
    // Act
    const sent = await cli('refund', '--external-id', '7703', '--refund-id', 'RF-P', '--amount', '10.00');
    // Assess
    expect(full.status, full.text).toBe(202);
    expect(sent.code, sent.stdout).toBe(2);
    expect(sent.stderr).toContain(
      '--amount: order 7703 is refunded in full (refund RF-F, applied): a partial refund of it would never be applied',
    );
    expect(Object.keys((await recordOf('7703'))?.refunds ?? {})).toEqual(['RF-F']);
  });

  it('is refused before anything is sent when an earlier row of the same file refunds the order in full', async () => {
    // Prepare
    await placeOrder('7705');
    const csv = csvFile('full-then-partial.csv', [
      '7705,RF-7705-F,,true,generic',
      '7705,RF-7705-P,5.00,,generic',
    ]);
    // Act
    const sent = await cli('refund', '--csv', csv);
    await local.stack.waitForIdle();
    // Assess
    expect(sent.code, sent.stdout).toBe(2);
    expect(sent.stderr).toContain(
      'line 3: amount: order 7705 is being refunded in full by line 2 of this file (refund RF-7705-F): ' +
        'a partial refund of it would never be applied; the full refund gives back all of it',
    );
    expect(sent.stderr).not.toContain('line 2:');
    expect(conversionOf('7705')).toMatchObject({ status: 'pending', amount: 4_990 });
  });
});

describe('connector refund: what is left of an order counts the refunds POST /refunds reserved', () => {
  it('refuses a row larger than what the reserved refunds leave, before anything is sent (flags and CSV)', async () => {
    // Prepare: EUR 40.00 of EUR 49.90 reserved and queued, the worker stopped: EUR 9.90 left
    await placeOrder('7704');
    await placeOrder('7707');
    await local.stack.stopPolling();
    const reserved = await postRefund(local.stack, { externalId: '7704', refundId: 'RF-R', amount: '40.00' });
    const csv = csvFile('over-reserved.csv', [
      '7707,RF-7707-1,5.00,,generic',
      '7704,RF-7704-2,20.00,,generic',
    ]);
    // Act
    const flags = await cli(
      'refund',
      '--external-id',
      '7704',
      '--refund-id',
      'RF-7704-2',
      '--amount',
      '20.00',
    );
    const sent = await cli('refund', '--csv', csv);
    await drain();
    // Assess
    expect(reserved.status, reserved.text).toBe(202);
    const over =
      'EUR 20.00 is more than is left of order 7704: EUR 9.90 remains after refund RF-R, requested and not yet applied (EUR 40.00)';
    expect(flags.code, flags.stdout).toBe(2);
    expect(flags.stderr).toContain(`--amount: ${over}`);
    expect(sent.code, sent.stdout).toBe(2);
    expect(sent.stderr).toContain(`line 3: amount: ${over}`);
    expect(sent.stdout).not.toContain('queued');
    expect(conversionOf('7707')).toMatchObject({ status: 'pending', amount: 4_990, amountHistory: [] });
    expect(conversionOf('7704')).toMatchObject({ status: 'pending', amount: 990 });
  });

  it('counts the reserved refunds and the earlier rows of the file together', async () => {
    // Prepare: EUR 20.00 reserved; the file's first row takes 20.00 more: EUR 9.90 left for its second
    await placeOrder('7706');
    await local.stack.stopPolling();
    const reserved = await postRefund(local.stack, { externalId: '7706', refundId: 'RF-R', amount: '20.00' });
    const csv = csvFile('together.csv', ['7706,RF-7706-2,20.00,,generic', '7706,RF-7706-3,10.00,,generic']);
    // Act
    const sent = await cli('refund', '--csv', csv);
    await drain();
    // Assess
    expect(reserved.status, reserved.text).toBe(202);
    expect(sent.code, sent.stdout).toBe(2);
    expect(sent.stderr).toContain(
      'line 3: amount: EUR 10.00 is more than is left of order 7706: EUR 9.90 remains after refund RF-R, ' +
        'requested and not yet applied, and line 2 of this file (EUR 40.00)',
    );
    expect(sent.stderr).not.toContain('line 2:');
    expect(conversionOf('7706')).toMatchObject({ status: 'pending', amount: 2_990 });
  });

  it('does not count a row against its own reservation: a file sent again after a 503 goes through', async () => {
    // Prepare: RF-1 (EUR 20.00) reserved, its send failed (503), never queued
    await placeOrder('7708');
    const failed = await postRefundWithQueueDown(local.stack, {
      externalId: '7708',
      refundId: 'RF-7708-1',
      amount: '20.00',
    });
    const csv = csvFile('again.csv', ['7708,RF-7708-1,20.00,,generic', '7708,RF-7708-2,20.00,,generic']);
    // Act
    const sent = await cli('refund', '--csv', csv);
    await local.stack.waitForIdle();
    // Assess
    expect(failed).toBe(503);
    expect(sent.code, sent.stderr).toBe(0);
    expect(conversionOf('7708')).toMatchObject({ status: 'pending', amount: 990 });
  });
});

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ledgerKey } from '../../shared/ledger.ts';
import { emptyDir, localStackForCli, placeSampleOrder, runCli } from '../support/cli.ts';
import { sandboxConversions } from '../support/sandbox.ts';

/**
 * `connector refund --csv` judges the whole file before it sends a row, so that finance never gets a
 * half-applied file. Three of `POST /refunds`'s answers were left to the door: a partial refund after
 * a full row of its order when the CLI cannot read the ledger, a decimal amount without a currency for
 * an order the ledger does not know, and a currency other than the order's. Each such file passed the
 * check, its earlier rows were queued and the row failed when sent (exit 1). Real handlers on dynalite
 * and fauxqs, the worker, the sandbox and the `connector` CLI.
 */

const local = localStackForCli();
const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });
const program = () => local.stack.sources.get('generic')?.program ?? '';

/** The Generic sample order (EUR 49.90) as `orderId`, added as a conversion. */
const placeOrder = (orderId: string) => placeSampleOrder(local, 'generic', orderId);
const conversionOf = (orderId: string) => sandboxConversions(local.stack, orderId)[0];
const recordOf = (orderId: string) => local.stack.ledger.get(ledgerKey(program(), orderId));

function csvFile(dir: string, name: string, header: string, rows: readonly string[]): string {
  const path = join(dir, name);
  writeFileSync(path, `${header}\n${rows.join('\n')}\n`);
  return path;
}

describe('connector refund --csv without the ledger (no table configured)', () => {
  // Finance staff with the connector's URL and key only: no .local-stack.json, no LEDGER_TABLE, no SOURCES.
  let dir: { dir: string; remove(): void };
  beforeAll(() => {
    dir = emptyDir();
  });
  afterAll(() => dir.remove());
  const financeCli = (...argv: string[]) =>
    runCli(argv, {
      cwd: dir.dir,
      env: {
        CONNECTOR_URL: local.stack.url,
        FINANCE_API_KEY: local.stack.secrets['FINANCE_API_KEY'] ?? '',
      },
    });

  it('refuses a partial refund after a full row of the same order before anything is sent: exit 2', async () => {
    // Prepare
    await placeOrder('7801');
    const csv = csvFile(dir.dir, 'full-then-partial.csv', 'externalId,refundId,amount,full,currency', [
      '7801,RF-7801-F,,true,',
      '7801,RF-7801-P,5.00,,EUR',
    ]);
    // Act
    const sent = await financeCli('refund', '--csv', csv);
    await local.stack.waitForIdle();
    // Assess
    expect(sent.code, sent.stdout).toBe(2);
    expect(sent.stderr).toContain(
      'line 3: amount: order 7801 is being refunded in full by line 2 of this file (refund RF-7801-F): ' +
        'a partial refund of it would never be applied; the full refund gives back all of it',
    );
    expect(sent.stderr).not.toContain('line 2:');
    expect(sent.stdout).not.toContain('queued');
    expect(conversionOf('7801')).toMatchObject({ status: 'pending', amount: 4_990 });
    expect((await recordOf('7801'))?.refunds).toEqual({});
  });

  it('refuses it too when the partial amount cannot be read in minor units here (no currency)', async () => {
    // Prepare: without the ledger the CLI cannot know the order's currency, so 5.00 is not read in cents
    await placeOrder('7802');
    const csv = csvFile(dir.dir, 'full-then-decimal.csv', 'externalId,refundId,amount,full,source', [
      '7802,RF-7802-F,,yes,generic',
      '7802,RF-7802-P,5.00,,generic',
    ]);
    // Act
    const dryRun = await financeCli('refund', '--csv', csv, '--dry-run');
    // Assess
    expect(dryRun.code, dryRun.stdout).toBe(2);
    expect(dryRun.stderr).toContain(
      'line 3: amount: order 7802 is being refunded in full by line 2 of this file (refund RF-7802-F)',
    );
    expect(dryRun.stdout).not.toContain('would POST');
  });

  it('refuses it too when the table is configured but cannot be read, and says why', async () => {
    // Prepare: a table name the ledger's endpoint does not have
    const csv = csvFile(dir.dir, 'unreadable.csv', 'externalId,refundId,amount,full,source,currency', [
      '7804,RF-7804-F,,true,generic,',
      '7804,RF-7804-P,5.00,,generic,EUR',
    ]);
    // Act
    const dryRun = await runCli(['refund', '--csv', csv, '--dry-run'], {
      cwd: dir.dir,
      env: {
        AWS_REGION: 'us-east-1',
        AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
        AWS_SECRET_ACCESS_KEY: 'example-secret-access-key',
        DYNAMODB_ENDPOINT: local.stack.emulators.dynamoEndpoint,
        LEDGER_TABLE: 'no-such-table',
        SOURCES: JSON.stringify([...local.stack.sources.values()]),
      },
    });
    // Assess
    expect(dryRun.code, dryRun.stdout).toBe(2);
    expect(dryRun.stderr).toContain(
      'line 3: amount: order 7804 is being refunded in full by line 2 of this file (refund RF-7804-F)',
    );
    expect(dryRun.stderr).toContain('amounts not checked against the ledger (the ledger could not be read: ');
    expect(dryRun.stdout).not.toContain('would POST');
  });

  it('still sends a partial refund before the full one, and says what it could not check', async () => {
    // Prepare
    await placeOrder('7803');
    const csv = csvFile(dir.dir, 'partial-then-full.csv', 'externalId,refundId,amount,full,currency', [
      '7803,RF-7803-P,5.00,,EUR',
      '7803,RF-7803-F,,true,',
    ]);
    // Act
    const sent = await financeCli('refund', '--csv', csv);
    await local.stack.waitForIdle();
    // Assess
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stderr).toContain('amounts not checked against the ledger (missing the ledger table name');
    expect(sent.stdout).toContain('2 refunds: 2 queued, 0 failed');
    expect(conversionOf('7803')).toMatchObject({ status: 'refused' });
  });
});

describe('connector refund --csv: the currency rules of POST /refunds, judged before anything is sent', () => {
  it('refuses a decimal amount without a currency for an order the ledger does not know: exit 2', async () => {
    // Prepare: 7811 is a conversion; 7819 the ledger has never seen
    await placeOrder('7811');
    const csv = csvFile(local.dir, 'unknown-no-currency.csv', 'externalId,refundId,amount,full,source', [
      '7811,RF-7811-1,5.00,,generic',
      '7819,RF-7819-1,5.00,,generic',
    ]);
    // Act
    const dryRun = await cli('refund', '--csv', csv, '--dry-run');
    const sent = await cli('refund', '--csv', csv);
    await local.stack.waitForIdle();
    // Assess
    const refusal = 'line 3: currency: the ledger does not know this order: give its currency';
    expect(dryRun.code, dryRun.stdout).toBe(2);
    expect(dryRun.stderr).toContain(refusal);
    expect(sent.code, sent.stdout).toBe(2);
    expect(sent.stderr).toContain(refusal);
    expect(sent.stderr).not.toContain('line 2:');
    expect(sent.stdout).not.toContain('queued');
    expect(conversionOf('7811')).toMatchObject({ status: 'pending', amount: 4_990, amountHistory: [] });
  });

  it('sends such a row once it names its currency', async () => {
    // Prepare
    const csv = csvFile(
      local.dir,
      'unknown-with-currency.csv',
      'externalId,refundId,amount,full,source,currency',
      ['7818,RF-7818-1,5.00,,generic,EUR'],
    );
    // Act
    const sent = await cli('refund', '--csv', csv);
    // Assess
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.stdout).toContain('202 queued');
  });

  it('refuses a currency other than the one the ledger has for the order, full rows included: exit 2', async () => {
    // Prepare: 7812 and 7813 are EUR orders
    await placeOrder('7812');
    await placeOrder('7813');
    const csv = csvFile(local.dir, 'other-currency.csv', 'externalId,refundId,amount,full,source,currency', [
      '7812,RF-7812-1,5.00,,generic,EUR',
      '7813,RF-7813-1,5.00,,generic,USD',
      '7813,RF-7813-F,,true,generic,usd',
    ]);
    // Act
    const sent = await cli('refund', '--csv', csv);
    await local.stack.waitForIdle();
    // Assess
    expect(sent.code, sent.stdout).toBe(2);
    expect(sent.stderr).toContain('line 3: currency: the order is in EUR, not USD');
    expect(sent.stderr).toContain('line 4: currency: the order is in EUR, not USD');
    expect(sent.stderr).not.toContain('line 2:');
    expect(sent.stdout).not.toContain('queued');
    expect(conversionOf('7812')).toMatchObject({ status: 'pending', amount: 4_990, amountHistory: [] });
    expect(conversionOf('7813')).toMatchObject({ status: 'pending', amount: 4_990 });
  });

  it('refuses the same with flags, naming --currency', async () => {
    // Prepare
    await placeOrder('7814');
    // Act
    const sent = await cli(
      'refund',
      '--external-id',
      '7814',
      '--refund-id',
      'RF-7814-1',
      '--amount',
      '5.00',
      '--currency',
      'GBP',
    );
    // Assess
    expect(sent.code, sent.stdout).toBe(2);
    expect(sent.stderr).toContain('--currency: the order is in EUR, not GBP');
    expect((await recordOf('7814'))?.refunds).toEqual({});
  });
});

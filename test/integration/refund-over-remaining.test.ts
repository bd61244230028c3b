import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ledgerKey } from '../../shared/ledger.ts';
import { localStackForCli, runCli } from '../support/cli.ts';
import { post, sampleFixture, shopifyWebhook } from '../support/webhooks.ts';

/**
 * Issue 12 item 6: a typo in a finance refund (`--amount 1000.00` where 43.90 is left) must not
 * refuse the conversion, and money shown to people is in the currency's decimals.
 */

const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';

const local = localStackForCli();

const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });
const conversionOf = (externalId: string) =>
  (local.stack.sandbox?.control.conversions() ?? []).find((c) => c.externalId === externalId);
const program = () => local.stack.sources.get('shopify')?.program ?? '';

/** A USD 587.00 Shopify order (the docs sample with a click id), as a conversion. */
async function placeOrder(orderId: string): Promise<void> {
  const sent = await cli('send', 'shopify', '--order-id', orderId, '--click-id', CLICK, '--ip', IP);
  expect(sent.code, sent.stderr).toBe(0);
  await local.stack.waitForIdle();
}

/** The order with USD 543.10 refunded by finance: USD 43.90 left. */
async function orderWith4390Left(orderId: string): Promise<void> {
  await placeOrder(orderId);
  const refunded = await cli(
    'refund',
    '--external-id',
    orderId,
    '--refund-id',
    `RF-${orderId}-1`,
    '--amount',
    '543.10',
  );
  expect(refunded.code, refunded.stderr).toBe(0);
  expect(refunded.stdout).toMatch(
    new RegExp(
      `order ${orderId} {2}refund RF-${orderId}-1 {2}→ 202 queued {2}message \\S+ {2}USD 543\\.10\n`,
    ),
  );
  await local.stack.waitForIdle();
  expect(conversionOf(orderId)?.amount).toBe(4_390);
}

describe('a partial refund larger than what remains', () => {
  it('is a 400 naming amount and what remains at POST /refunds, and the conversion keeps its amount', async () => {
    // Prepare
    await orderWith4390Left('6101');
    // Act
    const res = await fetch(`${local.stack.url}/refunds`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-api-key': String(local.stack.secrets['FINANCE_API_KEY']),
      },
      body: JSON.stringify({ externalId: '6101', refundId: 'RF-6101-typo', amount: '1000.00' }),
    });
    const body = (await res.json()) as Record<string, unknown>;
    await local.stack.waitForIdle();
    // Assess
    expect(res.status).toBe(400);
    expect(body).toMatchObject({ field: 'amount', message: expect.stringContaining('USD 43.90 remains') });
    expect(conversionOf('6101')).toMatchObject({ status: 'pending', amount: 4_390 });
  });

  it('is refused by connector refund before sending, dry run and CSV included, naming the flag and what remains', async () => {
    // Prepare
    await orderWith4390Left('6102');
    const csv = join(local.dir, 'typo.csv');
    writeFileSync(csv, 'externalId,refundId,amount\n6102,RF-6102-2,10.00\n6102,RF-6102-3,1000.00\n');
    // Act
    const flags = await cli(
      'refund',
      '--external-id',
      '6102',
      '--refund-id',
      'RF-6102-typo',
      '--amount',
      '1000.00',
    );
    const dryRun = await cli(
      'refund',
      '--external-id',
      '6102',
      '--refund-id',
      'RF-6102-typo',
      '--amount-cents',
      '100000',
      '--dry-run',
    );
    const file = await cli('refund', '--csv', csv);
    const full = await cli(
      'refund',
      '--external-id',
      '6102',
      '--refund-id',
      'RF-6102-full',
      '--full',
      '--dry-run',
    );
    await local.stack.waitForIdle();
    // Assess
    expect(flags.code).toBe(2);
    expect(flags.stderr).toContain(
      '--amount: USD 1000.00 is more than is left of order 6102: USD 43.90 remains',
    );
    expect(dryRun.code).toBe(2);
    expect(dryRun.stderr).toContain('--amount-cents: USD 1000.00 is more than is left');
    expect(dryRun.stdout).not.toContain('would POST');
    expect(file.code).toBe(2);
    expect(file.stderr).toContain(
      'line 3: amount: USD 1000.00 is more than is left of order 6102: USD 33.90 remains after line 2 of this file (USD 10.00)',
    );
    expect(full.code, full.stderr).toBe(0);
    expect(conversionOf('6102')).toMatchObject({ status: 'pending', amount: 4_390 });
  });

  it('counts the earlier rows of a CSV for the same order, so that rows which fit alone but not together send nothing', async () => {
    // Prepare: USD 43.90 left; two refunds of 30.00 each fit alone, not together (the second would
    // reach the worker before the first is recorded, and refuse the conversion).
    await orderWith4390Left('6105');
    const csv = join(local.dir, 'together.csv');
    writeFileSync(
      csv,
      'externalId,refundId,amount\n6105,RF-6105-2,30.00\n6105,RF-6105-3,30.00\n6101,RF-6101-9,1.00\n',
    );
    // Act
    const file = await cli('refund', '--csv', csv, '--dry-run');
    const sent = await cli('refund', '--csv', csv);
    await local.stack.waitForIdle();
    // Assess
    expect(file.code).toBe(2);
    expect(file.stderr).toContain(
      'line 3: amount: USD 30.00 is more than is left of order 6105: USD 13.90 remains after line 2 of this file (USD 30.00)',
    );
    expect(file.stderr).not.toContain('line 2:');
    expect(sent.code).toBe(2);
    expect(conversionOf('6105')).toMatchObject({ status: 'pending', amount: 4_390 });
  });

  it('refuses a CSV whose amount has more decimals than its order’s currency before sending any row (exit 2, naming the line)', async () => {
    // Prepare: a USD order; the file gives no currency column, so only the ledger knows USD.
    await orderWith4390Left('6107');
    const csv = join(local.dir, 'decimals.csv');
    writeFileSync(csv, 'externalId,refundId,amount\n6107,RF-6107-2,1.00\n6107,RF-6107-3,1.005\n');
    // Act
    const sent = await cli('refund', '--csv', csv);
    await local.stack.waitForIdle();
    // Assess
    expect(sent.code).toBe(2);
    expect(sent.stderr).toContain('line 3: amount: more than 2 decimals for USD');
    expect(conversionOf('6107')).toMatchObject({ status: 'pending', amount: 4_390 });
  });

  it('lets a CSV be sent again after a partial failure: rows already recorded do not count twice', async () => {
    // Prepare: the file's first row is the refund already applied (USD 543.10 of USD 587.00).
    await orderWith4390Left('6106');
    const csv = join(local.dir, 'again.csv');
    writeFileSync(
      csv,
      'externalId,refundId,amount\n6106,RF-6106-1,543.10\n6106,RF-6106-2,20.00\n6106,RF-6106-3,20.00\n',
    );
    // Act
    const sent = await cli('refund', '--csv', csv);
    await local.stack.waitForIdle();
    // Assess
    expect(sent.code, sent.stderr).toBe(0);
    expect(conversionOf('6106')).toMatchObject({ status: 'pending', amount: 390 });
  });
});

describe('money in what the worker writes for people', () => {
  it('states the amount after a partial refund in decimals on the platform', async () => {
    // Prepare / Act
    await orderWith4390Left('6103');
    // Assess
    expect(conversionOf('6103')?.amountHistory.at(-1)?.reason).toBe(
      'partial refund RF-6103-1: amount now USD 43.90',
    );
  });

  it('states by how much shop refunds exceed the conversion in decimals', async () => {
    // Prepare: the docs refund (USD 391.33 net) twice, under two refund ids, on a USD 587.00 order.
    // The second names lines the ledger did not keep (added by an order edit), so it counts its own
    // money: the order's own lines cannot be refunded past their quantity.
    await placeOrder('6104');
    const secret = local.stack.secrets['SHOPIFY_WEBHOOK_SECRET'] ?? '';
    const refund = JSON.parse(sampleFixture('shopify/refund_2026-07_docs_example_two_lines.json')) as Record<
      string,
      unknown
    >;
    const editedLines = (refund['refund_line_items'] as Record<string, unknown>[]).map((line, i) => {
      const { line_item: _item, ...rest } = line;
      return { ...rest, line_item_id: 990_000_001 + i };
    });
    // Act
    for (const id of ['7100001', '7100002']) {
      const lines = id === '7100002' ? { refund_line_items: editedLines } : {};
      const body = JSON.stringify({ ...refund, ...lines, id: Number(id), order_id: 6104 });
      const answer = await post(
        `${local.stack.url}/webhooks/shopify`,
        shopifyWebhook(body, secret, 'refunds/create'),
      );
      expect(answer.status).toBe(202);
      await local.stack.waitForIdle();
    }
    // Assess: 2 × 391.33 − 587.00 = 195.66
    const record = await local.stack.ledger.get(ledgerKey(program(), '6104'));
    expect(record?.refunds['7100002']?.outcome).toBe(
      'refunds exceed the conversion amount by USD 195.66: conversion refused',
    );
    expect(conversionOf('6104')?.status).toBe('refused');
  });
});

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import dynalite from 'dynalite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulators } from '../../infra/local/emulators.ts';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { LOCAL_AWS, LOCAL_TABLE_NAME } from '../../local/defaults.ts';
import { DEFAULT_SEED } from '../../sandbox/server.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import { ledgerKey, type OrderRecord, recordRefund } from '../../shared/ledger.ts';
import { localStateDir, runCli } from '../support/cli.ts';
import { peekQueue } from '../support/sqs-records.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

/**
 * Issue 17, part 2: conversions of a source with `acceptAfterDays` are accepted on the platform once
 * the order is older than that, by the scheduled job (here run as the local stack runs it) and by
 * `connector accept`. The ledger finds them through its sparse due-date index (dynalite's GSI).
 */
const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const IP = '203.0.113.7';
const DAY = 86_400_000;
const LONG_AGO = '2026-01-05T10:00:00.000Z';

let stack: LocalStack;
let program: string;

beforeAll(async () => {
  program = DEFAULT_SEED.programs[0]!;
  const rule = DEFAULT_SEED.rules[0]!;
  const common = { platform: 'generic' as const, program, rule, secretRef: 'GENERIC_WEBHOOK_SECRET' };
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    visibilityBaseSeconds: 1,
    sources: [
      { id: 'shop', ...common, acceptAfterDays: 30 },
      { id: 'old-shop', ...common, backend: 'legacy', acceptAfterDays: 30 },
      { id: 'manual-shop', ...common },
    ],
  });
});
afterAll(async () => {
  await stack?.close();
});

const secret = (name: string) => stack.secrets[name] ?? '';
const onPlatform = (externalId: string) =>
  (stack.sandbox?.control.conversions() ?? []).find((c) => c.externalId === externalId);

async function webhook(source: string, body: Record<string, unknown>): Promise<void> {
  const answer = await post(
    `${stack.url}/webhooks/${source}`,
    genericWebhook(JSON.stringify({ eventId: randomUUID(), ...body }), secret('GENERIC_WEBHOOK_SECRET')),
  );
  expect(answer.status).toBe(202);
  await stack.waitForIdle();
}

/** An order of 100.00 EUR placed at `orderDate`, added as a pending conversion. */
async function order(source: string, orderId: string, orderDate: string): Promise<void> {
  const legacy = source === 'old-shop';
  await webhook(source, {
    type: 'order',
    orderId,
    amount: '100.00',
    currency: 'EUR',
    orderDate,
    ...(legacy
      ? { affiliateTrackingId: stack.sandbox?.seed.trackingIds[0] }
      : { clickIds: [CLICK], buyerIp: IP }),
  });
  expect(onPlatform(orderId)?.status).toBe('pending');
}

/** The keys the ledger's due-date index holds for `source` now (DynamoDB Query on dynalite). */
async function dueKeys(source: string): Promise<readonly string[]> {
  const ledger = new DynamoLedger(stack.emulators.dynamo, stack.emulators.tableName);
  return (await ledger.dueForAccept(source, new Date().toISOString(), { limit: 1000 })).keys;
}

async function dlq() {
  return peekQueue(stack.emulators.sqs, stack.emulators.dlqUrl);
}

describe('accept after the return window', () => {
  it('accepts due conversions once, on the current and the legacy API: a second run accepts nothing', async () => {
    // Prepare
    await order('shop', 'A-1', LONG_AGO);
    await order('old-shop', 'A-2', LONG_AGO);

    // Act
    const first = await stack.runAccept();
    const second = await stack.runAccept();

    // Assess
    expect(first.items.filter((i) => i.result === 'accepted').map((i) => i.externalId)).toEqual(
      expect.arrayContaining(['A-1', 'A-2']),
    );
    expect(onPlatform('A-1')?.status).toBe('accepted');
    expect(onPlatform('A-2')?.status).toBe('accepted');
    const record = await stack.ledger.get(ledgerKey(program, 'A-1'));
    expect(record).toMatchObject({ state: 'added', acceptDueAt: '2026-02-04T10:00:00.000Z' });
    expect(record?.acceptedAt).toEqual(expect.any(String));
    expect(second.items.map((i) => i.externalId)).not.toContain('A-1');
    expect(second.items.map((i) => i.externalId)).not.toContain('A-2');
    expect(second.accepted).toBe(0);
    // Sparse: an accepted conversion has left the index itself, not only the job's answer.
    expect(await dueKeys('shop')).not.toContain(ledgerKey(program, 'A-1'));
    expect(await dueKeys('old-shop')).not.toContain(ledgerKey(program, 'A-2'));
  });

  it('leaves a refused order, one with a refund pending, one not yet due and one of a source without the window untouched', async () => {
    // Prepare
    await order('shop', 'B-refunded', LONG_AGO);
    await webhook('shop', { type: 'refund', orderId: 'B-refunded', refundId: 'r1', full: true });
    await order('shop', 'B-pending-refund', LONG_AGO);
    const held = await stack.ledger.get(ledgerKey(program, 'B-pending-refund'));
    if (!held) throw new Error('B-pending-refund not in the ledger');
    // A refund the worker has recorded and not applied yet (its platform call to be retried).
    recordRefund(held, {
      refundId: 'r-held',
      amount: 1000,
      full: false,
      origin: 'shop',
      source: 'shop',
      receivedAt: new Date().toISOString(),
      status: 'pending',
    });
    expect(await stack.ledger.update(held)).toBe(true);
    await order('shop', 'B-recent', new Date(Date.now() - DAY).toISOString());
    await order('manual-shop', 'B-manual', LONG_AGO);

    // Act
    const summary = await stack.runAccept();

    // Assess
    expect(onPlatform('B-refunded')?.status).toBe('refused');
    expect(onPlatform('B-pending-refund')?.status).toBe('pending');
    expect(onPlatform('B-recent')?.status).toBe('pending');
    expect(onPlatform('B-manual')?.status).toBe('pending');
    const byId = new Map(summary.items.map((i) => [i.externalId, i]));
    expect(byId.get('B-pending-refund')).toMatchObject({
      result: 'held',
      detail: expect.stringMatching(/refund/),
    });
    expect(byId.has('B-refunded')).toBe(false);
    expect(byId.has('B-recent')).toBe(false);
    expect(byId.has('B-manual')).toBe(false);
    expect(summary.dueLeft).toBeGreaterThanOrEqual(1);
    const due = await dueKeys('shop');
    expect(due).toContain(ledgerKey(program, 'B-pending-refund'));
    expect(due).not.toContain(ledgerKey(program, 'B-refunded'));
    expect(due).not.toContain(ledgerKey(program, 'B-recent'));
    expect(await dueKeys('manual-shop')).toEqual([]);
    expect((await stack.ledger.get(ledgerKey(program, 'B-recent')))?.acceptedAt).toBeUndefined();
  });

  it('accepts an order added while Conversion info failed: the job looks its id up', async () => {
    // Prepare: every Conversion info call fails while the order is added.
    stack.sandbox?.control.setFaults({
      errorRate: 1,
      errorStatus: 503,
      routes: ['/advertiser/conversions.info'],
    });
    try {
      await order('shop', 'L-1', LONG_AGO);
    } finally {
      stack.sandbox?.control.setFaults({});
    }

    // Act
    const run = await stack.runAccept();

    // Assess
    expect(run.items.find((i) => i.externalId === 'L-1')).toMatchObject({
      result: 'accepted',
      conversionId: onPlatform('L-1')?.id,
    });
    expect(onPlatform('L-1')?.status).toBe('accepted');
    expect(await stack.ledger.get(ledgerKey(program, 'L-1'))).toMatchObject({
      conversionId: onPlatform('L-1')?.id,
      acceptedAt: expect.any(String),
    });
  });

  it('parks a conversion the platform will not accept (refused there by hand) in the DLQ with the reason, once', async () => {
    // Prepare
    await order('shop', 'C-1', LONG_AGO);
    const conversion = onPlatform('C-1');
    await fetch(`${stack.platformUrl}/advertiser/conversions.refuse`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.sandbox?.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ program, id: conversion?.id, reason: 'fraud' }),
    });

    // Act
    const first = await stack.runAccept();
    const second = await stack.runAccept();

    // Assess
    expect(first.items.find((i) => i.externalId === 'C-1')).toMatchObject({ result: 'failed' });
    expect(second.items.find((i) => i.externalId === 'C-1')).toBeUndefined();
    const parked = (await dlq()).filter((m) => m.body['externalId'] === 'C-1');
    expect(parked).toHaveLength(1);
    expect(parked[0]?.attributes).toMatchObject({
      failureClass: 'permanent',
      eventType: 'ConversionAccept',
      externalId: 'C-1',
      source: 'shop',
      platformStatus: '422',
    });
    expect(parked[0]?.attributes['reason']).toMatch(/refused/);
    expect((await stack.ledger.get(ledgerKey(program, 'C-1')))?.acceptError).toMatch(/refused/);
  });

  it('connector accept --older-than 30d --dry-run lists and changes nothing; without --dry-run accepts', async () => {
    // Prepare
    await order('shop', 'D-1', LONG_AGO);
    const state = localStateDir(stack);
    try {
      // Act
      const dry = await runCli(['accept', '--older-than', '30d', '--dry-run'], { cwd: state.dir });
      const afterDry = onPlatform('D-1')?.status;
      const real = await runCli(['accept', '--older-than', '30d'], { cwd: state.dir });
      const again = await runCli(['accept', '--older-than', '30d'], { cwd: state.dir });

      // Assess
      expect(dry.code).toBe(0);
      expect(dry.stdout).toMatch(/D-1.*would accept/);
      expect(afterDry).toBe('pending');
      expect(real.code).toBe(0);
      expect(real.stdout).toMatch(/D-1.*accepted/);
      expect(real.stdout).toMatch(/accepted\s+\d+/);
      expect(onPlatform('D-1')?.status).toBe('accepted');
      expect(again.stdout).not.toMatch(/D-1/);
      const status = await runCli(['status', 'D-1', '--source', 'shop'], { cwd: state.dir });
      expect(status.stdout).toMatch(
        /accept\s+accepted 20\d\d-\d\d-\d\dT[\d:.]+Z \(due 2026-02-04T10:00:00.000Z\)/,
      );
    } finally {
      state.remove();
    }
  });

  it('connector accept --help names the flags', async () => {
    const help = await runCli(['accept', '--help'], { cwd: '/' });
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--older-than/);
    expect(help.stdout).toMatch(/--dry-run/);
  });
});

describe('a ledger kept in LOCAL_DATA_DIR by a version without the due-date index', () => {
  it('gets the index at start, holding the records already due', async () => {
    // Prepare: the table as an older local stack created it (no index), with one added record.
    const dir = mkdtempSync(join(tmpdir(), 'connector-ledger-'));
    try {
      const old = dynalite({ path: dir, createTableMs: 0 });
      await new Promise<void>((resolve) => old.listen(0, '127.0.0.1', () => resolve()));
      const client = new DynamoDBClient({
        endpoint: `http://127.0.0.1:${(old.address() as AddressInfo).port}`,
        region: LOCAL_AWS.region,
        credentials: LOCAL_AWS.credentials,
      });
      await client.send(
        new CreateTableCommand({
          TableName: LOCAL_TABLE_NAME,
          AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
          KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
          BillingMode: 'PAY_PER_REQUEST',
        }),
      );
      // dynalite answers CREATING first, even with createTableMs 0.
      while (
        (await client.send(new DescribeTableCommand({ TableName: LOCAL_TABLE_NAME }))).Table?.TableStatus !==
        'ACTIVE'
      );
      const now = new Date().toISOString();
      const record: OrderRecord = {
        key: ledgerKey('p', 'K-1'),
        program: 'p',
        externalId: 'K-1',
        source: 'shop',
        state: 'added',
        version: 0,
        conversionId: 'c0c0c0c0c0c0c0c0c0c0c0c0',
        originalAmount: 100,
        currentAmount: 100,
        refunds: {},
        acceptDueAt: '2026-02-04T10:00:00.000Z',
        createdAt: now,
        updatedAt: now,
      };
      expect(await new DynamoLedger(client, LOCAL_TABLE_NAME).create(record)).toBe(true);
      client.destroy();
      await new Promise<void>((resolve) => old.close(() => resolve()));

      // Act
      const emulators = await startEmulators({ dynamoPath: dir });
      try {
        const due = await new DynamoLedger(emulators.dynamo, emulators.tableName).dueForAccept('shop', now, {
          limit: 10,
        });

        // Assess
        expect(due.keys).toEqual([record.key]);
      } finally {
        await emulators.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

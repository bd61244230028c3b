import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type LocalStack, type LocalStackOptions, startLocalStack } from '../../infra/local/stack.ts';
import type { OrderRecord } from '../../shared/ledger.ts';
import type { Ledger } from '../../shared/ports.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

/**
 * The local stack wires each function with the builders the Lambda handlers use (issue 15): a setting
 * CDK gives the deployed worker means the same on this machine, and the defaults are the same.
 */

let stack: LocalStack | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await stack?.close();
  stack = undefined;
});

const CLICK = 'a1b2c3d4e5f60718293a4b5c';

async function placeOrder(running: LocalStack, orderId: string): Promise<void> {
  const body = JSON.stringify({
    type: 'order',
    orderId,
    amount: '49.90',
    currency: 'EUR',
    clickIds: [CLICK],
    buyerIp: '203.0.113.9',
  });
  const signed = genericWebhook(body, running.secrets['GENERIC_WEBHOOK_SECRET'] ?? '');
  const answer = await post(`${running.url}/webhooks/generic`, signed);
  expect(answer.status).toBe(202);
}

/** Starts a stack whose ledger reports, for each new record, how far ahead its add lease runs. */
async function stackRecordingLeases(
  options: LocalStackOptions,
): Promise<{ running: LocalStack; leaseAhead: number[] }> {
  const leaseAhead: number[] = [];
  const running = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    ...options,
    wrapLedger: (ledger: Ledger): Ledger => ({
      get: (key) => ledger.get(key),
      list: (program) => ledger.list(program),
      update: (record) => ledger.update(record),
      create: (record: OrderRecord) => {
        if (record.leaseUntil !== undefined) leaseAhead.push(record.leaseUntil - Date.now());
        return ledger.create(record);
      },
    }),
  });
  stack = running;
  return { running, leaseAhead };
}

describe('the local stack, wired like the deployed functions', () => {
  it('holds an add lease as long as the deployed worker does by default (120 s)', async () => {
    // Prepare
    const { running, leaseAhead } = await stackRecordingLeases({});
    // Act
    await placeOrder(running, 'W-1');
    await running.waitForIdle();
    // Assess: the lease was set a moment before the ledger write, so it runs a little under 120 s.
    expect(leaseAhead).toHaveLength(1);
    expect(leaseAhead[0]).toBeGreaterThan(110_000);
    expect(leaseAhead[0]).toBeLessThanOrEqual(120_000);
  });

  it('follows LEASE_MS as the deployed worker does', async () => {
    // Prepare
    const { running, leaseAhead } = await stackRecordingLeases({ env: { LEASE_MS: '90000' } });
    // Act
    await placeOrder(running, 'W-2');
    await running.waitForIdle();
    // Assess
    expect(leaseAhead).toHaveLength(1);
    expect(leaseAhead[0]).toBeGreaterThan(80_000);
    expect(leaseAhead[0]).toBeLessThanOrEqual(90_000);
  });

  it('gives the functions the deployed AWS clients: each command’s middleware chain built once, not per call', async () => {
    // Prepare: the builders the Lambda handlers use (sqsClient, dynamoClient) cache each command
    // type's chain; a plain SDK client, as the stack gave the functions until 2026-11-28, builds it
    // on every call (and runs the SDK's logger middleware, and has no time budget).
    stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, autoPoll: false });
    const sends = vi.spyOn(SendMessageCommand.prototype, 'resolveMiddleware');
    const gets = vi.spyOn(GetItemCommand.prototype, 'resolveMiddleware');
    const puts = vi.spyOn(PutItemCommand.prototype, 'resolveMiddleware');
    // Act: four orders through the webhook, then the worker adds them (its ledger reads and writes).
    for (const id of ['W-4', 'W-5', 'W-6', 'W-7']) await placeOrder(stack, id);
    stack.startPolling();
    await stack.waitForIdle();
    // Assess
    expect(stack.sandbox?.control.conversions()).toHaveLength(4);
    expect(sends).toHaveBeenCalledTimes(1);
    expect(gets.mock.calls.length).toBeLessThanOrEqual(1);
    expect(puts).toHaveBeenCalledTimes(1);
  });

  it('follows AFFILIATE_ROUTES: an add sent to a path the platform does not serve is parked naming it', async () => {
    // Prepare
    stack = await startLocalStack({
      port: 0,
      sandbox: { port: 0 },
      env: { AFFILIATE_ROUTES: JSON.stringify({ 'conversions.add': '/advertiser/moved/conversions.add' }) },
    });
    // Act
    await placeOrder(stack, 'W-3');
    await stack.waitForIdle();
    // Assess
    expect(stack.sandbox?.control.conversions()).toEqual([]);
    const dlq = await stack.emulators.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: stack.emulators.dlqUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
      }),
    );
    expect(dlq.Messages).toHaveLength(1);
    expect(dlq.Messages?.[0]?.MessageAttributes?.['reason']?.StringValue).toContain(
      '/advertiser/moved/conversions.add',
    );
  });
});

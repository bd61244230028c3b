import { DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Emulators, startEmulators } from '../../infra/local/emulators.ts';
import { LOCAL_AWS } from '../../local/defaults.ts';
import {
  awsClientConfig,
  dynamoClient,
  secretsManagerClient,
  sqsClient,
} from '../../shared/adapters/aws-clients.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import type { OrderRecord } from '../../shared/ledger.ts';

/**
 * Issue 16 (where the worker's time goes): the AWS SDK's share of a worker's CPU is the largest, and
 * part of it was rebuilding each command's middleware chain on every call. The clients the functions
 * build cache it per command type (`cacheMiddleware`), and the ledger sends without per-call options
 * when it has none to give (options on a call turn the cache off for that call). They also leave out
 * the SDK's logger middleware, which on every call filtered the input and the output for sensitive
 * fields to hand them to a logger that discards them (no function gives its clients a logger).
 */

let emulators: Emulators;
beforeAll(async () => {
  emulators = await startEmulators();
});
afterEach(() => {
  vi.restoreAllMocks();
});
afterAll(async () => {
  await emulators?.close();
});

const record = (externalId: string): OrderRecord => ({
  key: `p#${externalId}`,
  program: 'p',
  externalId,
  source: 'shop',
  state: 'adding',
  originalAmount: 100,
  currentAmount: 100,
  currency: 'EUR',
  refunds: {},
  createdAt: '2026-05-01T10:00:00.000Z',
  updatedAt: '2026-05-01T10:00:00.000Z',
  version: 0,
});

describe('the functions’ AWS clients', () => {
  it('build each command’s middleware chain once, not on every call', async () => {
    const client = new DynamoDBClient({
      ...awsClientConfig(),
      ...LOCAL_AWS,
      endpoint: emulators.dynamoEndpoint,
    });
    const ledger = new DynamoLedger(client, emulators.tableName);
    const gets = vi.spyOn(GetItemCommand.prototype, 'resolveMiddleware');
    const puts = vi.spyOn(PutItemCommand.prototype, 'resolveMiddleware');

    for (let i = 0; i < 5; i++) {
      const r = record(`cost-${i}`);
      expect(await ledger.create(r)).toBe(true);
      expect((await ledger.get(r.key))?.version).toBe(1);
      expect(await ledger.update(r)).toBe(true);
      expect(await ledger.update({ ...r, version: 1 })).toBe(false);
    }

    expect(gets).toHaveBeenCalledTimes(1);
    expect(puts).toHaveBeenCalledTimes(1);
    client.destroy();
  });

  it('still bound a call by the options a caller gives (the CLI’s own timeout)', async () => {
    const client = new DynamoDBClient({
      ...awsClientConfig(),
      ...LOCAL_AWS,
      endpoint: emulators.dynamoEndpoint,
    });
    const ledger = new DynamoLedger(client, emulators.tableName, {
      callOptions: () => ({ abortSignal: AbortSignal.abort() }),
    });
    await expect(ledger.get('p#cost-0')).rejects.toThrow(/abort/i);
    client.destroy();
  });

  it('leave out the SDK’s logger middleware, and still answer', async () => {
    const local = { ...LOCAL_AWS, endpoint: emulators.dynamoEndpoint };
    for (const client of [
      sqsClient(),
      dynamoClient(),
      secretsManagerClient(),
      dynamoClient(undefined, local),
    ]) {
      const steps = client.middlewareStack.identify();
      expect(steps.some((step) => step.startsWith('serializerMiddleware'))).toBe(true);
      expect(steps.filter((step) => step.startsWith('loggerMiddleware'))).toEqual([]);
      client.destroy();
    }
    const client = dynamoClient(undefined, local);
    const ledger = new DynamoLedger(client, emulators.tableName);
    const r = record('lean-0');
    expect(await ledger.create(r)).toBe(true);
    expect((await ledger.get(r.key))?.externalId).toBe('lean-0');
    client.destroy();
  });
});

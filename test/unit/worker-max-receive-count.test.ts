import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { buildWorkerDeps } from '../../functions/worker.ts';
import { ConfigurationError } from '../../shared/errors.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';

/**
 * MAX_RECEIVE_COUNT: the main queue's redrive maxReceiveCount, which the stack gives the worker so
 * that it parks a message still failing transiently on its last receive, with a reason. Read and
 * checked at cold start, like every other setting of the worker. No call is made: the clients are
 * only built.
 */

const PROGRAM = '0123456789abcdef01234567';
const RULE = '0123456789abcdef01234568';
const ENV = {
  SOURCES: JSON.stringify([
    { id: 'shop', platform: 'generic', program: PROGRAM, rule: RULE, secretRef: 'S' },
  ]),
  LEDGER_TABLE: 'connector-ledger',
  QUEUE_URL: 'http://127.0.0.1:9/000000000000/connector-events.fifo',
  DLQ_URL: 'http://127.0.0.1:9/000000000000/connector-events-dlq.fifo',
  AFFILIATE_BASE_URL: 'http://127.0.0.1:9',
  AFFILIATE_TOKEN_SECRET: 'AFFILIATE_TOKEN',
};

function build(env: Record<string, string>) {
  const aws = { region: 'eu-west-1', credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'x' } };
  return buildWorkerDeps({
    sqs: new SQSClient(aws),
    dynamo: new DynamoDBClient(aws),
    secrets: new EnvSecretStore({ AFFILIATE_TOKEN: 'platform-token-0123456789' }),
    env: { ...ENV, ...env },
  });
}

describe('the worker’s MAX_RECEIVE_COUNT setting', () => {
  it('is the stack’s default queue.maxReceiveCount, 6, when not set', async () => {
    expect((await build({})).maxReceiveCount).toBe(6);
  });

  it('follows the queue’s maxReceiveCount the stack gives it', async () => {
    expect((await build({ MAX_RECEIVE_COUNT: '8' })).maxReceiveCount).toBe(8);
  });

  it.each(['abc', '0', '-3', '6.5', '1001'])(
    'refuses MAX_RECEIVE_COUNT=%s at cold start, naming it',
    async (value) => {
      const built = build({ MAX_RECEIVE_COUNT: value });

      await expect(built).rejects.toBeInstanceOf(ConfigurationError);
      await expect(built).rejects.toThrow(
        `setting MAX_RECEIVE_COUNT must be a whole number from 1 to 1000 (the main queue's maxReceiveCount), got "${value}"`,
      );
    },
  );
});

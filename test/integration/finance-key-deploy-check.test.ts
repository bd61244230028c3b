import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeHandler } from '../../infra/finance-key-check-handler.ts';
import {
  type FakeSecretsManager,
  secretsManagerClientFor,
  startFakeSecretsManager,
} from '../support/fake-secrets-manager.ts';

const SHORT_KEY = 'short,key;with [brackets]';
const LONG_KEY = 'k'.repeat(20) + ',; []{}' + 'x'.repeat(20);

let fake: FakeSecretsManager;
let client: SecretsManagerClient;

beforeAll(async () => {
  fake = await startFakeSecretsManager({
    'connector/finance-short': SHORT_KEY,
    'connector/finance-long': LONG_KEY,
    'connector/finance-rotated': { AWSCURRENT: SHORT_KEY, AWSPREVIOUS: LONG_KEY },
  });
  client = secretsManagerClientFor(fake);
});
afterAll(async () => {
  client?.destroy();
  await fake?.close();
});

function event(
  requestType: 'Create' | 'Update' | 'Delete',
  secretId: string,
): CloudFormationCustomResourceEvent {
  const common = {
    ServiceToken: 'arn:aws:lambda:us-east-1:000000000000:function:provider',
    ResponseURL: 'https://example.invalid/response',
    StackId: 'arn:aws:cloudformation:us-east-1:000000000000:stack/ConversionConnector/1',
    RequestId: 'request-1',
    LogicalResourceId: 'FinanceKeyCheck',
    ResourceType: 'Custom::FinanceKeyCheck',
    ResourceProperties: { ServiceToken: 'token', SecretId: secretId, DeployedAt: '2' },
  };
  if (requestType === 'Create') return { ...common, RequestType: 'Create' };
  const physical = { PhysicalResourceId: `finance-key-check:${secretId}` };
  if (requestType === 'Update')
    return {
      ...common,
      ...physical,
      RequestType: 'Update',
      OldResourceProperties: { ServiceToken: 'token', SecretId: secretId, DeployedAt: '1' },
    };
  return { ...common, ...physical, RequestType: 'Delete' };
}

describe('the deploy-time check of the finance key', () => {
  it.each(['Create', 'Update'] as const)(
    'fails the deployment on %s when the key is shorter than 32 characters, naming the secret and the length, not the value',
    async (requestType) => {
      const handler = makeHandler({ client });

      const outcome = handler(event(requestType, 'connector/finance-short'));

      const error = await outcome.then(
        () => undefined,
        (e: unknown) => e as Error,
      );

      expect(error?.message).toBe(
        `finance API key secret connector/finance-short holds ${SHORT_KEY.length} characters; at least 32 are required: put a longer value (openssl rand -base64 48) and deploy again`,
      );
      expect(error?.message).not.toContain('short,key');
    },
  );

  it('passes a key of 32 characters or more and returns only its length', async () => {
    const handler = makeHandler({ client });

    const result = await handler(event('Create', 'connector/finance-long'));

    expect(result).toEqual({
      PhysicalResourceId: 'finance-key-check:connector/finance-long',
      Data: { Length: LONG_KEY.length },
    });
    expect(JSON.stringify(result)).not.toContain(LONG_KEY);
  });

  it('reads the AWSCURRENT version: a long previous key does not excuse a short current one', async () => {
    const handler = makeHandler({ client });
    const calls = fake.calls.length;

    const outcome = handler(event('Update', 'connector/finance-rotated'));

    await expect(outcome).rejects.toThrow(`holds ${SHORT_KEY.length} characters`);
    expect(fake.calls.slice(calls)).toMatchObject([
      { action: 'GetSecretValue', secretId: 'connector/finance-rotated', versionStage: 'AWSCURRENT' },
    ]);
  });

  it('fails with a clear message when the secret cannot be read, and says how to turn the check off', async () => {
    const handler = makeHandler({ client });

    const outcome = handler(event('Create', 'connector/does-not-exist'));

    await expect(outcome).rejects.toThrow(
      /cannot read the finance API key secret connector\/does-not-exist \(ResourceNotFoundException\).*checkFinanceKeyAtDeploy/,
    );
  });

  it('does nothing on Delete: removing the stack never reads the secret', async () => {
    const handler = makeHandler({ client });
    const calls = fake.calls.length;

    const result = await handler(event('Delete', 'connector/does-not-exist'));

    expect(result).toEqual({ PhysicalResourceId: 'finance-key-check:connector/does-not-exist' });
    expect(fake.calls.length).toBe(calls);
  });
});

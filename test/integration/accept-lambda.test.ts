import { randomUUID } from 'node:crypto';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AcceptHandler } from '../../functions/accept.ts';
import type { LocalStack } from '../../infra/local/stack.ts';
import { DEFAULT_SEED } from '../../sandbox/server.ts';
import { type FakeSecretsManager, startFakeSecretsManager } from '../support/fake-secrets-manager.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

/**
 * The accept function's Lambda entry point (`handler`), as the hourly EventBridge rule invokes it:
 * wired at its cold start from the environment CDK gives it (the worker's settings and
 * ACCEPT_MAX_PER_RUN), the token from Secrets Manager, the SDK on the emulators, its counts flushed
 * as EMF metrics. The job itself is tested in accept.test.ts.
 */
const TOKEN_SECRET = 'connector/affiliate-token';
const NAMESPACE = 'ConnectorAccept';
const SERVICE = 'connector-accept';
const program = DEFAULT_SEED.programs[0]!;
const rule = DEFAULT_SEED.rules[0]!;

let stack: LocalStack;
let secretsManager: FakeSecretsManager;
let handler: AcceptHandler;
const savedEnv = { ...process.env };
const written: string[] = [];

/** What EventBridge hands a function on a schedule. */
const scheduledEvent = {
  version: '0',
  id: randomUUID(),
  'detail-type': 'Scheduled Event',
  source: 'aws.events',
  account: '000000000000',
  time: new Date().toISOString(),
  region: 'us-east-1',
  resources: ['arn:aws:events:us-east-1:000000000000:rule/AcceptSchedule'],
  detail: {},
};

function context(): Context {
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: 'connector-accept',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:us-east-1:000000000000:function:connector-accept',
    memoryLimitInMB: '512',
    awsRequestId: randomUUID(),
    logGroupName: '/aws/lambda/connector-accept',
    logStreamName: '2026/11/23/[$LATEST]0123456789abcdef',
    getRemainingTimeInMillis: () => 300_000,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** Sum of each metric over the EMF lines written since `from`. */
function metricTotals(from: number): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const line of written.slice(from).flatMap((text) => text.split('\n'))) {
    if (!line.startsWith('{"_aws"')) continue;
    const blob = JSON.parse(line) as Record<string, unknown> & {
      _aws: { CloudWatchMetrics: { Namespace: string; Metrics: { Name: string }[] }[] };
    };
    for (const directive of blob._aws.CloudWatchMetrics) {
      expect(directive.Namespace).toBe(NAMESPACE);
      for (const { Name } of directive.Metrics) totals[Name] = (totals[Name] ?? 0) + Number(blob[Name]);
    }
  }
  return totals;
}

beforeAll(async () => {
  const source = {
    id: 'shop',
    platform: 'generic' as const,
    program,
    rule,
    secretRef: 'GENERIC_WEBHOOK_SECRET',
    acceptAfterDays: 30,
  };
  // Read by the functions' modules when they load (a Lambda's init phase): set before the local
  // stack, which imports them, is imported.
  Object.assign(process.env, {
    POWERTOOLS_SERVICE_NAME: SERVICE,
    POWERTOOLS_METRICS_NAMESPACE: NAMESPACE,
    POWERTOOLS_LOG_LEVEL: 'INFO',
  });
  const { startLocalStack } = await import('../../infra/local/stack.ts');
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, sources: [source] });
  const answer = await post(
    `${stack.url}/webhooks/shop`,
    genericWebhook(
      JSON.stringify({
        type: 'order',
        eventId: randomUUID(),
        orderId: 'L-1',
        amount: '100.00',
        currency: 'EUR',
        orderDate: '2026-01-05T10:00:00.000Z',
        clickIds: ['a1b2c3d4e5f60718293a4b5c'],
        buyerIp: '203.0.113.7',
      }),
      stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '',
    ),
  );
  expect(answer.status).toBe(202);
  await stack.waitForIdle();
  secretsManager = await startFakeSecretsManager({ [TOKEN_SECRET]: stack.sandbox?.token ?? '' });

  // What CDK sets for the accept function (infra/connector-stack.ts) and Lambda for every function.
  const onSqsEndpoint = (url: string) => url.replace(/^https?:\/\/[^/]+/, stack.emulators.sqsEndpoint);
  Object.assign(process.env, {
    SECRETS_MAX_AGE_SECONDS: '300',
    SOURCES: JSON.stringify([{ ...source, secretRef: 'connector/webhooks/shop' }]),
    LEDGER_TABLE: stack.emulators.tableName,
    QUEUE_URL: onSqsEndpoint(stack.emulators.queueUrl),
    DLQ_URL: onSqsEndpoint(stack.emulators.dlqUrl),
    AFFILIATE_BASE_URL: stack.platformUrl,
    AFFILIATE_TOKEN_SECRET: TOKEN_SECRET,
    AFFILIATE_RATE_PER_SECOND: '100',
    AFFILIATE_INITIAL_RATE_PER_SECOND: '4',
    LEGACY_BASE_URL: stack.platformUrl,
    ACCEPT_MAX_PER_RUN: '500',
    AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'ASIAEXAMPLEEXAMPLE',
    AWS_SECRET_ACCESS_KEY: 'example-secret-access-key',
    AWS_SESSION_TOKEN: 'example-session-token',
    AWS_ENDPOINT_URL_SQS: stack.emulators.sqsEndpoint,
    AWS_ENDPOINT_URL_DYNAMODB: stack.emulators.dynamoEndpoint,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: secretsManager.endpoint,
  });
  for (const key of ['POWERTOOLS_DEV', 'POWERTOOLS_METRICS_DISABLED', 'AWS_PROFILE']) delete process.env[key];
  // Powertools prints through its own Console on process.stdout.
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    written.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return true;
  });
  handler = (await import('../../functions/accept.ts')).handler;
});

afterAll(async () => {
  vi.restoreAllMocks();
  for (const key of Object.keys(process.env)) if (!(key in savedEnv)) delete process.env[key];
  Object.assign(process.env, savedEnv);
  await secretsManager?.close();
  await stack?.close();
});

describe('the accept function, as the hourly schedule invokes it', () => {
  it('accepts the due conversion, reports it as metrics, and accepts nothing the next hour', async () => {
    const first = await handler(scheduledEvent, context());
    const afterFirst = written.length;
    const second = await handler(scheduledEvent, context());

    expect(first).toEqual({ accepted: 1, failed: 0, held: 0, dueLeft: 0 });
    expect(second).toEqual({ accepted: 0, failed: 0, held: 0, dueLeft: 0 });
    expect(stack.sandbox?.control.conversions().find((c) => c.externalId === 'L-1')?.status).toBe('accepted');
    expect(metricTotals(0)).toMatchObject({ ConversionsAccepted: 1, AcceptFailures: 0, AcceptDueLeft: 0 });
    expect(metricTotals(afterFirst)).toMatchObject({ ConversionsAccepted: 0 });
    expect(
      secretsManager.calls.filter((c) => c.action === 'GetSecretValue').map((c) => c.secretId),
    ).toContain(TOKEN_SECRET);
  });
});

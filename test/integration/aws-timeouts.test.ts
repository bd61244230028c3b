import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AWS_TIMEOUT_MS } from '../../cli/context.ts';
import { LAMBDA_AWS_BUDGET } from '../../shared/adapters/aws-clients.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import { ConfigurationError } from '../../shared/errors.ts';
import { AwsSecretStore } from '../../shared/secrets.ts';
import { emptyDir, runCli, statusOf1001 } from '../support/cli.ts';
import { type FakeSecretsManager, startFakeSecretsManager } from '../support/fake-secrets-manager.ts';
import { type HungServer, startHungServer } from '../support/hung-server.ts';
import { timed } from '../support/timed.ts';
import { sampleFixture, shopifyWebhook } from '../support/webhooks.ts';

/**
 * Every AWS call is bounded in time: an endpoint that accepts connections and never answers (the
 * real SDK clients against a hung TCP server on port 0) is given up on within the caller's budget,
 * and turned into the answer the caller promises (a 503 to the shop, an error line from the CLI).
 *
 * The bounds below are timings by nature. Each is asserted with a wide margin over the expected
 * time (stated beside it), so a loaded machine does not fail them, while a missing timeout (the
 * SDK's default is none: the call waits until the Lambda or the test is killed) always does.
 */

const PROGRAM = '0123456789abcdef01234567';
const RULE = '76543210fedcba9876543210';
const WEBHOOK_SECRET = 'aws-timeouts-shopify-secret';
/** What Lambda gives every function: region and credentials in the environment. */
const LAMBDA_ENV = {
  AWS_REGION: 'us-east-1',
  AWS_DEFAULT_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'ASIAEXAMPLEEXAMPLE',
  AWS_SECRET_ACCESS_KEY: 'example-secret-access-key',
  POWERTOOLS_METRICS_DISABLED: 'true',
  POWERTOOLS_LOG_LEVEL: 'SILENT',
};
/** One hung call of a Lambda function: every attempt times out, plus the retry's backoff (≤ 0.2 s). */
const LAMBDA_CALL_MS = LAMBDA_AWS_BUDGET.maxAttempts * LAMBDA_AWS_BUDGET.requestTimeoutMs + 200;

let hung: HungServer;
let secretsManager: FakeSecretsManager;
const savedEnv = { ...process.env };

beforeAll(async () => {
  hung = await startHungServer();
  secretsManager = await startFakeSecretsManager({ 'connector/webhooks/shopify': WEBHOOK_SECRET });
});
afterEach(() => {
  // vitest runs each file in its own process (pool 'forks'); this only keeps the tests apart.
  for (const key of Object.keys(process.env)) if (!(key in savedEnv)) delete process.env[key];
  Object.assign(process.env, savedEnv);
});
afterAll(async () => {
  await hung?.close();
  await secretsManager?.close();
});

function shopifyOrderEvent(): APIGatewayProxyEventV2 {
  const signed = shopifyWebhook(
    sampleFixture('shopify/order_2026-07_docs_example.json'),
    WEBHOOK_SECRET,
    'orders/create',
  );
  return {
    version: '2.0',
    routeKey: 'POST /webhooks/{source}',
    rawPath: '/webhooks/shopify',
    rawQueryString: '',
    headers: signed.headers,
    pathParameters: { source: 'shopify' },
    body: signed.body,
    isBase64Encoded: false,
    requestContext: {} as APIGatewayProxyEventV2['requestContext'],
  } as APIGatewayProxyEventV2;
}

describe('the Lambda functions (LAMBDA_AWS_BUDGET)', () => {
  it('budgets a hung call well within Shopify’s 5 s, and two (a cold start) within the webhook’s 10 s', () => {
    expect(LAMBDA_CALL_MS).toBeLessThan(4_000);
    expect(2 * LAMBDA_CALL_MS).toBeLessThan(8_000);
  });

  it('webhook (as deployed): answers 503 with retry-after within Shopify’s 5 s when SQS hangs', async () => {
    // Prepare: what CDK and Lambda give the webhook; the secret is readable, SQS never answers.
    Object.assign(process.env, LAMBDA_ENV, {
      AWS_ENDPOINT_URL_SQS: hung.endpoint,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: secretsManager.endpoint,
      SOURCES: JSON.stringify([
        {
          id: 'shopify',
          platform: 'shopify',
          program: PROGRAM,
          rule: RULE,
          secretRef: 'connector/webhooks/shopify',
        },
      ]),
      SECRETS_MAX_AGE_SECONDS: '300',
      QUEUE_URL: `${hung.endpoint}/000000000000/connector-events.fifo`,
    });
    const { handler } = await import('../../functions/webhook.ts');
    const before = hung.connections();

    // Act: expected after ~3.2 s (LAMBDA_CALL_MS); without a timeout it would wait past the 12 s.
    const outcome = await timed(handler(shopifyOrderEvent()), 12_000);

    // Assess
    expect(secretsManager.calls.map((c) => c.action)).toContain('GetSecretValue');
    expect(hung.connections()).toBeGreaterThan(before);
    expect(outcome.value).toMatchObject({ statusCode: 503, headers: { 'retry-after': '5' } });
    expect(outcome.afterMs).toBeGreaterThanOrEqual(LAMBDA_AWS_BUDGET.requestTimeoutMs);
    expect(outcome.afterMs).toBeLessThan(5_000);
  }, 30_000);

  it('AwsSecretStore: a Secrets Manager that hangs is a ConfigurationError within the budget', async () => {
    // Prepare: the store's default client, as the three functions build it.
    Object.assign(process.env, LAMBDA_ENV, { AWS_ENDPOINT_URL_SECRETS_MANAGER: hung.endpoint });
    const store = new AwsSecretStore(300);

    // Act: expected after ~3.2 s (LAMBDA_CALL_MS).
    const outcome = await timed(store.get('connector/webhooks/shopify'), 12_000);

    // Assess
    expect(outcome.thrown).toBeInstanceOf(ConfigurationError);
    expect(outcome.afterMs).toBeLessThan(5_000);
  }, 30_000);
});

describe('the CLI (AWS_TIMEOUT_MS)', () => {
  it('DynamoLedger asks its call options afresh for each get and each scan page', async () => {
    // Prepare: a client with no timeout of its own; only the per-call signal can end a call.
    const client = new DynamoDBClient({
      endpoint: hung.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      maxAttempts: 1,
    });
    let asked = 0;
    const ledger = new DynamoLedger(client, 'connector-ledger', {
      callOptions: () => {
        asked++;
        return { abortSignal: AbortSignal.timeout(300) };
      },
    });
    const scan = async () => {
      for await (const _record of ledger.list(PROGRAM)) return;
    };

    try {
      // Act: each expected after ~0.3 s.
      const [get, list] = [await timed(ledger.get(`${PROGRAM}#1001`), 5_000), await timed(scan(), 5_000)];

      // Assess
      expect(get.thrown).toBeInstanceOf(Error);
      expect(list.thrown).toBeInstanceOf(Error);
      expect(get.afterMs).toBeLessThan(3_000);
      expect(list.afterMs).toBeLessThan(3_000);
      expect(asked).toBe(2);
    } finally {
      client.destroy();
    }
  });

  it('`connector status` gives up within AWS_TIMEOUT_MS (10 s) when DynamoDB hangs, with an error line', async () => {
    // Prepare: the platform answers at once ("no such conversion"): only the ledger read can hang.
    const dir = emptyDir();
    const platform = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ conversions: { total: 0, data: [] } }));
    });
    await new Promise<void>((resolve) => platform.listen(0, '127.0.0.1', resolve));
    const platformUrl = `http://127.0.0.1:${(platform.address() as AddressInfo).port}`;
    const before = hung.connections();
    try {
      // Act: expected after AWS_TIMEOUT_MS; without a bound it would still be waiting at 20 s.
      const outcome = await timed(
        runCli(statusOf1001(PROGRAM, hung.endpoint, platformUrl), {
          cwd: dir.dir,
          env: { AFFILIATE_TOKEN: 'test-token', AWS_REGION: 'us-east-1' },
        }),
        20_000,
      );

      // Assess
      expect(hung.connections()).toBeGreaterThan(before);
      expect(outcome.value?.code).toBe(1);
      expect(outcome.value?.stderr).toMatch(/^error: .*timed out/);
      expect(outcome.afterMs).toBeGreaterThanOrEqual(AWS_TIMEOUT_MS - 100);
      expect(outcome.afterMs).toBeLessThan(AWS_TIMEOUT_MS + 5_000);
    } finally {
      dir.remove();
      platform.closeAllConnections();
      platform.close();
    }
  }, 40_000);
});

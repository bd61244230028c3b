import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleFunction, codeFileName } from '../../infra/bundle-report.ts';
import { type Emulators, startEmulators } from '../../infra/local/emulators.ts';
import { LOAD_PRELUDE, lambdaLoad } from '../bench/lambda-process.ts';
import { type FakeSecretsManager, startFakeSecretsManager } from '../support/fake-secrets-manager.ts';
import { sampleFixture, shopifyWebhook } from '../support/webhooks.ts';

/**
 * The webhook as CDK deploys it: index.js built by infra/bundle-report.ts (byte for byte CDK's
 * asset, test/infra/bundle-size.test.ts), loaded as Lambda's runtime loads it and invoked in a fresh
 * Node process with only the environment Lambda and CDK give it, against fauxqs and a wire-level
 * Secrets Manager. The bundle carries no default credential chain but the environment provider
 * (shared/adapters/lambda-credentials.ts); this is where that substitution meets real SDK clients.
 */

const WEBHOOK_SECRET = 'lambda-bundles-shopify-secret';
const SECRET_REF = 'connector/webhooks/shopify';
const ACCESS_KEY_ID = 'ASIABUNDLEDEXAMPLE';
const SOURCES = [
  {
    id: 'shopify',
    platform: 'shopify',
    program: '0123456789abcdef01234567',
    rule: '76543210fedcba9876543210',
    secretRef: SECRET_REF,
  },
];

let dir: string;
let bundleFile: string;
let emulators: Emulators;
let secretsManager: FakeSecretsManager;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'lambda-bundles-'));
  const bundle = await bundleFunction('webhook');
  bundleFile = join(dir, codeFileName());
  writeFileSync(bundleFile, bundle.code);
  emulators = await startEmulators();
  secretsManager = await startFakeSecretsManager({ [SECRET_REF]: WEBHOOK_SECRET });
});

afterAll(async () => {
  await secretsManager?.close();
  await emulators?.close();
  rmSync(dir, { recursive: true, force: true });
});

function orderEvent(id: number): APIGatewayProxyEventV2 {
  const order = JSON.parse(sampleFixture('shopify/order_2026-07_docs_example.json')) as Record<
    string,
    unknown
  >;
  order['id'] = id;
  const signed = shopifyWebhook(JSON.stringify(order), WEBHOOK_SECRET, 'orders/create');
  return {
    version: '2.0',
    routeKey: 'POST /webhooks/shopify',
    rawPath: '/webhooks/shopify',
    rawQueryString: '',
    headers: signed.headers,
    body: signed.body,
    isBase64Encoded: false,
    requestContext: {} as APIGatewayProxyEventV2['requestContext'],
  } as APIGatewayProxyEventV2;
}

/** One cold start and one invocation of the bundled handler in its own process; its answer. */
async function invokeBundle(
  credentials: Record<string, string>,
  event: APIGatewayProxyEventV2,
): Promise<{ statusCode?: number }> {
  const script = `${LOAD_PRELUDE} const { handler } = ${lambdaLoad(bundleFile)};
const result = await handler(JSON.parse(process.env.EVENT));
process.stdout.write('\\nRESULT ' + JSON.stringify(result) + '\\n');`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
    // What Lambda and CDK set, and nothing from this machine (no HOME: no profile to fall back on).
    env: {
      PATH: process.env['PATH'] ?? '',
      AWS_REGION: 'us-east-1',
      AWS_DEFAULT_REGION: 'us-east-1',
      ...credentials,
      AWS_ENDPOINT_URL_SQS: emulators.sqsEndpoint,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: secretsManager.endpoint,
      QUEUE_URL: emulators.queueUrl.replace(/^https?:\/\/[^/]+/, emulators.sqsEndpoint),
      SOURCES: JSON.stringify(SOURCES),
      POWERTOOLS_METRICS_DISABLED: 'true',
      POWERTOOLS_LOG_LEVEL: 'SILENT',
      EVENT: JSON.stringify(event),
    },
  });
  const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
  if (line === undefined) throw new Error(`the bundled handler answered nothing: ${stdout.slice(0, 500)}`);
  return JSON.parse(line.slice('RESULT '.length)) as { statusCode?: number };
}

describe('the bundled webhook (index.js as deployed)', () => {
  it('signs its AWS calls with the credentials Lambda puts in the environment and queues the order', async () => {
    // Prepare
    const before = emulators.messages(emulators.queueName).length;

    // Act
    const result = await invokeBundle(
      {
        AWS_ACCESS_KEY_ID: ACCESS_KEY_ID,
        AWS_SECRET_ACCESS_KEY: 'bundled-example-secret-access-key',
        AWS_SESSION_TOKEN: 'bundled-example-session-token',
      },
      orderEvent(7_001),
    );

    // Assess
    expect(result.statusCode).toBe(202);
    expect(emulators.messages(emulators.queueName)).toHaveLength(before + 1);
    const reads = secretsManager.calls.filter((c) => c.action === 'GetSecretValue');
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.every((c) => c.accessKeyId === ACCESS_KEY_ID)).toBe(true);
  });

  it('without credentials in the environment: a 5xx, and no request reaches AWS unsigned', async () => {
    // Prepare
    const callsBefore = secretsManager.calls.length;
    const before = emulators.messages(emulators.queueName).length;

    // Act
    const result = await invokeBundle({}, orderEvent(7_002));

    // Assess
    expect(result.statusCode).toBeGreaterThanOrEqual(500);
    expect(secretsManager.calls).toHaveLength(callsBefore);
    expect(emulators.messages(emulators.queueName)).toHaveLength(before);
  });
});

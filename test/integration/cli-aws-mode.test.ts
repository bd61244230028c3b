import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { emptyDir, spawnCli } from '../support/cli.ts';
import { type FakeSecretsManager, startFakeSecretsManager } from '../support/fake-secrets-manager.ts';

/**
 * The CLI as an operator runs it against a deployed stack: no `.local-stack.json`, no endpoint
 * settings, every setting from the environment, secrets by reference in Secrets Manager. The AWS
 * SDK's own AWS_ENDPOINT_URL_<SERVICE> variables point it at the emulators (SQS, DynamoDB) and at a
 * stand-in for Secrets Manager (no emulator exists for it), so the code path is the AWS one.
 */

const TOKEN_SECRET = 'connector/affiliate-token';
const FINANCE_SECRET = 'connector/finance-api-keys';
const CLICK = '0123456789abcdef01234567';

let stack: LocalStack;
let secretsManager: FakeSecretsManager;
let cwd: { dir: string; remove(): void };
let financeKey: string;
let token: string;

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 } });
  financeKey = stack.secrets['FINANCE_API_KEY'] ?? '';
  token = stack.sandbox?.token ?? '';
  const webhookSecrets = Object.fromEntries(
    [...stack.sources.values()].map((s) => [s.secretRef, stack.secrets[s.secretRef] ?? 'x']),
  );
  // Each shop source's shopApi credentials, read by doctor to check the shop's webhook subscriptions.
  const shopCredentials = Object.fromEntries(
    [...stack.sources.values()].flatMap((s) =>
      s.shopApi ? [[s.shopApi.credentialsRef, stack.secrets[s.shopApi.credentialsRef] ?? 'x']] : [],
    ),
  );
  secretsManager = await startFakeSecretsManager({
    ...webhookSecrets,
    ...shopCredentials,
    [TOKEN_SECRET]: token,
    // Rotated once: the CLI presents AWSCURRENT; the connector accepts AWSPREVIOUS too.
    [FINANCE_SECRET]: { AWSCURRENT: financeKey, AWSPREVIOUS: 'an-older-key-0123456789abcdefghijkl' },
  });
  cwd = emptyDir();
});

afterAll(async () => {
  cwd?.remove();
  await secretsManager?.close();
  await stack?.close();
});

/** What an operator exports after a deploy (stack outputs and connector.config.json), nothing more. */
function awsEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
    AWS_SECRET_ACCESS_KEY: 'example-secret-access-key',
    AWS_ENDPOINT_URL_SQS: stack.emulators.sqsEndpoint,
    AWS_ENDPOINT_URL_DYNAMODB: stack.emulators.dynamoEndpoint,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: secretsManager.endpoint,
    CONNECTOR_URL: stack.url,
    QUEUE_URL: stack.emulators.queueUrl,
    DLQ_URL: stack.emulators.dlqUrl,
    LEDGER_TABLE: stack.emulators.tableName,
    AFFILIATE_BASE_URL: stack.platformUrl,
    AFFILIATE_TOKEN_SECRET: TOKEN_SECRET,
    FINANCE_API_KEY_SECRET: FINANCE_SECRET,
    SOURCES: JSON.stringify([...stack.sources.values()]),
    ...overrides,
  };
}

async function connector(argv: string[], overrides: Record<string, string> = {}) {
  const result = await spawnCli(argv, { cwd: cwd.dir, env: awsEnv(overrides) }).done;
  // Whatever happens, no secret value is printed.
  const shopKeys = Object.values(stack.sandbox?.shops.credentials ?? {}).flatMap((c) => Object.values(c));
  for (const secret of [token, financeKey, ...shopKeys]) {
    expect(result.stdout + result.stderr).not.toContain(secret);
  }
  return result;
}

describe('the CLI against AWS (settings from the environment, secrets in Secrets Manager)', () => {
  it('doctor passes, reading the token and the finance key (its length) from their secrets, describing the others', async () => {
    // Prepare
    secretsManager.calls.length = 0;
    // Act
    const checked = await connector(['doctor']);
    // Assess
    expect(checked.code, checked.stdout + checked.stderr).toBe(0);
    expect(checked.stdout).not.toContain('local settings from');
    expect(checked.stdout).toMatch(/✓ affiliate token\s+accepted by/);
    expect(checked.stdout).toMatch(/✓ source shopify\s+program/);
    expect(checked.stdout).toMatch(/✓ queue\s+.*connector-events\.fifo reachable/);
    expect(checked.stdout).toMatch(/✓ dead-letter queue\s+.*connector-events-dlq\.fifo reachable/);
    expect(checked.stdout).toMatch(/✓ ledger table\s+connector-ledger ACTIVE/);
    expect(checked.stdout).toMatch(/✓ secret SHOPIFY_WEBHOOK_SECRET\s+exists, last changed 2026-11-01/);
    expect(checked.stdout).toMatch(new RegExp(`✓ secret ${FINANCE_SECRET}\\s+exists`));
    expect(checked.stdout).toMatch(/✓ connector URL\s+/);
    expect(checked.stdout).toMatch(/✓ shop webhooks woocommerce\s+order\.created, order\.updated → /);
    // The token to call the platform; the finance key's two versions for their length; each shop's
    // API credentials to read its webhook subscriptions; no other value.
    const read = secretsManager.calls.filter((c) => c.action === 'GetSecretValue').map((c) => c.secretId);
    expect(read).toEqual([
      TOKEN_SECRET,
      FINANCE_SECRET,
      FINANCE_SECRET,
      'SHOPIFY_API_CREDENTIALS',
      'WOOCOMMERCE_API_CREDENTIALS',
      'STRIPE_API_CREDENTIALS',
    ]);
    expect(checked.stdout).toMatch(/✓ finance key\s+connector\/finance.* AWSCURRENT: \d+ characters/);
  });

  it('doctor names each broken part with a fix: a missing secret, queue and table, an unreadable token', async () => {
    // Act
    const checked = await connector(['doctor'], {
      AFFILIATE_TOKEN_SECRET: 'connector/no-such-token',
      QUEUE_URL: `${stack.emulators.sqsEndpoint}/000000000000/no-such-queue.fifo`,
      LEDGER_TABLE: 'no-such-table',
      FINANCE_API_KEY_SECRET: 'connector/no-such-finance-key',
    });
    // Assess
    expect(checked.code).toBe(1);
    expect(checked.stdout).toMatch(
      /✗ affiliate token\s+AFFILIATE_TOKEN_SECRET: secret connector\/no-such-token could not be read \(ResourceNotFoundException/,
    );
    expect(checked.stdout).toContain('fix: check AFFILIATE_TOKEN_SECRET, AWS_REGION and AWS credentials');
    expect(checked.stdout).toMatch(/- source shopify\s+program and rule not checked: the token check failed/);
    expect(checked.stdout).toMatch(/✗ queue\s+.*no-such-queue\.fifo: /);
    expect(checked.stdout).toContain('fix: check QUEUE_URL, AWS_REGION and AWS credentials');
    expect(checked.stdout).toMatch(/✓ dead-letter queue/);
    expect(checked.stdout).toMatch(/✗ ledger table\s+no-such-table: ResourceNotFoundException/);
    expect(checked.stdout).toMatch(/✗ secret connector\/no-such-finance-key\s+ResourceNotFoundException/);
    expect(checked.stdout).toContain('fix: create the secret or fix the reference');
    expect(checked.stdout).toMatch(/✓ secret SHOPIFY_WEBHOOK_SECRET/);
  });

  it('without a token or its secret, status stops with one line naming both ways to set it', async () => {
    // Act
    const status = await connector(['status', '1001'], { AFFILIATE_TOKEN_SECRET: '' });
    // Assess
    expect(status.code).toBe(2);
    expect(status.stderr).toContain(
      "missing the affiliate platform's API token: set AFFILIATE_TOKEN (locally, `npm start` writes it to .local-stack.json), or AFFILIATE_TOKEN_SECRET to its Secrets Manager secret",
    );
  });

  it('refund presents the current finance key of its secret; status reads the token from its secret', async () => {
    // Prepare
    const sent = await connector([
      'send',
      'shopify',
      '--order-id',
      '7001',
      '--click-id',
      CLICK,
      '--ip',
      '203.0.113.7',
    ]);
    expect(sent.code, sent.stderr).toBe(0);
    await stack.waitForIdle();
    // Act
    const refunded = await connector([
      'refund',
      '--external-id',
      '7001',
      '--refund-id',
      'RF-7001',
      '--amount',
      '87.00',
    ]);
    await stack.waitForIdle();
    const status = await connector(['status', '7001']);
    // Assess
    expect(refunded.code, refunded.stdout + refunded.stderr).toBe(0);
    expect(status.code, status.stdout + status.stderr).toBe(0);
    expect(status.stdout).toMatch(/amount\s+USD 500\.00\s+USD 500\.00/);
    expect(status.stdout).toContain('ledger and platform agree');
  });

  it('a finance key secret that cannot be read stops refund before anything is sent', async () => {
    // Act
    const refunded = await connector(
      ['refund', '--external-id', '7001', '--refund-id', 'RF-7002', '--full'],
      {
        FINANCE_API_KEY_SECRET: 'connector/gone',
      },
    );
    // Assess
    expect(refunded.code).toBe(2);
    expect(refunded.stderr).toMatch(
      /FINANCE_API_KEY_SECRET: secret connector\/gone could not be read \(ResourceNotFoundException.*\); this identity needs secretsmanager:GetSecretValue on it/,
    );
    expect(stack.sandbox?.control.conversions().find((c) => c.externalId === '7001')?.status).not.toBe(
      'refused',
    );
  });
});

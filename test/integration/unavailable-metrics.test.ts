import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { RefundsHandler } from '../../functions/refunds.ts';
import type { WebhookHandler } from '../../functions/webhook.ts';
import { type FakeSecretsManager, startFakeSecretsManager } from '../support/fake-secrets-manager.ts';
import { sampleFixture, shopifyWebhook } from '../support/webhooks.ts';

/**
 * A webhook or finance refund the function cannot queue because a dependency is out of reach (the
 * signing secret or the finance key in Secrets Manager, the ledger, the queue) is answered 503 by the
 * function itself: Lambda's Errors metric stays 0, so only a count of those answers can page the
 * operator before the shops give up on their webhooks. The deployed `handler`s run here with the
 * real SDK clients, Secrets Manager's wire stand-in, and SQS and DynamoDB endpoints that answer every
 * call 503; what they write to stdout is read as CloudWatch reads EMF from a Lambda's output. A 4xx
 * is the sender's (an attacker's flood of bad signatures included) and must not count.
 */

const SERVICE = 'connector-unavailable';
const NAMESPACE = 'ConnectorUnavailable';
const PROGRAM = '0123456789abcdef01234567';
const RULE = '76543210fedcba9876543210';
const WEBHOOK_SECRET = 'unavailable-metrics-shopify-secret';
const FINANCE_SECRET = 'connector/finance-api-key';
const FINANCE_KEY = 'fin_0123456789abcdef0123456789abcdef';

type Stream = 'stdout' | 'stderr';
const written: { stream: Stream; text: string }[] = [];
let capturing = false;
let down: Server;
let downEndpoint: string;
let secretsManager: FakeSecretsManager;
let handlers: { webhook: WebhookHandler; refunds: RefundsHandler };
const savedEnv = { ...process.env };

/** An AWS endpoint that is there but refuses every call, as a service in an outage does. */
async function startDownService(): Promise<{ server: Server; endpoint: string }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(503, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify({ __type: 'ServiceUnavailable', message: 'Service Unavailable' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

beforeAll(async () => {
  ({ server: down, endpoint: downEndpoint } = await startDownService());
  secretsManager = await startFakeSecretsManager({
    'connector/webhooks/shopify': WEBHOOK_SECRET,
    [FINANCE_SECRET]: FINANCE_KEY,
  });
  // What CDK (infra/connector-stack.ts) and Lambda give the two functions, set before their modules
  // load: the logger and the metrics read the Powertools variables then. `shopify-missing` names a
  // secret Secrets Manager does not have (deleted, or never created after a deploy).
  const source = (id: string) => ({
    id,
    platform: 'shopify',
    program: PROGRAM,
    rule: RULE,
    secretRef: `connector/webhooks/${id}`,
  });
  Object.assign(process.env, {
    POWERTOOLS_SERVICE_NAME: SERVICE,
    POWERTOOLS_METRICS_NAMESPACE: NAMESPACE,
    POWERTOOLS_LOG_LEVEL: 'INFO',
    AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
    AWS_REGION: 'us-east-1',
    AWS_DEFAULT_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'ASIAEXAMPLEEXAMPLE',
    AWS_SECRET_ACCESS_KEY: 'example-secret-access-key',
    AWS_ENDPOINT_URL_SQS: downEndpoint,
    AWS_ENDPOINT_URL_DYNAMODB: downEndpoint,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: secretsManager.endpoint,
    SECRETS_MAX_AGE_SECONDS: '300',
    SOURCES: JSON.stringify([source('shopify'), source('shopify-missing')]),
    QUEUE_URL: `${downEndpoint}/000000000000/connector-events.fifo`,
    LEDGER_TABLE: 'connector-ledger',
    FINANCE_API_KEY_SECRET: FINANCE_SECRET,
  });
  for (const key of ['POWERTOOLS_DEV', 'POWERTOOLS_METRICS_DISABLED', 'AWS_PROFILE']) delete process.env[key];
  // Powertools prints through its own Console over process.stdout and process.stderr.
  for (const stream of ['stdout', 'stderr'] as const) {
    vi.spyOn(process[stream], 'write').mockImplementation((chunk: string | Uint8Array) => {
      if (capturing)
        written.push({
          stream,
          text: typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'),
        });
      return true;
    });
  }
  const [webhook, refunds] = await Promise.all([
    import('../../functions/webhook.ts'),
    import('../../functions/refunds.ts'),
  ]);
  handlers = { webhook: webhook.handler, refunds: refunds.handler };
});

afterAll(async () => {
  vi.restoreAllMocks();
  for (const key of Object.keys(process.env)) if (!(key in savedEnv)) delete process.env[key];
  Object.assign(process.env, savedEnv);
  await secretsManager?.close();
  await new Promise<void>((resolve) => down?.close(() => resolve()));
});

function lambdaContext(name: string): Context {
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: `connector-${name}`,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:000000000000:function:connector-${name}`,
    memoryLimitInMB: '256',
    awsRequestId: randomUUID(),
    logGroupName: `/aws/lambda/connector-${name}`,
    logStreamName: '2026/03/02/[$LATEST]0123456789abcdef',
    getRemainingTimeInMillis: () => 10_000,
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/** API Gateway's payload 2.0 event for a JSON POST on `path` (each source has its own route). */
function apiEvent(path: string, headers: Record<string, string>, body: string): APIGatewayProxyEventV2 {
  return {
    version: '2.0',
    routeKey: `POST ${path}`,
    rawPath: path,
    rawQueryString: '',
    headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])),
    requestContext: {} as APIGatewayProxyEventV2['requestContext'],
    body,
    isBase64Encoded: false,
  };
}

/** Runs one invocation; resolves with its status code and what it wrote, line by line. */
async function invoke(
  name: 'webhook' | 'refunds',
  event: APIGatewayProxyEventV2,
): Promise<{ status: number | undefined; lines: { stream: Stream; line: string }[] }> {
  const from = written.length;
  capturing = true;
  try {
    const handler = name === 'webhook' ? handlers.webhook : handlers.refunds;
    const result = await handler(event, lambdaContext(name));
    return {
      status: result.statusCode,
      lines: written
        .slice(from)
        .flatMap(({ stream, text }) => text.split('\n').map((line) => ({ stream, line })))
        .filter(({ line }) => line.trim() !== ''),
    };
  } finally {
    capturing = false;
  }
}

interface EmfBlob {
  _aws: {
    Timestamp: number;
    CloudWatchMetrics: {
      Namespace: string;
      Dimensions: string[][];
      Metrics: { Name: string; Unit: string }[];
    }[];
  };
  [key: string]: unknown;
}

/**
 * The total of `metric` CloudWatch would extract from `lines`: EMF documents written to stdout (the
 * stream Lambda's EMF extraction is documented for), in the stack's namespace, with the `service`
 * dimension the alarms select on.
 */
function countOf(metric: string, lines: readonly { stream: Stream; line: string }[]): number {
  let total = 0;
  for (const { stream, line } of lines) {
    if (!line.includes('"_aws"')) continue;
    const blob = JSON.parse(line) as EmfBlob;
    for (const directive of blob._aws.CloudWatchMetrics) {
      if (!directive.Metrics.some((m) => m.Name === metric)) continue;
      expect(stream, `${metric} written to ${stream}`).toBe('stdout');
      expect(directive.Namespace).toBe(NAMESPACE);
      expect(directive.Dimensions).toContainEqual(['service']);
      expect(blob['service']).toBe(SERVICE);
      expect(directive.Metrics.find((m) => m.Name === metric)?.Unit).toBe('Count');
      expect(Math.abs(blob._aws.Timestamp - Date.now())).toBeLessThan(60_000);
      const value = blob[metric];
      total += (Array.isArray(value) ? (value as number[]) : [value as number]).reduce((a, b) => a + b, 0);
    }
  }
  return total;
}

function shopifyOrder(id: number, secret = WEBHOOK_SECRET) {
  const order = JSON.parse(sampleFixture('shopify/order_2026-07_docs_example.json')) as Record<
    string,
    unknown
  >;
  order['id'] = id;
  return shopifyWebhook(JSON.stringify(order), secret, 'orders/create');
}

function postOrder(source: string, id: number, secret?: string) {
  const signed = shopifyOrder(id, secret);
  return invoke('webhook', apiEvent(`/webhooks/${source}`, signed.headers, signed.body));
}

function postRefund(body: string, key = FINANCE_KEY) {
  return invoke(
    'refunds',
    apiEvent('/refunds', { 'content-type': 'application/json', 'x-api-key': key }, body),
  );
}

describe('a 503 a function answers because a dependency is out of reach is counted for its alarm', () => {
  it('webhook: the queue refusing, or a signing secret that cannot be read, counts each 503 once in WebhooksUnavailable', async () => {
    // Act
    const queueDown = await postOrder('shopify', 8101);
    const noSecret = await postOrder('shopify-missing', 8102);

    // Assess
    expect(queueDown.status).toBe(503);
    expect(noSecret.status).toBe(503);
    expect(countOf('WebhooksUnavailable', queueDown.lines)).toBe(1);
    expect(countOf('WebhooksUnavailable', noSecret.lines)).toBe(1);
  });

  it('webhook: a bad signature (401) or an unknown source (404) is the sender’s and counts nothing', async () => {
    // Act
    const forged = await postOrder('shopify', 8103, 'not-the-shop-secret');
    const unknown = await postOrder('no-such-shop', 8104);

    // Assess
    expect(forged.status).toBe(401);
    expect(unknown.status).toBe(404);
    expect(countOf('WebhooksUnavailable', [...forged.lines, ...unknown.lines])).toBe(0);
  });

  it('refunds: a ledger out of reach counts the 503 once in FinanceRefundsUnavailable', async () => {
    // Act
    const ledgerDown = await postRefund(
      JSON.stringify({ externalId: '8101', refundId: 'RF-1', amount: '10.00' }),
    );

    // Assess
    expect(ledgerDown.status).toBe(503);
    expect(countOf('FinanceRefundsUnavailable', ledgerDown.lines)).toBe(1);
  });

  it('refunds: a wrong key (401) or a bad body (400) is the sender’s and counts nothing', async () => {
    // Act
    const wrongKey = await postRefund(
      JSON.stringify({ externalId: '8101', refundId: 'RF-2', full: true }),
      'fin_not-the-finance-key-0123456789abcdef',
    );
    const badBody = await postRefund('{"externalId": "8101"');

    // Assess
    expect(wrongKey.status).toBe(401);
    expect(badBody.status).toBe(400);
    expect(countOf('FinanceRefundsUnavailable', [...wrongKey.lines, ...badBody.lines])).toBe(0);
  });
});

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SQSRecord } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildCatchUpDeps, makeHandler as makeCatchUpHandler } from '../../functions/catch-up.ts';
import {
  buildWorkerDeps,
  makeHandler as makeWorkerHandler,
  WAITING_REFUNDS_CHECK,
} from '../../functions/worker.ts';
import { LOCAL_SECRETS, LOCAL_SHOP_API_REFS } from '../../local/defaults.ts';
import { type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import { dynamoClient, LAMBDA_AWS_BUDGET, sqsClient } from '../../shared/adapters/aws-clients.ts';
import type { PermanentError } from '../../shared/errors.ts';
import { lambdaPipeline } from '../../shared/lambda.ts';
import { makeLogger, makeMetrics, observeWorker, reportWaitingRefunds } from '../../shared/observability.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { StripeClient } from '../../shared/shops/stripe.ts';
import { WooCommerceClient } from '../../shared/shops/woocommerce.ts';
import { answeringServers } from '../support/answering-servers.ts';
import { emptyDir, spawnCli } from '../support/cli.ts';
import { trackedOrder } from '../support/events.ts';
import { fifoRecord } from '../support/sqs-records.ts';

/**
 * AWS services answer a request whose signature they cannot check with a message that echoes it:
 * SignatureDoesNotMatch goes on, after a blank line, with "The Canonical String for this request
 * should have been" and the signed headers, `x-amz-security-token` (the caller's session token)
 * among them; IncompleteSignatureException quotes the Authorization header. Such a message is the
 * SDK error's `message`. None of it may reach a Lambda log line, a DLQ reason or the CLI's output.
 *
 * Here an endpoint on port 0 answers every call so, echoing the headers the real SDK clients sent.
 */

const SESSION_TOKEN = `IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN${'x'.repeat(40)}`;
const SECRET_ACCESS_KEY = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const PROGRAM = '0123456789abcdef01234567';
const RULE = '76543210fedcba9876543210';

let echo: string;
/** The signatures of the requests the endpoint saw (the Authorization header's `Signature=`). */
const signatures: string[] = [];
const servers = answeringServers();
const serve = servers.serve;
let sandbox: RunningSandbox | undefined;

/** What AWS answers a request it cannot authenticate, built from the request's own headers. */
function signatureRefusal(req: IncomingMessage, res: ServerResponse): void {
  const header = (name: string) => String(req.headers[name] ?? '');
  const authorization = header('authorization');
  const signature = /Signature=([0-9a-f]+)/.exec(authorization)?.[1];
  if (signature) signatures.push(signature);
  const canonical = [
    'POST',
    '/',
    '',
    `content-type:${header('content-type')}`,
    `host:${header('host')}`,
    `x-amz-date:${header('x-amz-date')}`,
    `x-amz-security-token:${header('x-amz-security-token')}`,
    `x-amz-target:${header('x-amz-target')}`,
    '',
    'content-type;host;x-amz-date;x-amz-security-token;x-amz-target',
  ].join('\n');
  const message = req.url?.includes('incomplete')
    ? `Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. Authorization=${authorization}`
    : 'The request signature we calculated does not match the signature you provided. Check your AWS Secret ' +
      'Access Key and signing method. Consult the service documentation for details.\n\n' +
      `The Canonical String for this request should have been\n'${canonical}'\n\n` +
      `The String-to-Sign should have been\n'AWS4-HMAC-SHA256\n${header('x-amz-date')}\n${authorization}'\n`;
  const type = req.url?.includes('incomplete') ? 'IncompleteSignatureException' : 'InvalidSignatureException';
  res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-errortype': type });
  res.end(JSON.stringify({ __type: `com.amazon.coral.service#${type}`, message }));
}

beforeAll(async () => {
  echo = await serve(signatureRefusal);
});
afterEach(() => {
  vi.restoreAllMocks();
});
afterAll(async () => {
  await sandbox?.close();
  servers.close();
});

/** Everything Powertools writes (on process.stdout and stderr) while `run` runs. */
async function written(run: () => Promise<unknown>): Promise<string> {
  let out = '';
  for (const stream of [process.stdout, process.stderr]) {
    vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
      out += String(chunk);
      return true;
    });
  }
  try {
    await run();
  } finally {
    vi.restoreAllMocks();
  }
  return out;
}

/** The credentials Lambda gives a function: a role session, token included. */
const credentials = {
  accessKeyId: 'ASIAEXAMPLEEXAMPLE',
  secretAccessKey: SECRET_ACCESS_KEY,
  sessionToken: SESSION_TOKEN,
};

function expectNoSigningMaterial(text: string): void {
  expect(text).not.toContain(SESSION_TOKEN.slice(0, 24));
  expect(text).not.toContain(SECRET_ACCESS_KEY);
  for (const signature of signatures) expect(text).not.toContain(signature);
}

describe('the worker (Lambda logs)', () => {
  it('logs a ledger call refused for its signature without the request AWS echoed', async () => {
    // Prepare: the worker wired as deployed, its DynamoDB and SQS clients answered by the echo.
    const target = { endpoint: echo, region: 'us-east-1', credentials };
    const env = { POWERTOOLS_SERVICE_NAME: 'no-secrets', POWERTOOLS_METRICS_DISABLED: 'true' };
    const logger = makeLogger(env);
    const observed: string[] = [];
    const observe = observeWorker(logger, makeMetrics(env, logger));
    const deps = await buildWorkerDeps({
      sqs: sqsClient(LAMBDA_AWS_BUDGET, target),
      dynamo: dynamoClient(LAMBDA_AWS_BUDGET, target),
      secrets: new EnvSecretStore({ AFFILIATE_TOKEN: 'platform-token-0123456789' }),
      env: {
        SOURCES: JSON.stringify([
          { id: 'shop', platform: 'generic', program: PROGRAM, rule: RULE, secretRef: 'S' },
        ]),
        LEDGER_TABLE: 'connector-ledger',
        QUEUE_URL: `${echo}/000000000000/connector-events.fifo`,
        DLQ_URL: `${echo}/000000000000/connector-events-dlq.fifo`,
        AFFILIATE_BASE_URL: 'http://127.0.0.1:9',
        AFFILIATE_TOKEN_SECRET: 'AFFILIATE_TOKEN',
      },
      observe: (report) => {
        observed.push(JSON.stringify(report));
        observe(report);
      },
    });
    const handler = makeWorkerHandler(deps);
    const record: SQSRecord = fifoRecord(trackedOrder('shop'), {
      messageId: 'm-1',
      program: PROGRAM,
      sentAt: Date.now(),
    });

    // Act
    const logs = await written(() =>
      handler({ Records: [record] }, { getRemainingTimeInMillis: () => 20_000 } as never),
    );

    // Assess: the failure was seen and logged, as a retry; nothing of the signed request is in it.
    expect(signatures.length).toBeGreaterThan(0);
    expect(logs).toContain('event will be retried');
    expectNoSigningMaterial(logs);
    expectNoSigningMaterial(observed.join('\n'));
    expect(logs).toContain('InvalidSignatureException');
  }, 30_000);
});

describe('a failure thrown out of a function (the Lambda runtime logs its message and stack)', () => {
  it("the worker's hourly check: a ledger scan refused for its signature is thrown without the request", async () => {
    // Prepare: the worker as deployed, in its Lambda pipeline; the ledger's DynamoDB is the echo.
    const target = { endpoint: echo, region: 'us-east-1', credentials };
    const env = { POWERTOOLS_SERVICE_NAME: 'no-secrets', POWERTOOLS_METRICS_DISABLED: 'true' };
    const logger = makeLogger(env);
    const metrics = makeMetrics(env, logger);
    const handler = lambdaPipeline(
      async () =>
        makeWorkerHandler(
          await buildWorkerDeps({
            sqs: sqsClient(LAMBDA_AWS_BUDGET, target),
            dynamo: dynamoClient(LAMBDA_AWS_BUDGET, target),
            secrets: new EnvSecretStore({ AFFILIATE_TOKEN: 'platform-token-0123456789' }),
            env: {
              SOURCES: JSON.stringify([
                { id: 'shop', platform: 'generic', program: PROGRAM, rule: RULE, secretRef: 'S' },
              ]),
              LEDGER_TABLE: 'connector-ledger',
              QUEUE_URL: `${echo}/000000000000/connector-events.fifo`,
              DLQ_URL: `${echo}/000000000000/connector-events-dlq.fifo`,
              AFFILIATE_BASE_URL: 'http://127.0.0.1:9',
              AFFILIATE_TOKEN_SECRET: 'AFFILIATE_TOKEN',
            },
            reportWaiting: reportWaitingRefunds(logger, metrics),
          }),
        ),
      { logger, metrics },
    );

    // Act
    let thrown: Error | undefined;
    const logs = await written(async () => {
      await handler(WAITING_REFUNDS_CHECK, { getRemainingTimeInMillis: () => 20_000 } as never).catch(
        (error: unknown) => {
          thrown = error as Error;
        },
      );
    });

    // Assess: it failed, as the runtime would report it: its name, message and stack.
    expect(thrown).toBeInstanceOf(Error);
    const reported = JSON.stringify({
      errorType: thrown?.name,
      errorMessage: thrown?.message,
      stack: thrown?.stack,
    });
    expectNoSigningMaterial(reported);
    expectNoSigningMaterial(logs);
    expect(reported).toContain('InvalidSignatureException');
  }, 30_000);
});

describe('the catch-up function (Lambda logs, its error)', () => {
  it('names the queue failure without the request AWS echoed', async () => {
    // Prepare: one order in the Shopify fake; SQS is the echo.
    sandbox = await startSandbox({ port: 0 });
    sandbox.shops.control.createOrder('shopify', {
      clickId: '0123456789abcdef01234567',
      at: new Date(Date.now() - 3600_000).toISOString(),
    });
    const handler = makeCatchUpHandler(
      buildCatchUpDeps({
        sqs: sqsClient(LAMBDA_AWS_BUDGET, { endpoint: echo, region: 'us-east-1', credentials }),
        secrets: new EnvSecretStore({ ...LOCAL_SECRETS }),
        env: {
          SOURCES: JSON.stringify([
            {
              id: 'shopify',
              platform: 'shopify',
              program: PROGRAM,
              rule: RULE,
              secretRef: 'SHOPIFY_WEBHOOK_SECRET',
              shopApi: { url: sandbox.shops.urls.shopify, credentialsRef: LOCAL_SHOP_API_REFS.shopify },
            },
          ]),
          QUEUE_URL: `${echo}/000000000000/connector-events.fifo`,
        },
      }),
    );

    // Act: the function rejects (the Lambda runtime logs its message) naming each failed source.
    const failure = await handler({}).then(
      () => undefined,
      (error: unknown) => error as Error,
    );

    // Assess
    expect(failure?.message).toContain('catch-up failed for source shopify');
    expectNoSigningMaterial(failure?.message ?? '');
    expect(failure?.message).toContain('InvalidSignatureException');
  }, 30_000);
});

describe('the CLI', () => {
  const cwd = emptyDir();
  afterAll(() => cwd.remove());

  /** What an operator has in a shell after `aws sso login`: a session, token included. */
  function awsEnv(dynamoEndpoint: string): Record<string, string> {
    return {
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      AWS_SESSION_TOKEN: credentials.sessionToken,
      AWS_ENDPOINT_URL_DYNAMODB: dynamoEndpoint,
      LEDGER_TABLE: 'connector-ledger',
      AFFILIATE_BASE_URL: 'http://127.0.0.1:9',
      AFFILIATE_TOKEN: 'platform-token-0123456789',
    };
  }

  it.each([
    ['SignatureDoesNotMatch, echoing the canonical request', ''],
    ['IncompleteSignature, echoing the Authorization header', '/incomplete'],
  ])(
    'status: an AWS refusal (%s) is told without the request',
    async (_name, path) => {
      // Act
      const result = await spawnCli(['status', '1001', '--program', PROGRAM], {
        cwd: cwd.dir,
        env: awsEnv(`${echo}${path}`),
      }).done;

      // Assess: the command failed and said why, and nothing of the signed request is printed.
      expect(result.code, result.stderr).toBe(1);
      expect(result.stderr).toMatch(/^error: .*SignatureException/);
      expectNoSigningMaterial(result.stdout + result.stderr);
    },
    30_000,
  );
});

describe('the shop API clients (backfill, catch-up, subscribe)', () => {
  it('WooCommerce: an answer that echoes the Authorization header is quoted without the credentials', async () => {
    // Prepare: a shop (or the WAF in front of it) that refuses the request quoting the header.
    const consumer = {
      consumerKey: 'ck_0123456789abcdef0123456789abcdef',
      consumerSecret: 'cs_fedcba9876543210',
    };
    const basic = Buffer.from(`${consumer.consumerKey}:${consumer.consumerSecret}`).toString('base64');
    const shop = await serve((req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ code: 'bad_header', message: `Malformed header: ${req.headers.authorization}` }),
      );
    });
    const client = new WooCommerceClient({ url: shop, ...consumer }, { maxAttempts: 1 });

    // Act
    const failure = await client.get('orders').then(
      () => undefined,
      (error: unknown) => error as PermanentError,
    );

    // Assess: the shop's message is quoted, the credentials in it are not, in any form.
    expect(failure?.message).toContain('answered 400: Malformed header');
    for (const text of [failure?.message ?? '', failure?.platformMessage ?? '']) {
      expect(text).not.toContain(basic);
      expect(text).not.toContain(consumer.consumerSecret);
    }
  });

  it('Stripe: a key echoed where the quoted message is cut leaves no part of it behind', async () => {
    // Prepare: the key echoed in a long message, across the 300 characters the client quotes.
    const secretKey = 'sk_test_51ExampleExampleExampleExampleExample';
    const shop = await serve((req, res) => {
      const key = String(req.headers.authorization).replace(/^Bearer /, '');
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ error: { message: `${'Invalid request. '.repeat(17).slice(0, 280)}key ${key}` } }),
      );
    });
    const client = new StripeClient({ url: shop, secretKey }, { maxAttempts: 1 });

    // Act
    const failure = await client.get('events').then(
      () => undefined,
      (error: unknown) => error as PermanentError,
    );

    // Assess
    expect(failure?.message).toContain('answered 400: Invalid request.');
    for (const text of [failure?.message ?? '', failure?.platformMessage ?? '']) {
      expect(text).not.toContain(secretKey.slice(0, 12));
    }
  });
});

import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { buildAcceptDeps } from '../../functions/accept.ts';
import { buildRefundsDeps, makeHandler as makeRefundsHandler } from '../../functions/refunds.ts';
import { buildWebhookDeps, makeHandler as makeWebhookHandler } from '../../functions/webhook.ts';
import {
  buildWorkerDeps,
  makeHandler as makeWorkerHandler,
  type WorkerTuning,
} from '../../functions/worker.ts';
import { LOCAL_SECRETS, LOCAL_SHOP_API_REFS } from '../../local/defaults.ts';
import { type RunningSandbox, type SandboxOptions, startSandbox } from '../../sandbox/server.ts';
import { type AcceptOptions, type AcceptSummary, runAccept } from '../../shared/accept/job.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import type { Env } from '../../shared/config/env.ts';
import { SourceConfig, type SourceConfigInput } from '../../shared/config/sources.ts';
import { hasShopApi, SOURCE_PLATFORMS, type SourcePlatform } from '../../shared/domain/platforms.ts';
import { describeError } from '../../shared/errors.ts';
import { subscriptionTopics } from '../../shared/platforms/registry.ts';
import type { Ledger } from '../../shared/ports.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import type { RecordReport } from '../../shared/worker/batch.ts';
import { DEFAULT_VERIFY_MS } from '../../shared/worker/flow.ts';
import { WORKER_DEFAULTS } from '../deploy-config.ts';
import { type EmulatorOptions, type Emulators, startEmulators } from './emulators.ts';
import { functionClients } from './function-clients.ts';
import { Pollers } from './pollers.ts';
import { recoverAfterCrash } from './recover.ts';

/**
 * Time to receive a whole request; past it Node answers 408 and closes. API Gateway's own limit is
 * 30 s, but a shop waits 5 s at most (Shopify), so a request still unfinished after this never ends.
 */
export const REQUEST_TIMEOUT_MS = 3_000;

const PLATFORM_SECRET: Record<SourcePlatform, keyof typeof LOCAL_SECRETS> = {
  shopify: 'SHOPIFY_WEBHOOK_SECRET',
  woocommerce: 'WOOCOMMERCE_WEBHOOK_SECRET',
  stripe: 'STRIPE_WEBHOOK_SECRET',
  generic: 'GENERIC_WEBHOOK_SECRET',
};

/**
 * `WorkerTuning` (functions/worker.ts) is for tests only, over what the settings give: the defaults
 * are the deployed worker's (lease LEASE_MS or 120 s, client timeout 5 s, settle twice that,
 * verification ADD_VERIFY_SECONDS or 10 minutes, visibility backoff base 5 s); `wrapLedger` and
 * `wrapBackend` let tests kill a worker mid-flight.
 */
export interface LocalStackOptions extends WorkerTuning {
  /** HTTP port of the ingest API; 0 = any free port. */
  readonly port?: number;
  /** Settings and secrets (env or `.env`); defaults fill what is missing. */
  readonly env?: Env;
  /** Start an in-process sandbox with these options (default), or use an external platform. */
  readonly sandbox?: SandboxOptions | { readonly external: { readonly url: string; readonly token: string } };
  /** One source per platform by default (ids shopify, woocommerce, stripe, generic). */
  readonly sources?: SourceConfigInput[];
  readonly emulators?: EmulatorOptions;
  /** Concurrent pollers, like Lambda's concurrent batches. */
  readonly pollers?: number;
  /** Messages per batch (1 to 10; default: the deployed stack's `worker.batchSize`). */
  readonly batchSize?: number;
  /** Start the pollers at once (default true). */
  readonly autoPoll?: boolean;
  readonly observe?: (report: RecordReport) => void;
  readonly log?: (line: string) => void;
  /** Kept data from a process that died: hand back its in-flight messages and add leases at start. */
  readonly recoverAfterCrash?: boolean;
  /** Runs the accept job at this interval, as the hourly schedule does in AWS. @default off */
  readonly acceptEveryMs?: number;
  /** `acceptAfterDays` of the default sources (ignored with `sources`). @default off */
  readonly acceptAfterDays?: number;
  /** Default sources run in shadow mode (`mode: 'shadow'`; ignored with `sources`). @default none */
  readonly shadowSources?: readonly SourcePlatform[];
}

export interface LocalStack {
  readonly url: string;
  readonly port: number;
  readonly sandbox: RunningSandbox | undefined;
  readonly platformUrl: string;
  readonly emulators: Emulators;
  readonly sources: ReadonlyMap<string, SourceConfig>;
  readonly secrets: Readonly<Record<string, string>>;
  readonly ledger: Ledger;
  /** The worker's verification window after an add without a clear answer (ADD_VERIFY_SECONDS). */
  readonly addVerifySeconds: number;
  startPolling(): void;
  stopPolling(): Promise<void>;
  /** Resolves when the main queue has no message left (ready, in flight or delayed). */
  waitForIdle(timeoutMs?: number): Promise<void>;
  /** One run of the accept job (what the hourly schedule runs in AWS), with the function's wiring. */
  runAccept(options?: Partial<AcceptOptions>): Promise<AcceptSummary>;
  close(): Promise<void>;
}

/**
 * The whole connector on this machine: the same handlers as in AWS, wired to fauxqs, dynalite and
 * the sandbox, an HTTP server that turns requests into API Gateway v2 events, and pollers that drive
 * the worker like Lambda's event source mapping (batches of the deployed size, partial batch
 * failures, visibility timeouts, redrive to the DLQ after maxReceiveCount).
 */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const env: Record<string, string | undefined> = { ...LOCAL_SECRETS, ...definedOnly(options.env ?? {}) };
  const emulators = await startEmulators(options.emulators);

  let sandbox: RunningSandbox | undefined;
  let platformUrl: string;
  let token: string;
  if (options.sandbox && 'external' in options.sandbox) {
    platformUrl = options.sandbox.external.url;
    token = options.sandbox.external.token;
  } else {
    sandbox = await startSandbox({ port: 0, ...options.sandbox });
    platformUrl = sandbox.url;
    token = sandbox.token;
  }

  const program = env['PROGRAM_ID'] ?? sandbox?.seed.programs[0];
  const rule = env['RULE_ID'] ?? sandbox?.seed.rules[0];
  if (!program || !rule)
    throw new Error('PROGRAM_ID and RULE_ID are required when the platform is not the sandbox');
  // With the sandbox in process, each shop source reads the sandbox's fake of its shop's API.
  const shopApiOf = (platform: SourcePlatform) =>
    sandbox && hasShopApi(platform)
      ? { shopApi: { url: sandbox.shops.urls[platform], credentialsRef: LOCAL_SHOP_API_REFS[platform] } }
      : {};
  const sourceInputs: SourceConfigInput[] =
    options.sources ??
    SOURCE_PLATFORMS.map((platform) => ({
      id: platform,
      platform,
      program,
      rule,
      secretRef: PLATFORM_SECRET[platform],
      ...shopApiOf(platform),
      ...(options.acceptAfterDays === undefined ? {} : { acceptAfterDays: options.acceptAfterDays }),
      ...(options.shadowSources?.includes(platform) ? { mode: 'shadow' as const } : {}),
    }));
  const sources = new Map(sourceInputs.map((s) => SourceConfig.parse(s)).map((s) => [s.id, s]));

  // Each function gets the settings CDK would give it, pointing at the emulators and the platform,
  // and is wired by the same builder as in AWS; only the secret store differs (env, not Secrets Manager).
  const wiringEnv: Record<string, string | undefined> = {
    // The emulated queue's redrive count, as the stack gives the deployed worker its queue's (a test
    // may give the worker another in `env`, to see SQS's redrive move a message the worker did not park).
    MAX_RECEIVE_COUNT: String(emulators.maxReceiveCount),
    ...env,
    SOURCES: JSON.stringify([...sources.values()]),
    QUEUE_URL: emulators.queueUrl,
    DLQ_URL: emulators.dlqUrl,
    LEDGER_TABLE: emulators.tableName,
    PACING_TABLE: emulators.pacingTableName,
    FINANCE_API_KEY_SECRET: 'FINANCE_API_KEY',
    AFFILIATE_BASE_URL: platformUrl,
    AFFILIATE_TOKEN_SECRET: 'AFFILIATE_TOKEN',
    AFFILIATE_TOKEN: token,
    ...(sandbox
      ? {
          LEGACY_BASE_URL: platformUrl,
          LEGACY_CREDENTIALS_SECRET: 'LEGACY_CREDENTIALS',
          LEGACY_CREDENTIALS: `${sandbox.legacy.userCode}:${sandbox.legacy.apiKey}`,
        }
      : {}),
  };
  const secretStore = new EnvSecretStore(wiringEnv);
  const log = options.log ?? (() => undefined);
  // The functions' own clients, as the Lambda handlers build them; the emulators' plain ones are for
  // the stack's own work (the pollers' receives, set-up, counts).
  const functionAws = functionClients(emulators);
  const clients = { ...functionAws, secrets: secretStore, env: wiringEnv };

  const webhook = makeWebhookHandler(
    buildWebhookDeps({
      ...clients,
      observe: (o) => log(`webhook ${o.source} → ${o.status} ${o.result}${o.detail ? ` (${o.detail})` : ''}`),
    }),
  );
  const refunds = makeRefundsHandler(buildRefundsDeps({ ...clients, wrapLedger: options.wrapLedger }));
  const workerDeps = await buildWorkerDeps({
    ...clients,
    observe: (report) => {
      options.observe?.(report);
      const what = report.outcome?.result ?? report.reason ?? '';
      log(`worker ${report.event?.type ?? '?'} ${report.event?.externalId ?? ''} → ${report.status} ${what}`);
    },
    tuning: {
      client: options.client,
      leaseMs: options.leaseMs,
      settleMs: options.settleMs,
      verifyMs: options.verifyMs,
      visibilityBaseSeconds: options.visibilityBaseSeconds,
      wrapLedger: options.wrapLedger,
      wrapBackend: options.wrapBackend,
    },
  });
  const worker = makeWorkerHandler(workerDeps);
  // The scheduled accept function, wired as in AWS; run by `runAccept`, the timer below and the CLI.
  const acceptDeps = await buildAcceptDeps({
    ...clients,
    tuning: { client: options.client, leaseMs: options.leaseMs },
  });
  const accept = (run: Partial<AcceptOptions> = {}) =>
    runAccept(acceptDeps, { limit: acceptDeps.maxPerRun, ...run });
  let acceptTimer: NodeJS.Timeout | undefined;
  if (options.acceptEveryMs !== undefined && options.acceptEveryMs > 0) {
    acceptTimer = setInterval(() => {
      accept().then(
        (summary) => {
          if (summary.items.length > 0)
            log(
              `accept: ${summary.accepted} accepted, ${summary.failed} failed, ${summary.dueLeft} due left`,
            );
        },
        (error: unknown) => log(`accept: ${describeError(error)}`),
      );
    }, options.acceptEveryMs);
    acceptTimer.unref();
  }
  const { ledger } = workerDeps;
  const baseLedger = new DynamoLedger(emulators.dynamo, emulators.tableName);

  // A body that never finishes gets a 408 after REQUEST_TIMEOUT_MS; Node checks at this interval.
  const server = createServer(
    {
      requestTimeout: REQUEST_TIMEOUT_MS,
      headersTimeout: REQUEST_TIMEOUT_MS,
      connectionsCheckingInterval: 250,
    },
    (req, res) => {
      route(req, res).catch(() => send(res, 500, { error: 'internal', message: 'unexpected error' }));
    },
  );
  const route = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://local');
    if (req.method === 'GET' && url.pathname === '/health') {
      return send(res, 200, { status: 'ok', sources: [...sources.keys()], platform: platformUrl });
    }
    const match = /^\/webhooks\/([^/]+)$/.exec(url.pathname);
    if (!match && url.pathname !== '/refunds')
      return send(res, 404, { error: 'not_found', message: 'no such route' });
    if (req.method !== 'POST') return send(res, 405, { error: 'method_not_allowed', message: 'use POST' });
    let source: string | undefined;
    try {
      source = match ? decodeURIComponent(match[1] ?? '') : undefined;
    } catch {
      return send(res, 400, {
        error: 'bad_request',
        field: 'source',
        message: 'the path is not valid percent-encoding',
      });
    }
    const body = await readBody(req, 1024 * 1024 + 1);
    const event = toApiGatewayEvent(req, url, body, source);
    const result = match ? await webhook(event) : await refunds(event);
    res.writeHead(result.statusCode ?? 200, result.headers as Record<string, string>);
    res.end(result.body);
  };
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    // PORT taken: what started so far is stopped, and the caller gets the listen error (EADDRINUSE).
    clearInterval(acceptTimer);
    await sandbox?.close();
    functionAws.sqs.destroy();
    functionAws.dynamo.destroy();
    await emulators.close();
    throw error;
  }
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  if (sandbox) seedShopSubscriptions(sandbox, [...sources.values()], url, env);

  if (options.recoverAfterCrash) {
    const recovered = await recoverAfterCrash(emulators, baseLedger, sandbox !== undefined);
    if (recovered.messages + recovered.leases > 0)
      log(
        `recovered after a crash: ${recovered.messages} messages in flight, ${recovered.leases} add leases`,
      );
  }
  const pollers = new Pollers(emulators, worker, {
    count: options.pollers ?? 2,
    batchSize: options.batchSize ?? WORKER_DEFAULTS.batchSize,
  });
  if (options.autoPoll ?? true) pollers.start();

  return {
    url,
    port,
    sandbox,
    platformUrl,
    emulators,
    sources,
    secrets: Object.fromEntries(Object.keys(LOCAL_SECRETS).map((k) => [k, env[k] ?? ''])),
    ledger,
    addVerifySeconds: (workerDeps.verifyMs ?? DEFAULT_VERIFY_MS) / 1000,
    startPolling: () => pollers.start(),
    stopPolling: () => pollers.stop(),
    waitForIdle: (timeoutMs = 30_000) => waitForIdle(emulators, timeoutMs),
    runAccept: accept,
    async close() {
      clearInterval(acceptTimer);
      await pollers.stop();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await sandbox?.close();
      functionAws.sqs.destroy();
      functionAws.dynamo.destroy();
      await emulators.close();
    },
  };
}

/**
 * A fresh local stack starts with healthy subscriptions in the shop fakes: every topic each shop
 * source needs, delivered to its webhook URL (WooCommerce signing with the source's secret), so
 * `connector doctor` passes until something breaks them (docs/backfill.md).
 */
function seedShopSubscriptions(
  sandbox: RunningSandbox,
  sources: readonly SourceConfig[],
  url: string,
  env: Readonly<Record<string, string | undefined>>,
): void {
  for (const source of sources) {
    if (!hasShopApi(source.platform) || source.shopApi?.url !== sandbox.shops.urls[source.platform]) continue;
    const secret = env[source.secretRef];
    sandbox.shops.control.seedSubscriptions(source.platform, {
      address: `${url}/webhooks/${encodeURIComponent(source.id)}`,
      topics: subscriptionTopics(source),
      ...(secret ? { secret } : {}),
    });
  }
}

/** What `npm start` writes to LOCAL_STATE_FILE: how the operator CLI reaches this stack. */
export function localState(
  stack: LocalStack,
  affiliateToken = stack.sandbox?.token,
): Record<string, unknown> {
  return {
    connectorUrl: stack.url,
    financeApiKey: stack.secrets['FINANCE_API_KEY'],
    secrets: stack.secrets,
    sqsEndpoint: stack.emulators.sqsEndpoint,
    queueUrl: stack.emulators.queueUrl,
    dlqUrl: stack.emulators.dlqUrl,
    dynamoEndpoint: stack.emulators.dynamoEndpoint,
    ledgerTable: stack.emulators.tableName,
    affiliateBaseUrl: stack.platformUrl,
    affiliateToken,
    sources: [...stack.sources.values()],
    // `connector status` words an unclear add's window with it.
    addVerifySeconds: stack.addVerifySeconds,
  };
}

function definedOnly(env: Env): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ''),
  );
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** Reads at most `limit` bytes: enough for the handler to see that a body is over its 1 MiB limit. */
async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buf = chunk as Buffer;
    if (size < limit) chunks.push(buf.subarray(0, limit - size));
    size += buf.byteLength;
  }
  return Buffer.concat(chunks);
}

/** What API Gateway HTTP API (payload format 2.0) hands the function, from a plain request. */
function toApiGatewayEvent(
  req: IncomingMessage,
  url: URL,
  body: Buffer,
  source?: string,
): APIGatewayProxyEventV2 {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(',') : value;
  }
  const now = Date.now();
  return {
    version: '2.0',
    routeKey: source === undefined ? 'POST /refunds' : 'POST /webhooks/{source}',
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    headers,
    ...(source === undefined ? {} : { pathParameters: { source } }),
    requestContext: {
      accountId: 'local',
      apiId: 'local',
      domainName: url.host,
      domainPrefix: 'local',
      http: {
        method: req.method ?? 'POST',
        path: url.pathname,
        protocol: 'HTTP/1.1',
        sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
        userAgent: headers['user-agent'] ?? '',
      },
      requestId: randomUUID(),
      routeKey: source === undefined ? 'POST /refunds' : 'POST /webhooks/{source}',
      stage: '$default',
      time: new Date(now).toISOString(),
      timeEpoch: now,
    },
    body: body.toString('base64'),
    isBase64Encoded: true,
  };
}

async function waitForIdle(emulators: Emulators, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const counts = emulators.counts(emulators.queueName);
    if (counts.ready + counts.inflight + counts.delayed === 0) return;
    if (Date.now() > until) {
      throw new Error(`queue not idle after ${timeoutMs} ms: ${JSON.stringify(counts)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

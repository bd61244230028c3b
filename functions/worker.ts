import { randomUUID } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { dynamoClient, sqsClient } from '../shared/adapters/aws-clients.ts';
import { DynamoLedger } from '../shared/adapters/dynamo-ledger.ts';
import { DynamoPacingBoard } from '../shared/adapters/dynamo-pacing-board.ts';
import { SqsFailureQueue } from '../shared/adapters/sqs.ts';
import { CurrentApiBackend } from '../shared/affiliate/backend.ts';
import {
  AffiliateClient,
  type AffiliateClientEvent,
  type AffiliateClientOptions,
} from '../shared/affiliate/client.ts';
import { parseRouteOverrides } from '../shared/affiliate/routes.ts';
import {
  type Env,
  maxReceiveCountFromEnv,
  optionalNumber,
  requireEnv,
  sourcesFromEnv,
} from '../shared/config/env.ts';
import type { SourceConfig } from '../shared/config/sources.ts';
import { ConfigurationError } from '../shared/errors.ts';
import { lambdaPipeline } from '../shared/lambda.ts';
import { LegacyBackend } from '../shared/legacy/backend.ts';
import type { LegacyClient, LegacyClientEvent, LegacyClientOptions } from '../shared/legacy/client.ts';
import {
  countPlatform429s,
  makeLogger,
  makeMetrics,
  observeWorker,
  reportWaitingRefunds,
} from '../shared/observability.ts';
import type { ConversionBackend, Ledger, SecretStore } from '../shared/ports.ts';
import { awsSecretStore } from '../shared/secrets.ts';
import { type BatchDeps, processBatch, type RecordReport } from '../shared/worker/batch.ts';
import { DEFAULT_VERIFY_MS, settleMsFor } from '../shared/worker/flow.ts';
import {
  measureWaitingRefunds,
  WAITING_REFUNDS_CHECK,
  type WaitingMeasure,
} from '../shared/worker/waiting.ts';

export { WAITING_REFUNDS_CHECK };

export type WorkerHandler = (
  event: SQSEvent | typeof WAITING_REFUNDS_CHECK,
  context: Pick<Context, 'getRemainingTimeInMillis'>,
) => Promise<SQSBatchResponse>;

export type WorkerHandlerDeps = BatchDeps & { readonly reportWaiting?: (measure: WaitingMeasure) => void };

/** Time kept back from the Lambda's remaining time for recording results and answering. */
const SAFETY_MS = 3_000;
/** The affiliate clients' request timeout; an add without a clear answer settles for twice that. */
const AFFILIATE_TIMEOUT_MS = 5_000;
/** An add's lease when LEASE_MS is not set, and the shortest one allowed. */
const DEFAULT_LEASE_MS = 120_000;
const MIN_LEASE_MS = 60_000;

/** SQS FIFO event source: applies events to the platform, answers a partial batch response. */
export function makeHandler(deps: WorkerHandlerDeps): WorkerHandler {
  return async (event, context) => {
    if ('check' in event) {
      deps.reportWaiting?.(await measureWaitingRefunds(deps.ledger, deps.now));
      return { batchItemFailures: [] };
    }
    const deadline = deps.now() + Math.max(0, context.getRemainingTimeInMillis() - SAFETY_MS);
    return processBatch(deps, event.Records, deadline);
  };
}

/** What the worker is wired from, in AWS and in the local stack alike. */
export interface WorkerWiring {
  readonly sqs: SQSClient;
  readonly dynamo: DynamoDBClient;
  readonly secrets: SecretStore;
  /**
   * The settings CDK gives the function: SOURCES, LEDGER_TABLE, QUEUE_URL, DLQ_URL,
   * AFFILIATE_BASE_URL, AFFILIATE_TOKEN_SECRET, AFFILIATE_ROUTES, AFFILIATE_RATE_PER_SECOND,
   * AFFILIATE_INITIAL_RATE_PER_SECOND, LEGACY_BASE_URL, LEGACY_CREDENTIALS_SECRET,
   * LEGACY_RATE_PER_SECOND, MAX_RECEIVE_COUNT (the main queue's redrive maxReceiveCount), and
   * optionally LEASE_MS, ADD_VERIFY_SECONDS and PACING_TABLE.
   */
  readonly env: Env;
  readonly observe?: (report: RecordReport) => void;
  readonly reportWaiting?: (measure: WaitingMeasure) => void;
  /** Each platform client's events (the RateLimited metric counts the platform's 429s). */
  readonly onPlatformEvent?: (event: AffiliateClientEvent | LegacyClientEvent) => void;
  /** Tests only: shorter timings than any setting allows, and wrappers to kill a worker mid-flight. */
  readonly tuning?: WorkerTuning;
}

export interface WorkerTuning {
  readonly client?: Partial<AffiliateClientOptions>;
  readonly leaseMs?: number;
  readonly settleMs?: number;
  readonly verifyMs?: number;
  readonly visibilityBaseSeconds?: number;
  readonly wrapLedger?: (ledger: Ledger) => Ledger;
  readonly wrapBackend?: (backend: ConversionBackend) => ConversionBackend;
}

/**
 * The worker's dependencies: reads the affiliate token (so at cold start), builds the platform
 * clients and picks each source's backend. Fails fast naming a missing or wrong setting.
 */
export async function buildWorkerDeps(wiring: WorkerWiring): Promise<WorkerHandlerDeps> {
  const { env, secrets, tuning = {} } = wiring;
  const tokenRef = requireEnv(env, 'AFFILIATE_TOKEN_SECRET');
  const maxReceiveCount = maxReceiveCountFromEnv(env);
  const timeoutMs = tuning.client?.timeoutMs ?? AFFILIATE_TIMEOUT_MS;
  const client = new AffiliateClient({
    baseUrl: requireEnv(env, 'AFFILIATE_BASE_URL'),
    token: await secrets.get(tokenRef),
    // A token rotated while this container is warm: followed within the max age, and after a 401.
    tokenSource: (options) => secrets.get(tokenRef, options),
    routes: parseRouteOverrides(env['AFFILIATE_ROUTES']),
    ratePerSecond: optionalNumber(env, 'AFFILIATE_RATE_PER_SECOND', 100),
    // Set by the stack: pacing adapts from here to the ceiling above (see RateLimiter.observe).
    initialRatePerSecond:
      env['AFFILIATE_INITIAL_RATE_PER_SECOND'] === undefined
        ? undefined
        : optionalNumber(env, 'AFFILIATE_INITIAL_RATE_PER_SECOND', 1),
    // Set by the stack: the busy instances compare paces there to share each route equally.
    ...(env['PACING_TABLE'] === undefined
      ? {}
      : { fleet: new DynamoPacingBoard({ client: wiring.dynamo, table: env['PACING_TABLE'] }) }),
    timeoutMs,
    onEvent: wiring.onPlatformEvent,
    ...tuning.client,
  });
  const legacy = await legacyClientFromEnv(env, secrets, { timeoutMs, onEvent: wiring.onPlatformEvent });
  const ledger = new DynamoLedger(wiring.dynamo, requireEnv(env, 'LEDGER_TABLE'));
  return {
    ledger: tuning.wrapLedger ? tuning.wrapLedger(ledger) : ledger,
    sources: sourcesFromEnv(env),
    backendFor: backendFor({ current: new CurrentApiBackend(client), legacy, wrap: tuning.wrapBackend }),
    failures: new SqsFailureQueue(wiring.sqs, requireEnv(env, 'QUEUE_URL'), requireEnv(env, 'DLQ_URL')),
    now: Date.now,
    workerId: randomUUID(),
    leaseMs: tuning.leaseMs ?? Math.max(MIN_LEASE_MS, optionalNumber(env, 'LEASE_MS', DEFAULT_LEASE_MS)),
    settleMs: tuning.settleMs ?? settleMsFor(timeoutMs),
    verifyMs: tuning.verifyMs ?? optionalNumber(env, 'ADD_VERIFY_SECONDS', DEFAULT_VERIFY_MS / 1000) * 1000,
    maxReceiveCount,
    ...(tuning.visibilityBaseSeconds === undefined
      ? {}
      : { visibilityBaseSeconds: tuning.visibilityBaseSeconds }),
    observe: wiring.observe,
    reportWaiting: wiring.reportWaiting,
  };
}

export interface BackendsDeps {
  /** The current API's backend (`CurrentApiBackend`), used by sources with `backend: 'current'`. */
  readonly current: ConversionBackend;
  /**
   * The legacy 2.0 client, when the deployment has legacy credentials (`LEGACY_BASE_URL` and
   * `LEGACY_CREDENTIALS_SECRET`). Without it a `backend: 'legacy'` source fails with a
   * `ConfigurationError` that names the missing settings.
   */
  readonly legacy?: LegacyClient;
  /** Lets tests wrap each backend (to kill a worker mid-flight). */
  readonly wrap?: (backend: ConversionBackend, source: SourceConfig) => ConversionBackend;
}

/**
 * The worker's `backendFor`: the source's `backend` setting picks the current API or the legacy
 * 2.0 interface. One backend per source, built on first use.
 */
export function backendFor(deps: BackendsDeps): (source: SourceConfig) => ConversionBackend {
  const built = new Map<string, ConversionBackend>();
  const wrap = deps.wrap ?? ((backend: ConversionBackend) => backend);
  return (source) => {
    const known = built.get(source.id);
    if (known) return known;
    let backend: ConversionBackend;
    if (source.backend === 'legacy') {
      if (!deps.legacy) {
        throw new ConfigurationError(
          `source ${source.id} uses the legacy backend, but LEGACY_BASE_URL and LEGACY_CREDENTIALS_SECRET are not configured`,
        );
      }
      backend = new LegacyBackend(deps.legacy, { commission: source.legacyCommission });
    } else {
      backend = deps.current;
    }
    const wrapped = wrap(backend, source);
    built.set(source.id, wrapped);
    return wrapped;
  };
}

/**
 * The legacy 2.0 client from `LEGACY_BASE_URL` and `LEGACY_CREDENTIALS_SECRET` (a secret reference
 * whose value is `user_code:api_key`), with `LEGACY_RATE_PER_SECOND` (default 100). Undefined when
 * neither is set (no legacy source to serve); one without the other is a configuration error. The
 * credentials are followed while the container stays warm, as the platform token is (see
 * `LegacyClientOptions.credentialsSource`): built once at cold start, the client would keep the old
 * credentials until Lambda recycled the container, parking every legacy message as `configuration`.
 *
 * The client and its schemas are imported here, not at the top: a deployment without legacy
 * credentials (the default) never evaluates them, which took 2 to 3 ms off each cold start of the
 * worker here (2026-11-27), and of the accept job (the bundle keeps them, wrapped by esbuild in a
 * function that the first `import()` runs; test/infra/bundle-size.test.ts checks that no static
 * import reaches them).
 */
export async function legacyClientFromEnv(
  env: Env,
  secrets: SecretStore,
  options: Partial<
    Omit<LegacyClientOptions, 'baseUrl' | 'userCode' | 'apiKey' | 'credentialsSource' | 'credentialsOrigin'>
  > = {},
): Promise<LegacyClient | undefined> {
  const baseUrl = env['LEGACY_BASE_URL']?.trim() ?? '';
  const secretRef = env['LEGACY_CREDENTIALS_SECRET']?.trim() ?? '';
  // The credentials secret turns the legacy interface on; the stack always sets the base URL.
  if (secretRef === '') return undefined;
  if (baseUrl === '') {
    throw new ConfigurationError(
      'missing required setting LEGACY_BASE_URL (the legacy 2.0 interface needs it)',
    );
  }
  const { LegacyClient, parseLegacyCredentials } = await import('../shared/legacy/client.ts');
  const origin = `secret ${secretRef}`;
  return new LegacyClient({
    ratePerSecond: optionalNumber(env, 'LEGACY_RATE_PER_SECOND', 100),
    ...options,
    baseUrl,
    ...parseLegacyCredentials(await secrets.get(secretRef), origin),
    // Credentials rotated while this container is warm: followed within the max age, and after a 401.
    credentialsSource: (read) => secrets.get(secretRef, read),
    credentialsOrigin: origin,
  });
}

const logger = makeLogger();
const metrics = makeMetrics(process.env, logger);

/** The Lambda entry point. */
export const handler: WorkerHandler = lambdaPipeline(
  async () =>
    makeHandler(
      await buildWorkerDeps({
        sqs: sqsClient(),
        dynamo: dynamoClient(),
        secrets: awsSecretStore(process.env),
        env: process.env,
        observe: observeWorker(logger, metrics),
        reportWaiting: reportWaitingRefunds(logger, metrics),
        onPlatformEvent: countPlatform429s(metrics),
      }),
    ),
  { logger, metrics },
);

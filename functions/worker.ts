import { randomUUID } from 'node:crypto';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { dynamoClient, sqsClient } from '../shared/adapters/aws-clients.ts';
import { DynamoLedger } from '../shared/adapters/dynamo-ledger.ts';
import { SqsFailureQueue } from '../shared/adapters/sqs.ts';
import { CurrentApiBackend } from '../shared/affiliate/backend.ts';
import { AffiliateClient } from '../shared/affiliate/client.ts';
import { parseRouteOverrides } from '../shared/affiliate/routes.ts';
import { optionalNumber, requireEnv, sourcesFromEnv } from '../shared/config/env.ts';
import {
  countPlatform429s,
  makeLogger,
  makeMetrics,
  observeWorker,
  publishMetrics,
  reportWaitingRefunds,
} from '../shared/observability.ts';
import { AwsSecretStore } from '../shared/secrets.ts';
import { backendFor, legacyClientFromEnv } from '../shared/worker/backends.ts';
import { type BatchDeps, processBatch } from '../shared/worker/batch.ts';
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

/** Time kept back from the Lambda's remaining time for recording results and answering. */
const SAFETY_MS = 3_000;
/** The affiliate clients' request timeout; an add without a clear answer settles for twice that. */
const AFFILIATE_TIMEOUT_MS = 5_000;

/** SQS FIFO event source: applies events to the platform, answers a partial batch response. */
export function makeHandler(
  deps: BatchDeps & { readonly reportWaiting?: (measure: WaitingMeasure) => void },
): WorkerHandler {
  return async (event, context) => {
    if ('check' in event) {
      deps.reportWaiting?.(await measureWaitingRefunds(deps.ledger, deps.now));
      return { batchItemFailures: [] };
    }
    const deadline = deps.now() + Math.max(0, context.getRemainingTimeInMillis() - SAFETY_MS);
    return processBatch(deps, event.Records, deadline);
  };
}

const logger = makeLogger();
const metrics = makeMetrics();

async function fromEnv(env: NodeJS.ProcessEnv): Promise<WorkerHandler> {
  const secrets = new AwsSecretStore(optionalNumber(env, 'SECRETS_MAX_AGE_SECONDS', 300));
  const sqs = sqsClient();
  const tokenRef = requireEnv(env, 'AFFILIATE_TOKEN_SECRET');
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
    timeoutMs: AFFILIATE_TIMEOUT_MS,
    onEvent: countPlatform429s(metrics),
  });
  const current = new CurrentApiBackend(client);
  const legacy = await legacyClientFromEnv(env, secrets, {
    timeoutMs: AFFILIATE_TIMEOUT_MS,
    onEvent: countPlatform429s(metrics),
  });
  const leaseMs = Math.max(60_000, optionalNumber(env, 'LEASE_MS', 120_000));
  return makeHandler({
    ledger: new DynamoLedger(dynamoClient(), requireEnv(env, 'LEDGER_TABLE')),
    sources: sourcesFromEnv(env),
    backendFor: backendFor({ current, legacy }),
    failures: new SqsFailureQueue(sqs, requireEnv(env, 'QUEUE_URL'), requireEnv(env, 'DLQ_URL')),
    now: Date.now,
    workerId: randomUUID(),
    leaseMs,
    settleMs: settleMsFor(AFFILIATE_TIMEOUT_MS),
    verifyMs: optionalNumber(env, 'ADD_VERIFY_SECONDS', DEFAULT_VERIFY_MS / 1000) * 1000,
    observe: observeWorker(logger, metrics),
    reportWaiting: reportWaitingRefunds(logger, metrics),
  });
}

let wired: Promise<WorkerHandler> | undefined;
export const handler: WorkerHandler = async (event, context) => {
  // A failed cold start (a secret not readable yet) is not cached: the next invocation tries again.
  wired ??= fromEnv(process.env).catch((error: unknown) => {
    wired = undefined;
    throw error;
  });
  try {
    return await (await wired)(event, context);
  } finally {
    publishMetrics(metrics);
  }
};

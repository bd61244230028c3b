import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { type AcceptDeps, type AcceptSummary, runAccept } from '../shared/accept/job.ts';
import { dynamoClient, sqsClient } from '../shared/adapters/aws-clients.ts';
import { DynamoLedger } from '../shared/adapters/dynamo-ledger.ts';
import { type Env, optionalNumber, requireEnv } from '../shared/config/env.ts';
import { ConfigurationError } from '../shared/errors.ts';
import { lambdaPipeline } from '../shared/lambda.ts';
import { countPlatform429s, makeLogger, makeMetrics, reportAccept } from '../shared/observability.ts';
import type { SecretStore } from '../shared/ports.ts';
import { awsSecretStore } from '../shared/secrets.ts';
import { buildWorkerDeps, type WorkerTuning } from './worker.ts';

export type AcceptHandler = (
  event: unknown,
  context: Pick<Context, 'getRemainingTimeInMillis'>,
) => Promise<Omit<AcceptSummary, 'items'>>;

export interface AcceptHandlerDeps extends AcceptDeps {
  /** Accept calls per run (ACCEPT_MAX_PER_RUN): the rest waits for the next hourly run. */
  readonly maxPerRun: number;
  readonly report?: (summary: AcceptSummary) => void;
}

/** Time kept back from the Lambda's remaining time for the last ledger writes and the metrics. */
const SAFETY_MS = 10_000;
/** Accept calls per run when ACCEPT_MAX_PER_RUN is not set. */
export const DEFAULT_ACCEPT_MAX_PER_RUN = 500;

/** The hourly EventBridge schedule: accepts the conversions past their source's return window. */
export function makeHandler(deps: AcceptHandlerDeps): AcceptHandler {
  return async (_event, context) => {
    const deadline = deps.now() + Math.max(0, context.getRemainingTimeInMillis() - SAFETY_MS);
    const summary = await runAccept(deps, { limit: deps.maxPerRun, deadline });
    deps.report?.(summary);
    const { items: _items, ...counts } = summary;
    return counts;
  };
}

/** What the accept function is wired from, in AWS and in the local stack alike. */
export interface AcceptWiring {
  readonly sqs: SQSClient;
  readonly dynamo: DynamoDBClient;
  readonly secrets: SecretStore;
  /**
   * The worker's settings (the same platform clients, pacing and DLQ) and ACCEPT_MAX_PER_RUN
   * (default 500).
   */
  readonly env: Env;
  readonly report?: (summary: AcceptSummary) => void;
  readonly onPlatformEvent?: (event: { readonly type: string; readonly status?: number }) => void;
  /** Tests only, as the worker's. */
  readonly tuning?: WorkerTuning;
}

/**
 * The accept function's dependencies: the worker's platform clients, backends and failure queue
 * (one builder, so pacing, timeouts and credential rotation are the worker's), and the ledger's
 * due-date index. Fails fast naming a missing or wrong setting.
 */
export async function buildAcceptDeps(wiring: AcceptWiring): Promise<AcceptHandlerDeps> {
  const worker = await buildWorkerDeps({
    sqs: wiring.sqs,
    dynamo: wiring.dynamo,
    secrets: wiring.secrets,
    env: wiring.env,
    ...(wiring.onPlatformEvent ? { onPlatformEvent: wiring.onPlatformEvent } : {}),
    ...(wiring.tuning ? { tuning: wiring.tuning } : {}),
  });
  const maxPerRun = optionalNumber(wiring.env, 'ACCEPT_MAX_PER_RUN', DEFAULT_ACCEPT_MAX_PER_RUN);
  if (!Number.isInteger(maxPerRun) || maxPerRun < 1) {
    throw new ConfigurationError('ACCEPT_MAX_PER_RUN must be a whole number of at least 1');
  }
  return {
    ledger: new DynamoLedger(wiring.dynamo, requireEnv(wiring.env, 'LEDGER_TABLE')),
    sources: worker.sources,
    backendFor: worker.backendFor,
    failures: worker.failures,
    now: worker.now,
    leaseMs: worker.leaseMs,
    maxPerRun,
    ...(wiring.report ? { report: wiring.report } : {}),
  };
}

const logger = makeLogger();
const metrics = makeMetrics(process.env, logger);

/** The Lambda entry point. */
export const handler: AcceptHandler = lambdaPipeline(
  async () =>
    makeHandler(
      await buildAcceptDeps({
        sqs: sqsClient(),
        dynamo: dynamoClient(),
        secrets: awsSecretStore(process.env),
        env: process.env,
        report: reportAccept(logger, metrics),
        onPlatformEvent: countPlatform429s(metrics),
      }),
    ),
  { logger, metrics },
);

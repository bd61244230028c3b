import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { sqsClient } from '../shared/adapters/aws-clients.ts';
import { SqsEventQueue } from '../shared/adapters/sqs.ts';
import { type CatchUpDeps, type CatchUpResult, catchUp } from '../shared/backfill/catch-up.ts';
import { type Env, optionalNumber, requireEnv, sourcesFromEnv } from '../shared/config/env.ts';
import type { SourceConfig } from '../shared/config/sources.ts';
import { ConfigurationError } from '../shared/errors.ts';
import { lambdaPipeline } from '../shared/lambda.ts';
import { makeLogger } from '../shared/observability.ts';
import { adapterFor } from '../shared/platforms/registry.ts';
import type { SecretStore } from '../shared/ports.ts';
import { awsSecretStore } from '../shared/secrets.ts';
import { SHOP_MAX_ANSWER_BYTES } from '../shared/shops/http.ts';

/** Hours read back from now when CATCH_UP_HOURS is not set. */
export const DEFAULT_CATCH_UP_HOURS = 48;

export type CatchUpHandler = (
  event: unknown,
  context?: Pick<Context, 'getRemainingTimeInMillis'>,
) => Promise<CatchUpResult>;

/**
 * Time kept back from the function's remaining time: when a source's share ends, the page in hand
 * is still queued to its end (up to 128 Shopify orders, or a slice of a day's Stripe events), then
 * the log lines are written.
 */
export const CATCH_UP_SAFETY_MS = 60_000;

/**
 * The EventBridge schedule's target: catches up every configured source, each within its share of
 * the invocation's time; resolves with the summaries, or rejects naming each source that failed or
 * was not finished (the invocation counts as an error, the CatchUpErrors alarm, and Lambda's retries
 * of an asynchronous invocation run it again: what was queued is a no-op the second time). Without a Lambda context (a test, a
 * local run) each source is read to its end.
 */
export function makeHandler(deps: CatchUpDeps, onResult?: (result: CatchUpResult) => void): CatchUpHandler {
  return async (_event, context) => {
    const deadline =
      context === undefined
        ? undefined
        : deps.now().getTime() + Math.max(0, context.getRemainingTimeInMillis() - CATCH_UP_SAFETY_MS);
    const result = await catchUp(deps, { deadline });
    onResult?.(result);
    const problems = [
      ...result.failed.map((f) => `catch-up failed for source ${f.source}: ${f.reason}`),
      ...result.unfinished.map((u) => `catch-up did not finish source ${u.source}: ${u.reason}`),
    ];
    if (problems.length > 0) throw new Error(problems.join('; '));
    return result;
  };
}

export interface CatchUpWiring {
  readonly sqs: SQSClient;
  readonly secrets: SecretStore;
  /** SOURCES, QUEUE_URL; CATCH_UP_HOURS (default 48); CATCH_UP_SOURCES (comma-separated ids, default every source with shopApi). */
  readonly env: Env;
}

/**
 * The most of one shop answer the function reads: a 32nd of its memory (Lambda's
 * AWS_LAMBDA_FUNCTION_MEMORY_SIZE, in MB), at most SHOP_MAX_ANSWER_BYTES. Parsed, an answer takes
 * about 13 times its size (32 MiB of Shopify orders with their 16-digit ids grew a process by 414
 * MB), so the stack's 256 MB read 8 MiB (and ask Shopify for pages of 128 orders: `shopifyPageSize`).
 */
export function shopAnswerCap(env: Env): number {
  const megabytes = Number(env['AWS_LAMBDA_FUNCTION_MEMORY_SIZE']);
  if (!Number.isFinite(megabytes) || megabytes <= 0) return SHOP_MAX_ANSWER_BYTES;
  return Math.min(SHOP_MAX_ANSWER_BYTES, Math.floor(megabytes / 32) * 1024 * 1024);
}

/** The catch-up's dependencies; fails fast naming a missing or wrong setting. */
export function buildCatchUpDeps(wiring: CatchUpWiring): CatchUpDeps {
  const sources = sourcesFromEnv(wiring.env);
  const listed = wiring.env['CATCH_UP_SOURCES']?.trim();
  let chosen: SourceConfig[];
  if (listed) {
    chosen = listed.split(',').map((raw) => {
      const id = raw.trim();
      const source = sources.get(id);
      if (!source) throw new ConfigurationError(`CATCH_UP_SOURCES: unknown source "${id.slice(0, 64)}"`);
      if (!source.shopApi) throw new ConfigurationError(`CATCH_UP_SOURCES: source ${id} has no shopApi`);
      return source;
    });
  } else {
    chosen = [...sources.values()].filter((s) => s.shopApi !== undefined);
  }
  const hours = optionalNumber(wiring.env, 'CATCH_UP_HOURS', DEFAULT_CATCH_UP_HOURS);
  if (hours <= 0) throw new ConfigurationError('setting CATCH_UP_HOURS must be a positive number of hours');
  return {
    sources: chosen,
    hours,
    secrets: wiring.secrets,
    queue: new SqsEventQueue(wiring.sqs, requireEnv(wiring.env, 'QUEUE_URL')),
    adapterFor,
    now: () => new Date(),
    shopHttp: { maxAnswerBytes: shopAnswerCap(wiring.env) },
  };
}

const logger = makeLogger();

/** The Lambda entry point; one log line per source (counts and reasons only, never a body). */
export const handler: CatchUpHandler = lambdaPipeline(
  async () =>
    makeHandler(
      buildCatchUpDeps({ sqs: sqsClient(), secrets: awsSecretStore(process.env), env: process.env }),
      (result) => {
        for (const s of result.sources) {
          logger.info('catch-up', {
            source: s.source,
            from: result.from,
            to: result.to,
            found: s.found,
            queued: s.queued,
            skipped: s.skipped.length,
            notices: s.notices,
          });
        }
        for (const f of result.failed)
          logger.error('catch-up failed', { source: f.source, reason: f.reason });
        for (const u of result.unfinished) {
          logger.error('catch-up unfinished', {
            source: u.source,
            from: result.from,
            to: result.to,
            found: u.found,
            queued: u.queued,
            reason: u.reason,
          });
        }
      },
    ),
  { logger },
);

import type { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { foreignMessage, isConnectorError } from './errors.ts';

/**
 * A function's Lambda entry point: the handler `wire` builds at the first invocation, run in a middy
 * pipeline with Powertools' middlewares. Each log line carries the invocation's context (request id,
 * function name, cold start). With `metrics`, the invocation's metrics are flushed as one EMF line
 * when it ends, whether it answered or threw, with a ColdStart metric at the first one; a function
 * that counts nothing leaves them out (Metrics adds 12 KiB to its bundle, and its log lines already
 * say `cold_start`). The refunds function counts one thing, its 503s, and so has them.
 *
 * A failed cold start (a secret not readable yet) is not cached: the next invocation wires again.
 * middy ends an invocation that overruns 5 ms before Lambda would, with a TimeoutError, so even that
 * one flushes its metrics (the worker keeps 3 s back and never gets there).
 */
export function lambdaPipeline<E, C, R>(
  wire: () => Promise<(event: E, context: C) => Promise<R>>,
  telemetry: { readonly logger: Logger; readonly metrics?: Metrics },
): (event: E, context: C) => Promise<R> {
  let wired: Promise<(event: E, context: C) => Promise<R>> | undefined;
  const pipeline = middy(async (event: E, context: Context): Promise<R> => {
    wired ??= wire().catch((error: unknown) => {
      wired = undefined;
      throw error;
    });
    try {
      return await (await wired)(event, context as C);
    } catch (error) {
      throw logSafe(error);
    }
  })
    // logEvent false whatever POWERTOOLS_LOGGER_LOG_EVENT says: events carry signatures, the finance
    // key header and buyer data, none of which may reach a log.
    .use(injectLambdaContext(telemetry.logger, { logEvent: false }));
  if (telemetry.metrics) pipeline.use(logMetrics(telemetry.metrics, { captureColdStartMetric: true }));
  return (event, context) => pipeline(event, context as Context);
}

/**
 * A failure as it may leave the function: Lambda's runtime logs its name, message and stack. The
 * connector's own errors leave as they are. Any other (an AWS SDK error, whose message may echo the
 * signed request, session token included) is replaced by one of the same name, with
 * `foreignMessage`'s line for a message and the original's stack frames.
 */
function logSafe(error: unknown): unknown {
  if (!(error instanceof Error) || isConnectorError(error)) return error;
  const safe = new Error(foreignMessage(error.message, Number.POSITIVE_INFINITY));
  safe.name = error.name;
  const frames = (error.stack ?? '').split('\n').filter((line) => /^\s+at /.test(line));
  safe.stack = [`${safe.name}: ${safe.message}`, ...frames].join('\n');
  return safe;
}

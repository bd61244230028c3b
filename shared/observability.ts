import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { MetricsOptions } from '@aws-lambda-powertools/metrics/types';
import type { AcceptSummary } from './accept/job.ts';
import type { FinanceOutcome } from './finance.ts';
import type { IngestOutcome } from './ingest.ts';
import type { RecordReport } from './worker/batch.ts';
import type { WaitingMeasure } from './worker/waiting.ts';

/**
 * Logs and metrics of the connector. Log lines carry externalId, source and message id; never a
 * secret, a body, or the buyer's IP. Metric names are the ones the CDK dashboard and alarms use.
 */
export const METRIC = {
  conversionsAdded: 'ConversionsAdded',
  refundsApplied: 'RefundsApplied',
  conversionsRefused: 'ConversionsRefused',
  /** A refund or cancellation recorded before its order's conversion exists (held in the ledger). */
  refundsAwaitingOrder: 'RefundsAwaitingOrder',
  /** Hourly: refunds the ledger holds for orders not added yet, and the age of the oldest (seconds). */
  refundsWaitingForOrder: 'RefundsWaitingForOrder',
  oldestWaitingRefundSeconds: 'OldestWaitingRefundSeconds',
  /** A refund the platform could no longer apply (locked conversion), left to finance. */
  lateRefunds: 'LateRefunds',
  /** An order of a shadow source, recorded and not sent. */
  ordersShadowed: 'OrdersShadowed',
  duplicatesSkipped: 'DuplicatesSkipped',
  ordersSkipped: 'OrdersSkipped',
  rateLimited: 'RateLimited',
  transientFailures: 'TransientFailures',
  permanentFailures: 'PermanentFailures',
  webhooksQueued: 'WebhooksQueued',
  webhooksRejected: 'WebhooksRejected',
  /**
   * A 503 the function answered itself because a dependency was out of reach (a secret, the ledger,
   * the queue): Lambda's Errors metric does not see it, and each has an alarm. Never a 4xx.
   */
  webhooksUnavailable: 'WebhooksUnavailable',
  financeRefundsUnavailable: 'FinanceRefundsUnavailable',
  /** The accept job: conversions accepted, accept failures (parked or to retry), due ones left. */
  conversionsAccepted: 'ConversionsAccepted',
  acceptFailures: 'AcceptFailures',
  acceptDueLeft: 'AcceptDueLeft',
} as const;

/** What an observer needs of metrics (Powertools' `Metrics`; a counter in tests). */
export interface MetricsSink {
  addMetric(name: string, unit: Parameters<Metrics['addMetric']>[1], value: number): unknown;
}

/** Service name and namespace come from the Powertools variables CDK sets, so alarms watch what is emitted. */
export function makeLogger(env: NodeJS.ProcessEnv = process.env): Logger {
  return new Logger({ serviceName: env['POWERTOOLS_SERVICE_NAME'] ?? 'conversion-connector' });
}

/** Metrics whose own warnings go to `logger`, as JSON lines (see `metricsWarnings`). */
export function makeMetrics(env: NodeJS.ProcessEnv = process.env, logger: Logger = makeLogger(env)): Metrics {
  return new Metrics({
    namespace: env['POWERTOOLS_METRICS_NAMESPACE'] ?? 'ConversionConnector',
    serviceName: env['POWERTOOLS_SERVICE_NAME'] ?? 'conversion-connector',
    logger: metricsWarnings(logger),
  });
}

/**
 * What Metrics may say about itself. Left to itself it prints plain text, and `logMetrics` flushes
 * after every invocation, warning "No application metrics to publish" (even with
 * `throwOnEmptyMetrics` false) whenever an invocation counted nothing: an ignored topic, a ping.
 * That is normal here, so that one warning is a debug line; any other goes to the logger as is.
 */
function metricsWarnings(logger: Logger): NonNullable<MetricsOptions['logger']> {
  return {
    debug: (...content) => logger.debug(String(content[0])),
    info: (...content) => logger.info(String(content[0])),
    warn: (...content) => {
      const message = String(content[0]);
      if (message.startsWith('No application metrics to publish')) logger.debug(message);
      else logger.warn(message);
    },
    error: (...content) => logger.error(String(content[0])),
  };
}

/**
 * Counts the platform's 429s (RateLimited, which an alarm watches) from a client's events. The
 * client's own pacing also reports `rate_limited`, without a status: that is the limiter working,
 * not the platform refusing, and is not counted.
 */
export function countPlatform429s(metrics: Metrics): (event: { type: string; status?: number }) => void {
  return (event) => {
    if (event.type === 'rate_limited' && event.status === 429) {
      metrics.addMetric(METRIC.rateLimited, MetricUnit.Count, 1);
    }
  };
}

/** The webhook's outcomes: log lines with the ids, WebhooksQueued / Rejected / Unavailable counts. */
export function observeIngest(logger: Logger, metrics: MetricsSink): (outcome: IngestOutcome) => void {
  return (outcome) => {
    const line = {
      source: outcome.source,
      status: outcome.status,
      result: outcome.result,
      detail: outcome.detail,
      externalId: outcome.externalIds?.join(','),
      messageId: outcome.messageIds?.join(','),
    };
    if (outcome.result === 'queued') {
      metrics.addMetric(METRIC.webhooksQueued, MetricUnit.Count, 1);
      logger.info('webhook queued', line);
    } else if (outcome.result === 'rejected') {
      metrics.addMetric(METRIC.webhooksRejected, MetricUnit.Count, 1);
      logger.warn('webhook rejected', line);
    } else if (outcome.result === 'unavailable') {
      // Every 503 of the webhook is ours to fix: a signing secret unreadable or missing, SQS refusing.
      metrics.addMetric(METRIC.webhooksUnavailable, MetricUnit.Count, 1);
      logger.error('webhook not queued', line);
    } else {
      logger.info(`webhook ${outcome.result}`, line);
    }
  };
}

/**
 * `POST /refunds`: the ids of a queued refund, the field a 400 names, what failed behind a 503; a
 * 503 for a finance key, ledger or queue out of reach (or a finance key too weak to accept) counted
 * in FinanceRefundsUnavailable.
 */
export function observeFinance(logger: Logger, metrics: MetricsSink): (outcome: FinanceOutcome) => void {
  return (outcome) => {
    const line = { ...outcome };
    if (outcome.result === 'rejected') logger.warn('finance refund rejected', line);
    else if (outcome.result === 'unavailable') {
      metrics.addMetric(METRIC.financeRefundsUnavailable, MetricUnit.Count, 1);
      logger.error('finance refund not queued', line);
    } else if (outcome.result === 'busy') {
      // Partial refunds of one order sent so close together that this one lost every round of
      // reserving (finance.ts `reserve`): nothing is down, and finance's retry a second later settles it.
      logger.warn('finance refund not queued: its order busy', line);
    } else logger.info('finance refund', line);
  };
}

export function observeWorker(logger: Logger, metrics: MetricsSink): (report: RecordReport) => void {
  return (report) => {
    const line = {
      messageId: report.messageId,
      externalId: report.event?.externalId,
      source: report.event?.source,
      eventType: report.event?.type,
      receiveCount: report.receiveCount,
      result: report.outcome?.result,
      conversionId: report.outcome?.conversionId,
      amount: report.outcome?.amount,
      detail: report.outcome?.detail,
      failureClass: report.failureClass,
      reason: report.reason,
      platformStatus: report.platformStatus,
    };
    if (report.status === 'done') {
      const metric = {
        added: METRIC.conversionsAdded,
        reconciled: METRIC.conversionsAdded,
        duplicate: METRIC.duplicatesSkipped,
        refund_duplicate: METRIC.duplicatesSkipped,
        skipped: METRIC.ordersSkipped,
        refund_skipped: undefined,
        refund_waiting: METRIC.refundsAwaitingOrder,
        already_refused: undefined,
        refund_applied: METRIC.refundsApplied,
        refused: METRIC.conversionsRefused,
        shadowed: METRIC.ordersShadowed,
        refund_shadowed: undefined,
      }[report.outcome?.result ?? 'skipped'];
      if (metric) metrics.addMetric(metric, MetricUnit.Count, 1);
      logger.info('event processed', line);
    } else if (report.status === 'retry') {
      metrics.addMetric(METRIC.transientFailures, MetricUnit.Count, 1);
      logger.warn('event will be retried', line);
    } else if (report.status === 'late_refund') {
      metrics.addMetric(METRIC.lateRefunds, MetricUnit.Count, 1);
      logger.warn('late refund recorded for finance', line);
    } else if (report.status === 'parked') {
      // Parked on the queue's last receive, still failing transiently: a transient failure still.
      const metric =
        report.failureClass === 'transient' ? METRIC.transientFailures : METRIC.permanentFailures;
      metrics.addMetric(metric, MetricUnit.Count, 1);
      logger.error('event parked in the DLQ', line);
    } else {
      logger.info('event deferred behind a failed message of its group', line);
    }
  };
}

/** The hourly measure of refunds waiting for their order, as the metrics an alarm watches. */
export function reportWaitingRefunds(logger: Logger, metrics: Metrics): (measure: WaitingMeasure) => void {
  return (measure) => {
    metrics.addMetric(METRIC.refundsWaitingForOrder, MetricUnit.Count, measure.waiting);
    metrics.addMetric(METRIC.oldestWaitingRefundSeconds, MetricUnit.Seconds, measure.oldestSeconds);
    if (measure.waiting > 0) logger.info('refunds waiting for their order', { ...measure });
  };
}

/** One run of the accept job: its counts as metrics (an alarm watches failures and due ones left), its orders as log lines. */
export function reportAccept(logger: Logger, metrics: Metrics): (summary: AcceptSummary) => void {
  return (summary) => {
    metrics.addMetric(METRIC.conversionsAccepted, MetricUnit.Count, summary.accepted);
    metrics.addMetric(METRIC.acceptFailures, MetricUnit.Count, summary.failed);
    metrics.addMetric(METRIC.acceptDueLeft, MetricUnit.Count, summary.dueLeft);
    for (const item of summary.items) {
      const line = { ...item };
      if (item.result === 'failed') logger.error('conversion not accepted: parked in the DLQ', line);
      else if (item.result === 'retry') logger.warn('conversion not accepted: next run', line);
      else logger.info(`conversion ${item.result}`, line);
    }
    const { items: _items, ...counts } = summary;
    logger.info('accept run', counts);
  };
}

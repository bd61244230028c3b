import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { DEAD_LETTER_RETENTION_DAYS } from './deploy-config.ts';

/** The metrics the functions emit with Powertools (EMF), dimension `service`. */
const ORDER_METRICS = [
  'ConversionsAdded',
  'RefundsApplied',
  'ConversionsRefused',
  'DuplicatesSkipped',
  'RefundsAwaitingOrder',
  'RefundsWaitingForOrder',
  'LateRefunds',
  'OrdersShadowed',
];
const FAILURE_METRICS = ['RateLimited', 'TransientFailures', 'PermanentFailures'];
/** WebhooksUnavailable and FinanceRefundsUnavailable: 503s the functions answered themselves (alarmed). */
const INTAKE_METRICS = [
  'WebhooksQueued',
  'WebhooksRejected',
  'WebhooksUnavailable',
  'FinanceRefundsUnavailable',
  'OrdersSkipped',
];
const ACCEPT_METRICS = ['ConversionsAccepted', 'AcceptFailures', 'AcceptDueLeft'];
export const CONNECTOR_METRICS: readonly string[] = [
  ...INTAKE_METRICS,
  ...ORDER_METRICS,
  ...FAILURE_METRICS,
  ...ACCEPT_METRICS,
];

export interface ConnectorMonitoringProps {
  /** Powertools metrics namespace (POWERTOOLS_METRICS_NAMESPACE). */
  readonly namespace: string;
  /** Powertools service name: the `service` dimension of every connector metric. */
  readonly serviceName: string;
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
  readonly worker: lambda.IFunction;
  /**
   * The function behind the shops' webhook URLs: alarms on its errors and throttles, and on the 503s
   * it answers itself when a signing secret or the queue is out of reach (WebhooksUnavailable). Its
   * failures leave nothing in any queue, so nothing else would fire.
   * @default - no intake alarms
   */
  readonly webhook?: lambda.IFunction;
  /**
   * The function behind finance's `POST /refunds`: alarms on its errors and throttles, and on the
   * 503s it answers itself when the finance key, the ledger or the queue is out of reach
   * (FinanceRefundsUnavailable). Its failures leave nothing in any queue either (finance gets the
   * error, the operator nothing else).
   * @default - no refunds alarms
   */
  readonly refunds?: lambda.IFunction;
  /** The hourly accept function (acceptAfterDays): alarms on its errors, failures and backlog. */
  readonly accept?: lambda.IFunction;
  /**
   * The daily catch-up (catchUp.enabled): alarms on its failed runs, each a shop that failed or was
   * not read to the end within its share of the run's time.
   * @default - no catch-up alarm
   */
  readonly catchUp?: lambda.IFunction;
  /** All functions, for the dashboard's Lambda widgets. */
  readonly functions: Readonly<Record<string, lambda.IFunction>>;
  /** Alarm when the oldest message in the main queue is older than this. */
  readonly oldestMessageAge: Duration;
  /**
   * Alarm (`DeadLetterExpiring`) when a message has been in the DLQ this long: SQS deletes it at
   * DEAD_LETTER_RETENTION_DAYS, so this must leave time to act before then.
   * @default Duration.days(10)
   */
  readonly deadLetterAge?: Duration;
  /** Alarm when the platform answered 429 more often than this in 5 minutes. */
  readonly rateLimitedPer5Minutes: number;
  /**
   * Alarm when a refund has waited in the ledger this long for its order (the worker's hourly
   * check measures it). @default Duration.hours(24)
   */
  readonly refundWaitingForOrder?: Duration;
  readonly dashboardName: string;
  /**
   * E-mail address subscribed to an SNS topic that receives every alarm and its recovery.
   * @default - no topic, alarms only show in the console and dashboard
   */
  readonly alarmEmail?: string;
}

/**
 * Alarms and a dashboard for the connector. Missing data is "not breaching" everywhere but on the
 * DLQ's count: no orders means no metrics, which is not a fault.
 */
export class ConnectorMonitoring extends Construct {
  readonly alarms: readonly cloudwatch.Alarm[];
  readonly dashboard: cloudwatch.Dashboard;
  readonly topic?: sns.Topic;

  constructor(scope: Construct, id: string, props: ConnectorMonitoringProps) {
    super(scope, id);
    const connectorMetric = (metricName: string, statistic = cloudwatch.Stats.SUM) =>
      new cloudwatch.Metric({
        namespace: props.namespace,
        metricName,
        dimensionsMap: { service: props.serviceName },
        statistic,
        period: Duration.minutes(5),
      });

    const alarms = [
      new cloudwatch.Alarm(this, 'DeadLetterMessages', {
        alarmDescription:
          'Orders are parked in the dead-letter queue: `connector dlq list` shows why; fix the cause, then replay them (docs/runbook.md). The alarm stays on until the DLQ is empty.',
        metric: props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
          statistic: cloudwatch.Stats.MAXIMUM,
          period: Duration.minutes(1),
        }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        // SQS reports a queue's metrics while it is active: while it holds messages, or for six
        // hours after a call on it (AWS: "active for up to six hours if it contains any messages,
        // or if any action accesses it"). A DLQ holding parked orders keeps reporting their count;
        // only an empty one nothing calls goes quiet. Should data still go missing, "ignore" keeps
        // the state instead of turning OK, and e-mailing OK, with orders possibly still parked.
        treatMissingData: cloudwatch.TreatMissingData.IGNORE,
      }),
      deadLetterExpiring(this, props.deadLetterQueue, props.deadLetterAge ?? Duration.days(10)),
      new cloudwatch.Alarm(this, 'OldestMessageAge', {
        alarmDescription:
          'The main queue is not draining: the worker is failing, throttled or rate limited for longer than retries explain.',
        metric: props.queue.metricApproximateAgeOfOldestMessage({
          statistic: cloudwatch.Stats.MAXIMUM,
          period: Duration.minutes(1),
        }),
        threshold: props.oldestMessageAge.toSeconds(),
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 5,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      new cloudwatch.Alarm(this, 'WorkerErrors', {
        alarmDescription:
          'The worker failed whole invocations (crash, timeout or bad configuration), not single orders.',
        metric: props.worker.metricErrors({ statistic: cloudwatch.Stats.SUM, period: Duration.minutes(5) }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      new cloudwatch.Alarm(this, 'WorkerThrottles', {
        alarmDescription:
          'Lambda throttled the worker: the account concurrency is exhausted (raise it or lower other functions).',
        metric: props.worker.metricThrottles({
          statistic: cloudwatch.Stats.SUM,
          period: Duration.minutes(5),
        }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      new cloudwatch.Alarm(this, 'RefundWaitingForOrder', {
        alarmDescription:
          'A refund or cancellation has waited too long for its order: the shop never sent the order, or it came under another id or source. `connector reconcile` lists them.',
        metric: connectorMetric('OldestWaitingRefundSeconds', cloudwatch.Stats.MAXIMUM).with({
          period: Duration.hours(1),
        }),
        threshold: (props.refundWaitingForOrder ?? Duration.hours(24)).toSeconds(),
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
      new cloudwatch.Alarm(this, 'RateLimited', {
        alarmDescription:
          'The affiliate platform keeps answering 429: more than the pacing’s own probes: a client that ignores the limit shares the token, or the limit changed (check affiliate.rateLimitPerSecond).',
        metric: connectorMetric('RateLimited'),
        threshold: props.rateLimitedPer5Minutes,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    ];
    if (props.webhook !== undefined) alarms.push(...webhookAlarms(this, props.webhook, connectorMetric));
    if (props.refunds !== undefined) alarms.push(...refundsAlarms(this, props.refunds, connectorMetric));
    if (props.accept !== undefined) alarms.push(...acceptAlarms(this, props.accept, connectorMetric));
    if (props.catchUp !== undefined) {
      alarms.push(
        anyInFiveMinutes(this)(
          'CatchUpErrors',
          'The daily catch-up failed a run: a shop refused or failed (`catch-up failed` log lines), or was not read to the end within its share of the run, a shop answering 429 with long waits or slowly (`catch-up unfinished`, with what the shop was doing). The other shops were caught up; what it missed shows in no queue. Each line names the source and the `connector backfill` to run; a source unfinished on every run in its window (catchUp.hours) leaves a gap only that backfill closes.',
          props.catchUp.metricErrors(FIVE_MINUTES),
        ),
      );
    }
    this.alarms = alarms;

    if (props.alarmEmail !== undefined) {
      this.topic = new sns.Topic(this, 'AlarmTopic', { enforceSSL: true });
      // enforceSSL gives the topic a policy of its own, which replaces SNS's default one (that let the
      // account's services publish): without this statement CloudWatch may not publish, and every
      // alarm action fails, visible only in the alarm's history.
      this.topic.addToResourcePolicy(
        new iam.PolicyStatement({
          principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
          actions: ['sns:Publish'],
          resources: [this.topic.topicArn],
          conditions: { ArnEquals: { 'aws:SourceArn': alarms.map((alarm) => alarm.alarmArn) } },
        }),
      );
      this.topic.addSubscription(new subscriptions.EmailSubscription(props.alarmEmail));
      const action = new actions.SnsAction(this.topic);
      for (const alarm of alarms) {
        alarm.addAlarmAction(action);
        alarm.addOkAction(action);
      }
    }

    const graph = (title: string, metrics: cloudwatch.IMetric[], width = 8) =>
      new cloudwatch.GraphWidget({ title, left: metrics, width, height: 6 });
    const fns = Object.entries(props.functions);
    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', {
      dashboardName: props.dashboardName,
      defaultInterval: Duration.days(1),
      widgets: [
        [new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms, width: 24, height: 3 })],
        [
          graph(
            'Intake: webhooks and finance refunds',
            INTAKE_METRICS.map((m) => connectorMetric(m)),
            6,
          ),
          graph(
            'Orders',
            ORDER_METRICS.map((m) => connectorMetric(m)),
            6,
          ),
          graph(
            'Failures',
            FAILURE_METRICS.map((m) => connectorMetric(m)),
            6,
          ),
          graph(
            'Queues',
            [
              props.queue.metricApproximateNumberOfMessagesVisible({ label: 'main: visible' }),
              props.queue.metricApproximateAgeOfOldestMessage({ label: 'main: oldest (s)' }),
              props.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ label: 'DLQ: visible' }),
            ],
            6,
          ),
        ],
        [
          graph(
            'Accept after the return window (hourly)',
            ACCEPT_METRICS.map((m) => connectorMetric(m).with({ period: Duration.hours(1) })),
            24,
          ),
        ],
        [
          graph(
            'Invocations',
            fns.map(([name, fn]) => fn.metricInvocations({ label: name, statistic: cloudwatch.Stats.SUM })),
          ),
          graph(
            'Errors and throttles',
            fns.flatMap(([name, fn]) => [
              fn.metricErrors({ label: `${name} errors`, statistic: cloudwatch.Stats.SUM }),
              fn.metricThrottles({ label: `${name} throttles`, statistic: cloudwatch.Stats.SUM }),
            ]),
          ),
          graph(
            'Duration p99 (ms)',
            fns.map(([name, fn]) => fn.metricDuration({ label: name, statistic: cloudwatch.Stats.p(99) })),
          ),
        ],
      ],
    });
  }
}

const FIVE_MINUTES = { statistic: cloudwatch.Stats.SUM, period: Duration.minutes(5) };

/**
 * The second warning for parked orders: `DeadLetterMessages` fires once, at the first park, and SQS
 * deletes a message DEAD_LETTER_RETENTION_DAYS after it (a FIFO DLQ's age and retention both count
 * from the park or the move). Missing data is "not breaching": SQS reports this metric while the
 * queue holds a message, so it is missing only when the DLQ is empty, nothing left to expire, and
 * the alarm turns OK (and e-mails OK) once the DLQ is dealt with. SQS leaves a message received
 * repeatedly and never deleted (a "poison pill") out of this metric; every `dlq list` receives each
 * message once, so one listed many times may no longer count here: the runbook says so.
 */
function deadLetterExpiring(scope: Construct, deadLetterQueue: sqs.IQueue, age: Duration): cloudwatch.Alarm {
  const days = age.toDays({ integral: false });
  return new cloudwatch.Alarm(scope, 'DeadLetterExpiring', {
    alarmDescription: `A message has been in the dead-letter queue for more than ${days} days: SQS deletes it ${DEAD_LETTER_RETENTION_DAYS} days after it was parked, and the order or refund is then lost for good. \`connector dlq list\` shows it and why it was parked; fix the cause and replay it (\`connector dlq replay\`), or settle it by hand and discard it (\`connector dlq discard\`), before then (docs/runbook.md).`,
    metric: deadLetterQueue.metricApproximateAgeOfOldestMessage({
      statistic: cloudwatch.Stats.MAXIMUM,
      period: Duration.hours(1),
    }),
    threshold: age.toSeconds(),
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
}

/** An alarm on any count of `metric` in one period, for the functions whose failures queue nothing. */
function anyInFiveMinutes(scope: Construct) {
  return (id: string, alarmDescription: string, metric: cloudwatch.IMetric) =>
    new cloudwatch.Alarm(scope, id, {
      alarmDescription,
      metric,
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
}

/**
 * The webhook function's alarms. A webhook function that cannot start (a bad setting after a
 * deploy) or that Lambda throttles (its reserved concurrency spent) refuses every shop delivery
 * with API Gateway's 500: WooCommerce does not retry and disables the webhook after a few, Shopify
 * removes the subscription after its retries, and no message reaches the queue or the DLQ. One that
 * runs but cannot read a source's signing secret or send to SQS answers 503 itself, which the shops
 * treat the same way and Lambda counts as a success: WebhooksUnavailable counts those (never a 4xx,
 * so a flood of forged signatures pages no one).
 */
function webhookAlarms(
  scope: Construct,
  webhook: lambda.IFunction,
  connectorMetric: (name: string) => cloudwatch.Metric,
): cloudwatch.Alarm[] {
  const alarm = anyInFiveMinutes(scope);
  return [
    alarm(
      'WebhookErrors',
      'The webhook function failed whole invocations (bad configuration, crash, timeout): shops got a 500 and their orders were not queued. Read its logs; shops that gave up need their webhooks re-enabled (`connector doctor`) and a backfill.',
      webhook.metricErrors(FIVE_MINUTES),
    ),
    alarm(
      'WebhookThrottles',
      'Lambda throttled the webhook function (ingest.reservedConcurrency spent): shops got an error and their orders were not queued. Raise ingest.reservedConcurrency or the route throttles; backfill what was refused.',
      webhook.metricThrottles(FIVE_MINUTES),
    ),
    alarm(
      'WebhookUnavailable',
      'The webhook function answered shops 503 (WebhooksUnavailable): it could not read a source’s signing secret in Secrets Manager, or SQS refused or timed out the send, so those orders were not queued. The function did not fail, so WebhookErrors stays quiet; 4xx answers (bad signatures, bad input) are not counted. Its log line `webhook not queued` names the source and the cause (detail). Fix the secret (it exists, has a value, the function may read it) or the queue; shops retry for a while, then Shopify removes the subscription and WooCommerce disables the webhook: `connector doctor` finds those, `connector subscribe --source <id>` restores them, then `connector backfill --source <id> --from <outage start>`.',
      connectorMetric('WebhooksUnavailable'),
    ),
  ];
}

/**
 * The refunds function's alarms. A refunds function that cannot start (a bad setting after a
 * deploy), crashes or times out answers finance's `POST /refunds` with API Gateway's 500, and one
 * that Lambda throttles (it has no reserved concurrency: the account's pool is spent) with an error
 * too. Finance sees it, but the refund is not queued, so neither the queue nor the DLQ tells the
 * operator. A finance key, ledger or queue out of reach is a 503 the function answers itself, not
 * an error of the function: FinanceRefundsUnavailable counts those (never a 4xx: a wrong key or a
 * bad body is finance's to fix, and answered to finance).
 */
function refundsAlarms(
  scope: Construct,
  refunds: lambda.IFunction,
  connectorMetric: (name: string) => cloudwatch.Metric,
): cloudwatch.Alarm[] {
  const alarm = anyInFiveMinutes(scope);
  return [
    alarm(
      'RefundsErrors',
      'The refunds function failed whole invocations (bad configuration, crash, timeout): finance got a 500 and those refunds were not queued. Read its logs and run `connector doctor`; once fixed, finance sends them again (a refundId counts once, so a repeat is harmless).',
      refunds.metricErrors(FIVE_MINUTES),
    ),
    alarm(
      'RefundsThrottles',
      "Lambda throttled the refunds function (it has no reserved concurrency: the account's concurrency is spent): finance got an error and those refunds were not queued. Find what takes the account's concurrency (raise the quota or lower the others); finance sends the refunds again.",
      refunds.metricThrottles(FIVE_MINUTES),
    ),
    alarm(
      'RefundsUnavailable',
      'POST /refunds answered finance 503 (FinanceRefundsUnavailable): the finance key in Secrets Manager could not be read (or is too short to accept), or the ledger (DynamoDB) or the queue (SQS) refused or timed out, so those refunds were not queued. The function did not fail, so RefundsErrors stays quiet; 4xx answers (wrong key, bad input) are not counted. Its log line `finance refund not queued` names the cause (detail: finance key, ledger or queue). Fix it (`connector doctor` checks the finance key); then finance sends the refused refunds again: a refundId counts once, so a repeat is harmless.',
      connectorMetric('FinanceRefundsUnavailable'),
    ),
  ];
}

/** The accept job's alarms: the function failing, conversions the platform would not accept, a backlog. */
function acceptAlarms(
  scope: Construct,
  accept: lambda.IFunction,
  connectorMetric: (name: string, statistic?: string) => cloudwatch.Metric,
): cloudwatch.Alarm[] {
  const hourly = { period: Duration.hours(1) };
  return [
    new cloudwatch.Alarm(scope, 'AcceptErrors', {
      alarmDescription:
        'The accept function failed whole runs (crash, timeout or bad configuration): due conversions wait. Read its logs.',
      metric: accept.metricErrors({ statistic: cloudwatch.Stats.SUM, ...hourly }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }),
    new cloudwatch.Alarm(scope, 'AcceptFailed', {
      alarmDescription:
        'Conversions due for acceptance were not accepted: the ones the platform refuses are in the DLQ (eventType ConversionAccept) with the reason; the others are retried next hour.',
      metric: connectorMetric('AcceptFailures').with(hourly),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }),
    new cloudwatch.Alarm(scope, 'AcceptBacklog', {
      alarmDescription:
        'Conversions have been due for acceptance for a day without being accepted: refunds pending on them (see `connector status`), or more due each hour than accept.maxPerRun. `connector accept --dry-run` lists them.',
      // The fewest left in any hourly run, for 24 runs in a row: one busy hour does not fire it.
      metric: connectorMetric('AcceptDueLeft', cloudwatch.Stats.MINIMUM).with(hourly),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 24,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }),
  ];
}

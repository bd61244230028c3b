import { fileURLToPath } from 'node:url';
import { CfnOutput, Duration, RemovalPolicy, Stack, type StackProps, Token, Validations } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import type { CfnStage } from 'aws-cdk-lib/aws-apigatewayv2';
import * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { ACCEPT_DUE_INDEX, RESERVATIONS_PREFIX } from '../shared/adapters/dynamo-ledger.ts';
import { SourceConfig } from '../shared/config/sources.ts';
import { WAITING_REFUNDS_CHECK } from '../shared/worker/waiting.ts';
import {
  type DeployConfig,
  MAIN_QUEUE_VISIBILITY_TIMEOUT_SECONDS,
  oldestMessageAgeDefaultSeconds,
  WORKER_TIMEOUT_SECONDS,
  workerInitialRatePerSecond,
  workerRatePerSecond,
} from './deploy-config.ts';
import { FifoQueuePair } from './fifo-queue-pair.ts';
import { FinanceKeyCheck } from './finance-key-check.ts';
import { ConnectorMonitoring } from './monitoring.ts';
import { ownCodeSourceMapCommand } from './own-code-source-map.ts';

/** The repository root: entries, package-lock.json and tsconfig.json are found from here. */
export const PROJECT_ROOT = fileURLToPath(new URL('..', import.meta.url));

export type ConnectorFunctionName = 'webhook' | 'refunds' | 'worker' | 'accept';

export interface ConnectorFunctionSpec {
  /** Entry file, relative to the project root. */
  readonly entry: string;
  readonly memorySize: number;
  readonly timeout: Duration;
  readonly description: string;
}

/** The connector's Lambda functions (the catch-up's is built apart), their sizes and why. */
export const CONNECTOR_FUNCTIONS: Readonly<Record<ConnectorFunctionName, ConnectorFunctionSpec>> = {
  // Shops want a fast 2xx (Shopify within 5 s, else it retries; WooCommerce gives up). The handler
  // only verifies a signature and enqueues, so the cost is the cold start: Lambda gives CPU in
  // proportion to memory, and 512 MB on ARM keeps the init of the bundle well under a second. The
  // timeout is twice the shops' deadline: a cold start plus an SQS retry still gets the message
  // enqueued (the shop's own retry is then deduplicated), a hung call is cut long before API
  // Gateway's 30 s.
  webhook: {
    entry: 'functions/webhook.ts',
    memorySize: 512,
    timeout: Duration.seconds(10),
    description: 'Verifies shop webhooks and enqueues order events',
  },
  // Same shape as the webhook: a finance tool waits for the answer, the work is one read and one send.
  refunds: {
    entry: 'functions/refunds.ts',
    memorySize: 512,
    timeout: Duration.seconds(10),
    description: 'Accepts refunds from the finance API and enqueues them',
  },
  // A batch holds up to `worker.batchSize` messages (5 by default, at most 10), its message groups
  // side by side and each group's in order, each a few platform calls paced by the rate limiter and
  // possibly one 429 wait: 30 s covers a batch of slow answers. The worker mostly waits on the network, so 512 MB is plenty. The main queue's
  // visibility timeout is derived from this (6x).
  worker: {
    entry: 'functions/worker.ts',
    memorySize: 512,
    timeout: Duration.seconds(WORKER_TIMEOUT_SECONDS),
    description: 'Delivers queued order events to the affiliate platform',
  },
  // Hourly, up to accept.maxPerRun accept calls paced like the worker's (a few per second at the
  // least): 5 minutes covers the default 500 with room for 429 waits; what is left waits an hour.
  accept: {
    entry: 'functions/accept.ts',
    memorySize: 512,
    timeout: Duration.minutes(5),
    description: 'Accepts conversions past their source return window (hourly)',
  },
};

/**
 * The scheduled catch-up (`catchUp.enabled`): a backfill of the last hours from each shop's API.
 * Reading a busy shop's two days is a few hundred pages at the shops' rate limits (Shopify's REST
 * bucket: 2 calls/s), minutes rather than seconds; the work is waiting on the network.
 */
export const CATCH_UP_FUNCTION: ConnectorFunctionSpec = {
  entry: 'functions/catch-up.ts',
  memorySize: 256,
  timeout: Duration.minutes(10),
  description: "Daily catch-up: queues what the shops' webhooks missed, read from the shops' APIs",
};

/** The AWS SDK's default credential chain, which the Lambda bundles replace (CONNECTOR_BUNDLING). */
export const CREDENTIAL_CHAIN_PACKAGE = '@aws-sdk/credential-provider-node';

/** The SDK's event stream codec, loaded on demand, which the Lambda bundles replace (CONNECTOR_BUNDLING). */
export const EVENT_STREAMS_MODULE = '@smithy/core/event-streams';

/**
 * The code esbuild puts before every function's own (CONNECTOR_BUNDLING's `inject`), a path from the
 * project root.
 */
export const BUNDLE_PRELUDE = './functions/bundle-prelude.ts';

/**
 * How every function is bundled. `infra/bundle-report.ts` translates exactly these settings to
 * esbuild's API, and a test checks that its output equals the asset CDK built.
 */
export const CONNECTOR_BUNDLING: nodejs.BundlingOptions = {
  // The installed esbuild, never Docker: synth must work offline and on CI without a daemon.
  forceDockerBundling: false,
  // CommonJS (index.js), which Lambda's Node.js runtime loads with `require`: each built-in then
  // comes from `require`, not through the ES module loader, which gives every imported built-in a
  // facade that reads all its exports once and so loads their lazy parts (fs's streams, web crypto).
  // Until late on 2026-11-27 the bundles were ESM: 4.9 ms more per cold start of the worker here,
  // 4.6 of the webhook (docs/benchmarks.md). esbuild still reads the packages' ES modules
  // (mainFields) and tree-shakes them as before; only the output's module format differs.
  format: nodejs.OutputFormat.CJS,
  target: 'node24',
  // Prefer packages' ESM builds: they tree-shake, which matters most for the AWS SDK.
  mainFields: ['module', 'main'],
  // The runtime's SDK version moves under us; bundling pins the version we tested and loads faster
  // than the runtime's full copy.
  bundleAwsSDK: true,
  // Every SDK client's default credential chain becomes the environment, where Lambda puts the
  // role's credentials: the rest of the chain never runs in Lambda and was a quarter of each bundle
  // (see shared/adapters/lambda-credentials.ts). The SDK's event streams, which no operation the
  // functions call uses, become a stand-in that fails: their `import()` made esbuild wrap about 150
  // of @smithy/core's modules in functions run at load (shared/adapters/no-event-streams.ts).
  // esbuild resolves each target from the project root.
  // `import()` unsupported: esbuild writes each as a `require` in a promise. The SDK's HTTP handler
  // loads `node:http` with `import()` (for an http endpoint: the emulators, a local stand-in), which
  // from CommonJS starts the ES module loader and builds http's facade, whose lazy `WebSocket`
  // export loads undici: 60 to 80 ms of CPU on a container's first call, against 7 with `require`
  // (docs/benchmarks.md). The functions' own `import()`s are of bundled modules and stay lazy.
  esbuildArgs: {
    [`--alias:${CREDENTIAL_CHAIN_PACKAGE}`]: './shared/adapters/lambda-credentials.ts',
    [`--alias:${EVENT_STREAMS_MODULE}`]: './shared/adapters/no-event-streams.ts',
    '--supported:dynamic-import': 'false',
  },
  minify: true,
  // Stack traces name the TypeScript: the bundle's first code installs a formatter that reads the
  // map on the first stack printed (shared/adapters/source-mapped-stacks.ts). The functions run
  // without --enable-source-maps, with which Node read the map at every cold start (7 to 12 ms of
  // it here, docs/benchmarks.md). esbuild resolves the file from the project root.
  inject: [BUNDLE_PRELUDE],
  // The map is kept small, for the deployment and for that first stack: no sources content, and
  // after esbuild only the project's own files (infra/own-code-source-map.ts: 30 to 114 KiB instead
  // of 622 to 633).
  sourceMap: true,
  sourcesContent: false,
  commandHooks: {
    beforeBundling: () => [],
    beforeInstall: () => [],
    afterBundling: (inputDir, outputDir) => [
      ownCodeSourceMapCommand(inputDir, `${outputDir}/${codeFileName(CONNECTOR_BUNDLING)}.map`),
    ],
  },
};

/** The file CDK's `NodejsFunction` writes a bundle to: `index.mjs` for ESM, `index.js` for CommonJS. */
export function codeFileName(bundling: nodejs.BundlingOptions = CONNECTOR_BUNDLING): string {
  return bundling.format === 'esm' ? 'index.mjs' : 'index.js';
}

/** Lambda's limit on all environment variables of one function, names and values together. */
const LAMBDA_ENVIRONMENT_LIMIT_BYTES = 4096;
/** Length assumed for a value only known at deploy time (queue URL, table name). */
const TOKEN_LENGTH_ESTIMATE = 160;

export interface ConnectorStackProps extends StackProps {
  readonly config: DeployConfig;
  /**
   * Where the function entries and package-lock.json are.
   * @default PROJECT_ROOT
   */
  readonly projectRoot?: string;
}

/**
 * The connector in the user's account: an HTTP API in front of two small functions that verify and
 * enqueue, a FIFO queue pair, the worker that delivers to the affiliate platform, the ledger table,
 * alarms and a dashboard. Secrets are referenced by name or ARN, never created or read here.
 */
export class ConnectorStack extends Stack {
  readonly api: apigw.HttpApi;
  readonly stage: apigw.HttpStage;
  readonly pipeline: FifoQueuePair;
  readonly ledger: dynamodb.Table;
  /** Where the busy worker instances compare paces per platform route (`DynamoPacingBoard`). */
  readonly pacing: dynamodb.Table;
  readonly functions: Readonly<Record<ConnectorFunctionName, nodejs.NodejsFunction>>;
  /** The scheduled catch-up; absent unless `catchUp.enabled`. */
  readonly catchUp: nodejs.NodejsFunction | undefined;
  readonly monitoring: ConnectorMonitoring;
  /** The deploy-time check of the finance key's length; absent with `checkFinanceKeyAtDeploy: false`. */
  readonly financeKeyCheck: FinanceKeyCheck | undefined;
  readonly #secrets = new Map<string, secretsmanager.ISecret>();

  constructor(scope: Construct, id: string, props: ConnectorStackProps) {
    const { config, projectRoot = PROJECT_ROOT, ...stackProps } = props;
    super(scope, id, {
      description: 'Conversion connector: shop webhooks to affiliate platform conversions',
      ...stackProps,
    });
    const logRetention = config.logRetentionDays as logs.RetentionDays;

    this.pipeline = new FifoQueuePair(this, 'Pipeline', {
      visibilityTimeout: Duration.seconds(MAIN_QUEUE_VISIBILITY_TIMEOUT_SECONDS),
      maxReceiveCount: config.queue.maxReceiveCount,
      retentionPeriod: Duration.days(config.queue.retentionDays),
    });
    const { queue, deadLetterQueue } = this.pipeline;

    // Both tables: items keyed by `pk`, on demand, encrypted, with point-in-time recovery.
    const keyedByPk = {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
    };
    this.ledger = new dynamodb.Table(this, 'Ledger', {
      ...keyedByPk,
      deletionProtection: config.ledgerDeletionProtection,
      // The ledger is what makes delivery exactly-once: losing it with the stack would resend orders.
      removalPolicy: RemovalPolicy.RETAIN,
    });
    // Sparse: only records waiting for acceptance carry `acceptDueAt` (see DynamoLedger), so the
    // accept job queries what is due instead of scanning the table.
    this.ledger.addGlobalSecondaryIndex({
      indexName: ACCEPT_DUE_INDEX,
      partitionKey: { name: 'source', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'acceptDueAt', type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.KEYS_ONLY,
    });

    // Where the busy worker instances compare their paces to share each platform route equally
    // (DynamoPacingBoard): one small item per route, rewritten once or twice a second per busy
    // instance while a backlog drains. Advice only, rebuilt by the next drain: nothing to keep.
    this.pacing = new dynamodb.Table(this, 'Pacing', { ...keyedByPk, removalPolicy: RemovalPolicy.DESTROY });

    const common: Record<string, string> = {
      POWERTOOLS_SERVICE_NAME: config.powertools.serviceName,
      POWERTOOLS_METRICS_NAMESPACE: config.powertools.metricsNamespace,
      POWERTOOLS_LOG_LEVEL: config.powertools.logLevel,
      SOURCES: JSON.stringify(compactSources(config.sources)),
      SECRETS_MAX_AGE_SECONDS: String(config.secretsMaxAgeSeconds),
    };
    const make = (name: ConnectorFunctionName, environment: Record<string, string>) =>
      this.#function(
        name,
        CONNECTOR_FUNCTIONS[name],
        { ...common, ...environment },
        projectRoot,
        logRetention,
      );

    const webhook = make('webhook', { QUEUE_URL: queue.queueUrl });
    // The public, unauthenticated function: its own pool, and a ceiling on what a flood may take.
    (webhook.node.defaultChild as lambda.CfnFunction).reservedConcurrentExecutions =
      config.ingest.reservedConcurrency;
    queue.grant(webhook, 'sqs:SendMessage');
    for (const source of config.sources) this.#grantSecret(webhook, source.secretRef);

    const refunds = make('refunds', {
      QUEUE_URL: queue.queueUrl,
      LEDGER_TABLE: this.ledger.tableName,
      FINANCE_API_KEY_SECRET: config.financeApiKeySecret,
    });
    queue.grant(refunds, 'sqs:SendMessage');
    this.#grantLedger(refunds, 'dynamodb:GetItem');
    // A partial refund is reserved before it is queued (shared/finance.ts), in an item of its own
    // beside the order's record: the function may put those items, never a record.
    refunds.role!.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:PutItem'],
        resources: [this.ledger.tableArn],
        conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [`${RESERVATIONS_PREFIX}*`] } },
      }),
    );
    this.#grantSecret(refunds, config.financeApiKeySecret);

    const workerEnvironment: Record<string, string> = {
      LEDGER_TABLE: this.ledger.tableName,
      QUEUE_URL: queue.queueUrl,
      DLQ_URL: deadLetterQueue.queueUrl,
      // The redrive's own count: on that receive the worker parks a message still failing, with a reason.
      MAX_RECEIVE_COUNT: String(config.queue.maxReceiveCount),
      AFFILIATE_BASE_URL: config.affiliate.baseUrl,
      AFFILIATE_TOKEN_SECRET: config.affiliate.tokenSecret,
      AFFILIATE_RATE_PER_SECOND: String(workerRatePerSecond(config)),
      AFFILIATE_INITIAL_RATE_PER_SECOND: String(workerInitialRatePerSecond(config)),
      LEGACY_BASE_URL: config.legacy.baseUrl ?? config.affiliate.baseUrl,
      PACING_TABLE: this.pacing.tableName,
    };
    if (config.affiliate.routes !== undefined) {
      workerEnvironment['AFFILIATE_ROUTES'] = JSON.stringify(config.affiliate.routes);
    }
    if (config.legacy.credentialsSecret !== undefined) {
      workerEnvironment['LEGACY_CREDENTIALS_SECRET'] = config.legacy.credentialsSecret;
    }
    const worker = make('worker', workerEnvironment);
    // DynamoLedger reads with GetItem and writes whole records with conditional PutItem; the hourly
    // check of refunds waiting for their order reads the table with Scan.
    this.#grantLedger(worker, 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Scan');
    // One UpdateItem per share: sets its own pace, drops stale ones, returns the item.
    this.pacing.grant(worker, 'dynamodb:UpdateItem');
    new events.Rule(this, 'WaitingRefundsCheck', {
      description: 'Has the worker measure refunds waiting for their order (the RefundWaitingForOrder alarm)',
      schedule: events.Schedule.rate(Duration.hours(1)),
      targets: [
        new targets.LambdaFunction(worker, {
          event: events.RuleTargetInput.fromObject(WAITING_REFUNDS_CHECK),
          retryAttempts: 2,
        }),
      ],
    });
    deadLetterQueue.grant(worker, 'sqs:SendMessage');
    this.#grantSecret(worker, config.affiliate.tokenSecret);
    if (config.legacy.credentialsSecret !== undefined)
      this.#grantSecret(worker, config.legacy.credentialsSecret);
    // Receive, delete and ChangeMessageVisibility on the main queue come with the event source.
    // The platform allows 100 requests/s per route and token, and nearly every message ends in the
    // same route (conversions.add). One worker instance handles one batch at a time (its orders side
    // by side, each order's events in order), so maxConcurrency instances hold up to batchSize ×
    // maxConcurrency messages (infra/deploy-config.ts says why 5 × 20). Instances share
    // nothing: each starts at AFFILIATE_INITIAL_RATE_PER_SECOND (its share of 80% of the limit) and
    // adapts from the platform's rate-limit headers, which every client of the token sees alike, up
    // to AFFILIATE_RATE_PER_SECOND; together they settle just under the limit, and under what a
    // foreign client on the same token (the CLI, a shop plugin) leaves.
    worker.addEventSource(
      new SqsEventSource(queue, {
        batchSize: config.worker.batchSize,
        reportBatchItemFailures: true,
        maxConcurrency: config.worker.maxConcurrency,
      }),
    );
    // The accept job: the worker's platform settings (same clients and pacing), its own schedule.
    // Not the pacing table: one instance an hour has no fleet to share a route with, and its role
    // may not write there, so every share and claim was a call refused by IAM.
    const { PACING_TABLE: _workersOnly, ...acceptPlatform } = workerEnvironment;
    const accept = make('accept', {
      ...acceptPlatform,
      ACCEPT_MAX_PER_RUN: String(config.accept.maxPerRun),
    });
    this.#grantLedger(accept, 'dynamodb:GetItem', 'dynamodb:PutItem');
    // Query on the due-date index only: never the table, never a Scan.
    accept.role!.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: ['dynamodb:Query'],
        resources: [`${this.ledger.tableArn}/index/${ACCEPT_DUE_INDEX}`],
      }),
    );
    deadLetterQueue.grant(accept, 'sqs:SendMessage');
    this.#grantSecret(accept, config.affiliate.tokenSecret);
    if (config.legacy.credentialsSecret !== undefined)
      this.#grantSecret(accept, config.legacy.credentialsSecret);
    new events.Rule(this, 'AcceptSchedule', {
      description: 'Accepts conversions past their source return window (acceptAfterDays)',
      schedule: events.Schedule.rate(Duration.hours(1)),
      targets: [new targets.LambdaFunction(accept, { retryAttempts: 2 })],
    });
    this.functions = { webhook, refunds, worker, accept };
    this.catchUp = config.catchUp.enabled
      ? this.#catchUp(config, { ...common, QUEUE_URL: queue.queueUrl }, projectRoot, logRetention)
      : undefined;

    const accessLogs = new logs.LogGroup(this, 'ApiAccessLogs', {
      retention: logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.api = new apigw.HttpApi(this, 'Api', {
      apiName: this.stackName,
      description: 'Webhook and refund intake of the conversion connector',
      createDefaultStage: false,
    });
    this.stage = this.api.addStage('DefaultStage', {
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: config.apiThrottle.rateLimit, burstLimit: config.apiThrottle.burstLimit },
      accessLogSettings: {
        destination: new apigw.LogGroupLogDestination(accessLogs),
        // No body and no headers: they carry signatures and customer data.
        format: AccessLogFormat.custom(
          JSON.stringify({
            requestId: '$context.requestId',
            requestTime: '$context.requestTime',
            ip: '$context.identity.sourceIp',
            userAgent: '$context.identity.userAgent',
            routeKey: '$context.routeKey',
            path: '$context.path',
            status: '$context.status',
            responseLength: '$context.responseLength',
            latencyMs: '$context.responseLatency',
            integrationLatencyMs: '$context.integrationLatency',
            integrationError: '$context.integrationErrorMessage',
          }),
        ),
      },
    });
    // One route per source, each with its own throttle below: no catch-all `{source}`, so a request
    // for a source that is not configured is API Gateway's 404 and never reaches the function.
    const webhookIntegration = new HttpLambdaIntegration('WebhookIntegration', webhook);
    const webhookRoutes = config.sources.flatMap((source) =>
      this.api.addRoutes({
        path: `/webhooks/${source.id}`,
        methods: [apigw.HttpMethod.POST],
        integration: webhookIntegration,
      }),
    );
    const [refundsRoute] = this.api.addRoutes({
      path: '/refunds',
      methods: [apigw.HttpMethod.POST],
      integration: new HttpLambdaIntegration('RefundsIntegration', refunds),
      authorizer: config.refundsIamAuth ? new HttpIamAuthorizer() : undefined,
    });

    this.monitoring = new ConnectorMonitoring(this, 'Monitoring', {
      namespace: config.powertools.metricsNamespace,
      serviceName: config.powertools.serviceName,
      queue,
      deadLetterQueue,
      worker,
      webhook,
      refunds,
      accept,
      catchUp: this.catchUp,
      functions: this.functions,
      oldestMessageAge: Duration.seconds(
        config.alarms.oldestMessageAgeSeconds ?? oldestMessageAgeDefaultSeconds(config.queue.maxReceiveCount),
      ),
      deadLetterAge: Duration.days(config.alarms.deadLetterAgeDays),
      rateLimitedPer5Minutes:
        config.alarms.rateLimitedPer5Minutes ?? Math.ceil(config.affiliate.rateLimitPerSecond * 300 * 0.01),
      refundWaitingForOrder: Duration.hours(config.alarms.refundWaitingHours),
      dashboardName: this.stackName,
      alarmEmail: config.alarmEmail,
    });

    const url = this.stage.url;
    new CfnOutput(this, 'ApiUrl', { value: url, description: 'Base URL of the HTTP API' });
    new CfnOutput(this, 'RefundsUrl', { value: `${url}refunds`, description: 'POST refunds here' });
    const outputIds = new Set<string>();
    for (const [i, source] of config.sources.entries()) {
      let outputId = `WebhookUrl${pascal(source.id)}`;
      if (outputIds.has(outputId)) outputId += String(i);
      outputIds.add(outputId);
      new CfnOutput(this, outputId, {
        value: `${url}webhooks/${source.id}`,
        description: `Webhook URL to register in ${source.platform} for source ${source.id}`,
      });
    }
    new CfnOutput(this, 'QueueUrl', { value: queue.queueUrl });
    new CfnOutput(this, 'DeadLetterQueueUrl', { value: deadLetterQueue.queueUrl });
    new CfnOutput(this, 'LedgerTableName', { value: this.ledger.tableName });
    new CfnOutput(this, 'DashboardName', { value: this.stackName });

    // The L2 HttpStage has only the stage-wide `throttle`; per-route limits are CfnStage RouteSettings,
    // a JSON map by route key that CDK passes through as is (hence CloudFormation's own field names).
    const routeSettings: Record<string, { ThrottlingRateLimit: number; ThrottlingBurstLimit: number }> = {};
    const limit = (t: { rateLimit: number; burstLimit: number }) => ({
      ThrottlingRateLimit: t.rateLimit,
      ThrottlingBurstLimit: t.burstLimit,
    });
    for (const source of config.sources) {
      const throttle = config.apiThrottle.sources[source.id] ?? config.apiThrottle.webhook;
      routeSettings[`POST /webhooks/${source.id}`] = limit(throttle);
    }
    routeSettings['POST /refunds'] = limit(config.apiThrottle.refunds);
    (this.stage.node.defaultChild as CfnStage).routeSettings = routeSettings;
    // Route settings name routes by key; the stage must not be updated before they exist.
    for (const route of [...webhookRoutes, refundsRoute]) if (route) this.stage.node.addDependency(route);

    this.#suppressNagFindings(webhookRoutes, refundsRoute, config.refundsIamAuth);
    this.financeKeyCheck = this.#financeKeyCheck(config, projectRoot, logRetention);
  }

  /**
   * The catch-up function and its daily rule. Least privilege: it sends to the main queue and reads
   * the shop API credentials, nothing else (no ledger: the worker's ledger rules make repeats no-ops,
   * no webhook secret: a delivery read from the shop's API is not signed).
   */
  #catchUp(
    config: DeployConfig,
    environment: Record<string, string>,
    projectRoot: string,
    logRetention: logs.RetentionDays,
  ): nodejs.NodejsFunction {
    const fn = this.#function(
      'catchUp',
      CATCH_UP_FUNCTION,
      { ...environment, CATCH_UP_HOURS: String(config.catchUp.hours) },
      projectRoot,
      logRetention,
    );
    this.pipeline.queue.grant(fn, 'sqs:SendMessage');
    for (const source of config.sources) {
      if (source.shopApi !== undefined) this.#grantSecret(fn, source.shopApi.credentialsRef);
    }
    new events.Rule(this, 'CatchUpSchedule', {
      description: "Runs the catch-up from the shops' APIs once a day",
      schedule: events.Schedule.cron({ minute: '0', hour: String(config.catchUp.hourUtc) }),
      targets: [new targets.LambdaFunction(fn, { retryAttempts: 2 })],
    });
    return fn;
  }

  /** Synth cannot see the finance key's value: a custom resource checks its length at deploy time. */
  #financeKeyCheck(
    config: DeployConfig,
    projectRoot: string,
    logRetention: logs.RetentionDays,
  ): FinanceKeyCheck | undefined {
    if (!config.checkFinanceKeyAtDeploy) return undefined;
    const check = new FinanceKeyCheck(this, 'FinanceKeyCheck', {
      secretRef: config.financeApiKeySecret,
      projectRoot,
      logRetention,
      bundling: CONNECTOR_BUNDLING,
    });
    this.#grantSecret(check.function, config.financeApiKeySecret);
    return check;
  }

  #function(
    name: string,
    spec: ConnectorFunctionSpec,
    environment: Record<string, string>,
    projectRoot: string,
    retention: logs.RetentionDays,
  ): nodejs.NodejsFunction {
    const id = pascal(name);
    checkEnvironmentSize(name, environment);
    const logGroup = new logs.LogGroup(this, `${id}Logs`, {
      retention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // Our own role instead of AWSLambdaBasicExecutionRole: that managed policy lets a function write
    // to every log group in the account, this one only to its own.
    const role = new iam.Role(this, `${id}Role`, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Role of the ${name} function`,
    });
    logGroup.grantWrite(role);
    return new nodejs.NodejsFunction(this, `${id}Function`, {
      entry: `${projectRoot}/${spec.entry}`,
      handler: 'handler',
      projectRoot,
      depsLockFilePath: `${projectRoot}/package-lock.json`,
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: spec.memorySize,
      timeout: spec.timeout,
      description: spec.description,
      role,
      logGroup,
      environment,
      bundling: CONNECTOR_BUNDLING,
    });
  }

  /**
   * Actions on the ledger table itself. `Table.grant` adds `index/*` as soon as the table has an
   * index, which would give every function the due-date index and a wildcard; only the accept
   * function queries that index, by its own statement.
   */
  #grantLedger(fn: lambda.IFunction, ...actions: string[]): void {
    fn.role!.addToPrincipalPolicy(new iam.PolicyStatement({ actions, resources: [this.ledger.tableArn] }));
  }

  /** GetSecretValue on one user-created secret, referenced by name or ARN. */
  #grantSecret(fn: lambda.IFunction, ref: string): void {
    let secret = this.#secrets.get(ref);
    if (secret === undefined) {
      const id = `Secret${this.#secrets.size}`;
      if (!ref.startsWith('arn:')) secret = secretsmanager.Secret.fromSecretNameV2(this, id, ref);
      else if (/-[A-Za-z0-9]{6}$/.test(ref))
        secret = secretsmanager.Secret.fromSecretCompleteArn(this, id, ref);
      else secret = secretsmanager.Secret.fromSecretPartialArn(this, id, ref);
      this.#secrets.set(ref, secret);
    }
    // Without the full ARN, Secrets Manager's random 6-character suffix must be matched by `??????`.
    const resource = secret.secretFullArn ?? `${secret.secretArn}-??????`;
    fn.role!.addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: ['secretsmanager:GetSecretValue'], resources: [resource] }),
    );
  }

  #suppressNagFindings(
    webhookRoutes: readonly apigw.HttpRoute[],
    refundsRoute?: apigw.HttpRoute,
    refundsIam = false,
  ): void {
    for (const webhookRoute of webhookRoutes) {
      Validations.of(webhookRoute).acknowledge({
        id: 'AwsSolutions-APIG4',
        reason:
          'Shops cannot sign requests with AWS credentials; every webhook is authenticated by its HMAC signature (Shopify, WooCommerce, Stripe, generic) in the function before anything is enqueued.',
      });
    }
    if (refundsRoute !== undefined && !refundsIam) {
      Validations.of(refundsRoute).acknowledge({
        id: 'AwsSolutions-APIG4',
        reason:
          'The finance API key (a Secrets Manager secret) is checked in the function; set refundsIamAuth to add IAM authorization.',
      });
    }
  }
}

/** Fails the synth instead of the deploy when an environment would exceed Lambda's 4 KB. */
function checkEnvironmentSize(name: string, environment: Record<string, string>): void {
  let bytes = 0;
  for (const [key, value] of Object.entries(environment)) {
    bytes +=
      Buffer.byteLength(key) + (Token.isUnresolved(value) ? TOKEN_LENGTH_ESTIMATE : Buffer.byteLength(value));
  }
  if (bytes > LAMBDA_ENVIRONMENT_LIMIT_BYTES) {
    throw new Error(
      `the ${name} function's environment would be about ${bytes} bytes, over Lambda's ${LAMBDA_ENVIRONMENT_LIMIT_BYTES}: SOURCES holds ${environment['SOURCES']?.length ?? 0} characters; split the sources over two stacks (two config files with different stackName)`,
    );
  }
}

/**
 * The sources without the settings that equal their defaults. The functions parse SOURCES with the
 * same `SourceConfig` schema, which puts the defaults back, so the result is the same sources in
 * fewer bytes of Lambda's 4 KB environment.
 */
export function compactSources(sources: readonly SourceConfig[]): Record<string, unknown>[] {
  return sources.map((source) => {
    const { id, platform, program, rule, secretRef } = source;
    const required = { id, platform, program, rule, secretRef };
    const defaults: Record<string, unknown> = SourceConfig.parse(required);
    return Object.fromEntries(
      Object.entries(source).filter(
        ([key, value]) => key in required || JSON.stringify(value) !== JSON.stringify(defaults[key]),
      ),
    );
  });
}

function pascal(id: string): string {
  return id
    .split(/[^A-Za-z0-9]+/)
    .filter((part) => part.length > 0)
    .map((part) => part[0]!.toUpperCase() + part.slice(1))
    .join('');
}

import type { CfnElement } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { CATCH_UP_FUNCTION, type ConnectorStack, compactSources } from '../../infra/connector-stack.ts';
import type { DeployConfig } from '../../infra/deploy-config.ts';
import { CONNECTOR_METRICS } from '../../infra/monitoring.ts';
import { SourcesFile } from '../../shared/config/sources.ts';
import { SQS_MAX_MESSAGE_BYTES } from '../../shared/queueing.ts';
import { actionsOf, connectorApp, exampleConfig, type PolicyStatement, roleStatements } from './support.ts';

const SHOPIFY_SECRET_ARN =
  'arn:aws:secretsmanager:eu-west-1:123456789012:secret:connector/webhooks/shopify-main-AbCdEf';

interface Synth {
  readonly config: DeployConfig;
  readonly stack: ConnectorStack;
  readonly template: Template;
  readonly id: (construct: IConstruct) => string;
}

function synth(overrides: Record<string, unknown> = {}): Synth {
  const config = exampleConfig(overrides);
  const { stack } = connectorApp(config);
  const template = Template.fromStack(stack);
  const id = (construct: IConstruct) => {
    const resource = (construct.node.defaultChild ?? construct) as CfnElement;
    return stack.getLogicalId(resource);
  };
  return { config, stack, template, id };
}

type Statement = PolicyStatement;

/** The policy statements of a function's role: a deployed function by name, or the function itself. */
function statementsOf(s: Synth, fn: 'webhook' | 'refunds' | 'worker' | IFunction): Statement[] {
  return roleStatements(s.template, s.stack, typeof fn === 'string' ? s.stack.functions[fn] : fn);
}

function environmentOf(s: Synth, fn: 'webhook' | 'refunds' | 'worker'): Record<string, unknown> {
  const resource = s.template.toJSON().Resources[s.id(s.stack.functions[fn])];
  return resource.Properties.Environment.Variables;
}

describe('ConnectorStack (example config)', () => {
  let s: Synth;
  beforeAll(() => {
    s = synth();
  });

  describe('queues', () => {
    it('main queue is FIFO, high throughput, id-deduplicated, encrypted, with a redrive to the DLQ', () => {
      s.template.hasResourceProperties('AWS::SQS::Queue', {
        FifoQueue: true,
        ContentBasedDeduplication: false,
        DeduplicationScope: 'messageGroup',
        FifoThroughputLimit: 'perMessageGroupId',
        SqsManagedSseEnabled: true,
        MessageRetentionPeriod: 4 * 24 * 3600,
        RedrivePolicy: {
          deadLetterTargetArn: { 'Fn::GetAtt': [s.id(s.stack.pipeline.deadLetterQueue), 'Arn'] },
          maxReceiveCount: 6,
        },
      });
    });

    it('both queues take messages up to the size ingest checks every event against (413 above it)', () => {
      const queues = s.template.findResources('AWS::SQS::Queue');
      const sizes = Object.values(queues).map((q) => q['Properties']?.['MaximumMessageSize']);

      expect(sizes).toEqual([SQS_MAX_MESSAGE_BYTES, SQS_MAX_MESSAGE_BYTES]);
    });

    it('DLQ is FIFO, encrypted, keeps 14 days and survives stack deletion', () => {
      s.template.hasResource('AWS::SQS::Queue', {
        Properties: {
          FifoQueue: true,
          ContentBasedDeduplication: false,
          SqsManagedSseEnabled: true,
          MessageRetentionPeriod: 14 * 24 * 3600,
          RedrivePolicy: Match.absent(),
        },
        DeletionPolicy: 'Retain',
        UpdateReplacePolicy: 'Retain',
      });
    });

    it('both queues refuse requests without TLS', () => {
      for (const queue of [s.stack.pipeline.queue, s.stack.pipeline.deadLetterQueue]) {
        s.template.hasResourceProperties('AWS::SQS::QueuePolicy', {
          Queues: [{ Ref: s.id(queue) }],
          PolicyDocument: {
            Statement: Match.arrayWith([
              Match.objectLike({
                Effect: 'Deny',
                Condition: { Bool: { 'aws:SecureTransport': 'false' } },
              }),
            ]),
          },
        });
      }
    });

    it('visibility timeout is at least 6 times the worker timeout', () => {
      const resources = s.template.toJSON().Resources;
      const visibility = resources[s.id(s.stack.pipeline.queue)].Properties.VisibilityTimeout as number;
      const workerTimeout = resources[s.id(s.stack.functions.worker)].Properties.Timeout as number;
      expect(visibility).toBeGreaterThanOrEqual(6 * workerTimeout);
    });
  });

  describe('functions', () => {
    it('every function runs Node 24 on ARM without NODE_OPTIONS, as the bench runs it, and its own log group with retention', () => {
      // No --enable-source-maps: Node would read each bundle's map at every cold start; the bundle
      // maps its own stack traces, on the first one (shared/adapters/source-mapped-stacks.ts). The
      // bench's stand-ins start Node without NODE_OPTIONS too (test/bench/lambda-process.ts).
      const resources = s.template.toJSON().Resources;
      for (const fn of Object.values(s.stack.functions)) {
        // Each function's own resource, not any function of the template.
        const properties = resources[s.id(fn)].Properties;
        expect(properties.FunctionName).toBeUndefined();
        expect(properties).toMatchObject({
          Runtime: 'nodejs24.x',
          Architectures: ['arm64'],
          Handler: 'index.handler',
          LoggingConfig: { LogGroup: { Ref: expect.stringMatching(/Logs/) } },
        });
        expect(properties.Environment.Variables).not.toHaveProperty('NODE_OPTIONS');
        expect(resources[properties.LoggingConfig.LogGroup.Ref]).toMatchObject({
          Type: 'AWS::Logs::LogGroup',
          Properties: { RetentionInDays: 30 },
        });
      }
    });

    it('every log group in the stack has a retention', () => {
      const groups = Object.values(s.template.findResources('AWS::Logs::LogGroup'));
      // Four functions, the API access logs, and the finance key check's function and provider.
      expect(groups).toHaveLength(7);
      for (const group of groups) expect(group).toMatchObject({ Properties: { RetentionInDays: 30 } });
    });

    it('each function gets exactly the environment it reads', () => {
      const powertools = ['POWERTOOLS_LOG_LEVEL', 'POWERTOOLS_METRICS_NAMESPACE', 'POWERTOOLS_SERVICE_NAME'];
      const common = [...powertools, 'SECRETS_MAX_AGE_SECONDS', 'SOURCES'];
      expect(Object.keys(environmentOf(s, 'webhook')).sort()).toEqual([...common, 'QUEUE_URL'].sort());
      expect(Object.keys(environmentOf(s, 'refunds')).sort()).toEqual(
        [...common, 'QUEUE_URL', 'LEDGER_TABLE', 'FINANCE_API_KEY_SECRET'].sort(),
      );
      expect(Object.keys(environmentOf(s, 'worker')).sort()).toEqual(
        [
          ...common,
          'LEDGER_TABLE',
          'QUEUE_URL',
          'DLQ_URL',
          'MAX_RECEIVE_COUNT',
          'AFFILIATE_BASE_URL',
          'AFFILIATE_TOKEN_SECRET',
          'AFFILIATE_RATE_PER_SECOND',
          'AFFILIATE_INITIAL_RATE_PER_SECOND',
          'LEGACY_BASE_URL',
          'PACING_TABLE',
        ].sort(),
      );
      expect(environmentOf(s, 'worker')).toMatchObject({
        QUEUE_URL: { Ref: s.id(s.stack.pipeline.queue) },
        DLQ_URL: { Ref: s.id(s.stack.pipeline.deadLetterQueue) },
        LEDGER_TABLE: { Ref: s.id(s.stack.ledger) },
        AFFILIATE_RATE_PER_SECOND: '100',
        AFFILIATE_INITIAL_RATE_PER_SECOND: '4',
        POWERTOOLS_METRICS_NAMESPACE: 'ConversionConnector',
        POWERTOOLS_SERVICE_NAME: 'conversion-connector',
        SECRETS_MAX_AGE_SECONDS: '300',
      });
    });

    it('SOURCES parses with the functions’ own schema back to the configured sources', () => {
      const sources = SourcesFile.parse(JSON.parse(environmentOf(s, 'webhook')['SOURCES'] as string));
      expect(sources).toEqual(s.config.sources);
      expect(sources.map((x) => x.platform).sort()).toEqual(['generic', 'shopify', 'stripe', 'woocommerce']);
    });

    it('the worker consumes the main queue in batches of 5 with partial failures and bounded concurrency', () => {
      s.template.resourceCountIs('AWS::Lambda::EventSourceMapping', 1);
      s.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        FunctionName: { Ref: s.id(s.stack.functions.worker) },
        EventSourceArn: { 'Fn::GetAtt': [s.id(s.stack.pipeline.queue), 'Arn'] },
        // 5 × 20: a second of the route's work in flight (infra/deploy-config.ts says why)
        BatchSize: 5,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        ScalingConfig: { MaximumConcurrency: 20 },
      });
    });
  });

  describe('ledger', () => {
    it('is on-demand, keyed by pk, encrypted, with PITR, deletion protection and retained', () => {
      s.template.hasResource('AWS::DynamoDB::Table', {
        Properties: {
          KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
          AttributeDefinitions: Match.arrayWith([{ AttributeName: 'pk', AttributeType: 'S' }]),
          BillingMode: 'PAY_PER_REQUEST',
          PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          SSESpecification: { SSEEnabled: true },
          DeletionProtectionEnabled: true,
        },
        DeletionPolicy: 'Retain',
        UpdateReplacePolicy: 'Retain',
      });
    });
  });

  describe('HTTP API', () => {
    it('routes POST /webhooks/<id> for each configured source and POST /refunds, without IAM by default', () => {
      for (const source of s.config.sources) {
        s.template.hasResourceProperties('AWS::ApiGatewayV2::Route', {
          RouteKey: `POST /webhooks/${source.id}`,
          AuthorizationType: 'NONE',
        });
      }
      s.template.hasResourceProperties('AWS::ApiGatewayV2::Route', {
        RouteKey: 'POST /refunds',
        AuthorizationType: 'NONE',
      });
      // No catch-all: a flood on an unknown source is answered 404 by API Gateway, without a Lambda.
      s.template.resourceCountIs('AWS::ApiGatewayV2::Route', s.config.sources.length + 1);
    });

    it("each source's webhook route and /refunds have their own throttle, from config defaults", () => {
      const routeSettings: Record<string, unknown> = {
        'POST /refunds': { ThrottlingRateLimit: 10, ThrottlingBurstLimit: 20 },
      };
      for (const source of s.config.sources) {
        routeSettings[`POST /webhooks/${source.id}`] = { ThrottlingRateLimit: 50, ThrottlingBurstLimit: 100 };
      }
      s.template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
        StageName: '$default',
        RouteSettings: routeSettings,
      });
      // Route settings name routes by key: CloudFormation must create the routes first.
      const routes = Object.keys(s.template.findResources('AWS::ApiGatewayV2::Route'));
      const stage = Object.values(s.template.findResources('AWS::ApiGatewayV2::Stage'))[0];
      expect(stage?.['DependsOn']).toEqual(expect.arrayContaining(routes));
    });

    it('the ingest function has reserved concurrency: a flood cannot take the account’s whole pool', () => {
      const resource = s.template.toJSON().Resources[s.id(s.stack.functions.webhook)];
      expect(resource.Properties.ReservedConcurrentExecutions).toBe(20);
      for (const other of ['refunds', 'worker'] as const) {
        const props = s.template.toJSON().Resources[s.id(s.stack.functions[other])].Properties;
        expect(props.ReservedConcurrentExecutions).toBeUndefined();
      }
    });

    it('the default stage throttles from config and writes access logs', () => {
      s.template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
        StageName: '$default',
        AutoDeploy: true,
        DefaultRouteSettings: { ThrottlingRateLimit: 100, ThrottlingBurstLimit: 200 },
        AccessLogSettings: {
          DestinationArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('ApiAccessLogs'), 'Arn'] },
          Format: Match.stringLikeRegexp('\\$context\\.requestId'),
        },
      });
    });
  });

  describe('least privilege', () => {
    it('no role has a managed policy and no statement allows * actions or * resources', () => {
      for (const role of Object.values(s.template.findResources('AWS::IAM::Role'))) {
        expect(role).not.toHaveProperty('Properties.ManagedPolicyArns');
      }
      for (const fn of ['webhook', 'refunds', 'worker'] as const) {
        for (const statement of statementsOf(s, fn)) {
          expect(JSON.stringify(statement.Resource)).not.toMatch(/^"\*"$|"\*"/);
          expect(actionsOf([statement]).every((a) => !a.includes('*'))).toBe(true);
        }
      }
    });

    it('webhook: writes its logs, sends to the main queue, reads the sources’ webhook secrets', () => {
      const statements = statementsOf(s, 'webhook');
      expect(actionsOf(statements)).toEqual([
        'logs:CreateLogStream',
        'logs:PutLogEvents',
        'secretsmanager:GetSecretValue',
        'sqs:SendMessage',
      ]);
      expect(statements).toContainEqual(
        expect.objectContaining({
          Action: 'sqs:SendMessage',
          Resource: { 'Fn::GetAtt': [s.id(s.stack.pipeline.queue), 'Arn'] },
        }),
      );
      const secrets = JSON.stringify(
        statements.filter((st) => st.Action === 'secretsmanager:GetSecretValue'),
      );
      for (const source of s.config.sources) expect(secrets).toContain(`:secret:${source.secretRef}-??????`);
      expect(secrets).not.toContain('finance-api-key');
      expect(secrets).not.toContain('affiliate-token');
    });

    it('refunds: sends to the main queue, reads one ledger item, writes refund reservations only, reads the finance key secret', () => {
      const statements = statementsOf(s, 'refunds');
      expect(actionsOf(statements)).toEqual([
        'dynamodb:GetItem',
        'dynamodb:PutItem',
        'logs:CreateLogStream',
        'logs:PutLogEvents',
        'secretsmanager:GetSecretValue',
        'sqs:SendMessage',
      ]);
      expect(statements).toContainEqual(
        expect.objectContaining({
          Action: 'dynamodb:GetItem',
          Resource: { 'Fn::GetAtt': [s.id(s.stack.ledger), 'Arn'] },
        }),
      );
      // POST /refunds reserves partial refunds in items of their own (shared/finance.ts): it may put
      // those, never an order's record.
      expect(statements).toContainEqual(
        expect.objectContaining({
          Action: 'dynamodb:PutItem',
          Resource: { 'Fn::GetAtt': [s.id(s.stack.ledger), 'Arn'] },
          Condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['reservations#*'] } },
        }),
      );
      expect(JSON.stringify(statements)).toContain(':secret:connector/finance-api-key-??????');
      expect(JSON.stringify(statements)).not.toContain('webhooks/');
    });

    it('worker: ledger get/put/scan (no UpdateItem on the ledger), UpdateItem on the pacing table only, DLQ send, main queue consume, the token secret', () => {
      const statements = statementsOf(s, 'worker');
      expect(actionsOf(statements)).toEqual([
        'dynamodb:GetItem',
        'dynamodb:PutItem',
        'dynamodb:Scan',
        'dynamodb:UpdateItem',
        'logs:CreateLogStream',
        'logs:PutLogEvents',
        'secretsmanager:GetSecretValue',
        'sqs:ChangeMessageVisibility',
        'sqs:DeleteMessage',
        'sqs:GetQueueAttributes',
        'sqs:GetQueueUrl',
        'sqs:ReceiveMessage',
        'sqs:SendMessage',
      ]);
      expect(statements).toContainEqual(
        expect.objectContaining({
          Action: 'sqs:SendMessage',
          Resource: { 'Fn::GetAtt': [s.id(s.stack.pipeline.deadLetterQueue), 'Arn'] },
        }),
      );
      const updates = statements.filter((st) => actionsOf([st]).includes('dynamodb:UpdateItem'));
      expect(updates).toEqual([
        expect.objectContaining({
          Action: 'dynamodb:UpdateItem',
          Resource: { 'Fn::GetAtt': [s.id(s.stack.pacing), 'Arn'] },
        }),
      ]);
      expect(environmentOf(s, 'worker')['PACING_TABLE']).toEqual({ Ref: s.id(s.stack.pacing) });
      const consume = statements.find((st) => actionsOf([st]).includes('sqs:ChangeMessageVisibility'));
      expect(consume?.Resource).toEqual({ 'Fn::GetAtt': [s.id(s.stack.pipeline.queue), 'Arn'] });
      expect(JSON.stringify(statements)).toContain(':secret:connector/affiliate-token-??????');
      expect(JSON.stringify(statements)).not.toContain('webhooks/');
    });
  });

  describe('secrets', () => {
    it('are referenced by name only: no secret resource, no dynamic reference, no value', () => {
      s.template.resourceCountIs('AWS::SecretsManager::Secret', 0);
      const text = JSON.stringify(s.template.toJSON());
      expect(text).not.toContain('{{resolve:secretsmanager');
      expect(text).not.toContain('SecretString');
      expect(environmentOf(s, 'refunds')['FINANCE_API_KEY_SECRET']).toBe('connector/finance-api-key');
      expect(environmentOf(s, 'worker')['AFFILIATE_TOKEN_SECRET']).toBe('connector/affiliate-token');
    });
  });

  describe('monitoring', () => {
    it('alarms on a non-empty DLQ', () => {
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Dimensions: [
          {
            Name: 'QueueName',
            Value: { 'Fn::GetAtt': [s.id(s.stack.pipeline.deadLetterQueue), 'QueueName'] },
          },
        ],
        ComparisonOperator: 'GreaterThanThreshold',
        Threshold: 0,
        // Keeps its state should SQS report nothing: test/infra/alarm-delivery.test.ts
        TreatMissingData: 'ignore',
      });
    });

    it('alarms on the age of the oldest message in the main queue', () => {
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateAgeOfOldestMessage',
        Dimensions: [
          { Name: 'QueueName', Value: { 'Fn::GetAtt': [s.id(s.stack.pipeline.queue), 'QueueName'] } },
        ],
        // The default at 6 receives: 30 minutes, above one failing message's stay on the worker's
        // backoffs (longestMainQueueStaySeconds, infra/deploy-config.ts: 1090 s).
        Threshold: 1800,
      });
    });

    it('alarms on worker errors and throttles', () => {
      for (const metric of ['Errors', 'Throttles']) {
        s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
          Namespace: 'AWS/Lambda',
          MetricName: metric,
          Dimensions: [{ Name: 'FunctionName', Value: { Ref: s.id(s.stack.functions.worker) } }],
          Threshold: 0,
          ComparisonOperator: 'GreaterThanThreshold',
        });
      }
    });

    it('alarms on 429s from the connector’s own metric above 1% of the route’s budget (the pacing’s own probes)', () => {
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'ConversionConnector',
        MetricName: 'RateLimited',
        Dimensions: [{ Name: 'service', Value: 'conversion-connector' }],
        Statistic: 'Sum',
        Period: 300,
        Threshold: 300,
      });
      // Seven (with the DLQ's age: test/infra/dead-letter-age-alarm.test.ts), the webhook and
      // refunds functions' three each (errors, throttles, 503s answered with a dependency out of
      // reach: test/infra/intake-alarms.test.ts) and the accept job's three
      // (test/infra/accept-stack.test.ts).
      s.template.resourceCountIs('AWS::CloudWatch::Alarm', 16);
    });

    it('alarms when a refund has waited a day for its order, measured by an hourly run of the worker', () => {
      s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'ConversionConnector',
        MetricName: 'OldestWaitingRefundSeconds',
        Dimensions: [{ Name: 'service', Value: 'conversion-connector' }],
        Statistic: 'Maximum',
        Period: 3600,
        Threshold: 86_400,
        ComparisonOperator: 'GreaterThanThreshold',
        TreatMissingData: 'notBreaching',
      });
      s.template.hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: 'rate(1 hour)',
        Targets: [
          {
            Arn: { 'Fn::GetAtt': [s.id(s.stack.functions.worker), 'Arn'] },
            Input: JSON.stringify({ check: 'waiting-refunds' }),
          },
        ],
      });
    });

    it('has no SNS topic and no alarm actions without alarmEmail', () => {
      s.template.resourceCountIs('AWS::SNS::Topic', 0);
      for (const alarm of Object.values(s.template.findResources('AWS::CloudWatch::Alarm'))) {
        expect(alarm).not.toHaveProperty('Properties.AlarmActions');
      }
    });

    it('the dashboard shows every connector metric and the queues', () => {
      const dashboards = Object.values(s.template.findResources('AWS::CloudWatch::Dashboard'));
      expect(dashboards).toHaveLength(1);
      const body = JSON.stringify(dashboards[0]);
      for (const metric of CONNECTOR_METRICS) expect(body).toContain(metric);
      expect(body).toContain('ApproximateNumberOfMessagesVisible');
      expect(body).toContain('ApproximateAgeOfOldestMessage');
      expect(dashboards[0]).toMatchObject({ Properties: { DashboardName: 'ConversionConnector' } });
    });
  });

  it('outputs the API URL, a webhook URL per source, the queues, the table and the dashboard', () => {
    const outputs = s.template.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(Object.keys(outputs).sort()).toEqual(
      [
        'ApiUrl',
        'RefundsUrl',
        'WebhookUrlShopifyMain',
        'WebhookUrlWooEu',
        'WebhookUrlStripeCheckout',
        'WebhookUrlCustomShop',
        'QueueUrl',
        'DeadLetterQueueUrl',
        'LedgerTableName',
        'DashboardName',
      ].sort(),
    );
    expect(JSON.stringify(outputs['WebhookUrlWooEu']?.Value)).toContain('webhooks/woo-eu');
    expect(outputs['LedgerTableName']?.Value).toEqual({ Ref: s.id(s.stack.ledger) });
  });
});

describe('ConnectorStack (options)', () => {
  let s: Synth;
  beforeAll(() => {
    s = synth({
      refundsIamAuth: 'true',
      alarmEmail: 'ops@example.com',
      'worker.maxConcurrency': '4',
      'worker.batchSize': '10',
      'queue.maxReceiveCount': '8',
      'apiThrottle.rateLimit': '40',
      'apiThrottle.sources': '{"woo-eu":{"rateLimit":5,"burstLimit":10}}',
      'apiThrottle.refunds.rateLimit': '2',
      'ingest.reservedConcurrency': '7',
      ledgerDeletionProtection: 'false',
      'sources.0.secretRef': SHOPIFY_SECRET_ARN,
      'legacy.credentialsSecret': 'connector/legacy-credentials',
      'affiliate.routes': '{"conversions.add":"/advertiser/conversions.create"}',
      'alarms.refundWaitingHours': '6',
    });
  });

  it('alarms.refundWaitingHours sets the bound of the refund-waiting alarm', () => {
    s.template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      MetricName: 'OldestWaitingRefundSeconds',
      Threshold: 6 * 3_600,
    });
  });

  it('refundsIamAuth puts IAM authorization on POST /refunds only', () => {
    s.template.hasResourceProperties('AWS::ApiGatewayV2::Route', {
      RouteKey: 'POST /refunds',
      AuthorizationType: 'AWS_IAM',
    });
    s.template.hasResourceProperties('AWS::ApiGatewayV2::Route', {
      RouteKey: 'POST /webhooks/woo-eu',
      AuthorizationType: 'NONE',
    });
  });

  it('alarmEmail adds an e-mail subscribed topic as every alarm’s action', () => {
    s.template.hasResourceProperties('AWS::SNS::Subscription', {
      Protocol: 'email',
      Endpoint: 'ops@example.com',
    });
    const topicId = s.id(s.stack.monitoring.topic!);
    for (const alarm of Object.values(s.template.findResources('AWS::CloudWatch::Alarm'))) {
      expect(alarm).toMatchObject({
        Properties: { AlarmActions: [{ Ref: topicId }], OKActions: [{ Ref: topicId }] },
      });
    }
  });

  it('settings from context reach the resources', () => {
    s.template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      BatchSize: 10,
      ScalingConfig: { MaximumConcurrency: 4 },
    });
    s.template.hasResourceProperties('AWS::SQS::Queue', {
      RedrivePolicy: Match.objectLike({ maxReceiveCount: 8 }),
    });
    s.template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      DefaultRouteSettings: { ThrottlingRateLimit: 40, ThrottlingBurstLimit: 200 },
      RouteSettings: Match.objectLike({
        'POST /webhooks/woo-eu': { ThrottlingRateLimit: 5, ThrottlingBurstLimit: 10 },
        'POST /webhooks/shopify-main': { ThrottlingRateLimit: 50, ThrottlingBurstLimit: 100 },
        'POST /refunds': { ThrottlingRateLimit: 2, ThrottlingBurstLimit: 20 },
      }),
    });
    expect(
      s.template.toJSON().Resources[s.id(s.stack.functions.webhook)].Properties.ReservedConcurrentExecutions,
    ).toBe(7);
    s.template.hasResourceProperties('AWS::DynamoDB::Table', { DeletionProtectionEnabled: false });
    expect(environmentOf(s, 'worker')).toMatchObject({
      AFFILIATE_RATE_PER_SECOND: '100',
      AFFILIATE_INITIAL_RATE_PER_SECOND: '20',
      AFFILIATE_ROUTES: '{"conversions.add":"/advertiser/conversions.create"}',
      LEGACY_CREDENTIALS_SECRET: 'connector/legacy-credentials',
    });
  });

  it('a complete secret ARN is granted exactly, without a wildcard suffix', () => {
    const text = JSON.stringify(statementsOf(s, 'webhook'));
    expect(text).toContain(`"${SHOPIFY_SECRET_ARN}"`);
    expect(text).not.toContain('shopify-main-??????');
    expect(JSON.stringify(statementsOf(s, 'worker'))).toContain(
      ':secret:connector/legacy-credentials-??????',
    );
  });
});

describe('compactSources', () => {
  it('drops only settings equal to their defaults, so the functions parse back the same sources', () => {
    const sources = exampleConfig().sources;
    const compact = compactSources(sources);
    expect(SourcesFile.parse(compact)).toEqual(sources);
    expect(compact[0]).toMatchObject({ orderTopic: 'orders/paid' });
    expect(compact[1]).not.toHaveProperty('clickIdAttributes');
    expect(JSON.stringify(compact).length).toBeLessThan(JSON.stringify(sources).length / 2);
  });
});

describe('the finance key checked at deploy time', () => {
  function checkFunctionId(s: Synth): string {
    const check = s.stack.financeKeyCheck;
    if (check === undefined) throw new Error('no finance key check in the stack');
    return s.id(check.function);
  }

  it('is a custom resource that reads the finance secret, with a property that changes on every synth', () => {
    const before = Date.now();
    const s = synth();
    const after = Date.now();

    s.template.resourceCountIs('Custom::FinanceKeyCheck', 1);
    const [check] = Object.values(s.template.findResources('Custom::FinanceKeyCheck')) as {
      Properties: { SecretId: string; DeployedAt: string };
    }[];
    expect(check!.Properties.SecretId).toBe(s.config.financeApiKeySecret);
    expect(Number(check!.Properties.DeployedAt)).toBeGreaterThanOrEqual(before);
    expect(Number(check!.Properties.DeployedAt)).toBeLessThanOrEqual(after);
    const fn = s.template.toJSON().Resources[checkFunctionId(s)];
    expect(fn.Properties.Runtime).toBe('nodejs24.x');
    expect(fn.Properties.Architectures).toEqual(['arm64']);
  });

  it('lets its function only GetSecretValue on the finance secret (and write its own logs)', () => {
    const s = synth();
    const fn = s.stack.financeKeyCheck!.function;
    const statements = statementsOf(s, fn);

    const secretStatements = statements.filter((st) => JSON.stringify(st.Action).includes('secretsmanager'));
    expect(secretStatements).toHaveLength(1);
    expect(secretStatements[0]).toMatchObject({ Effect: 'Allow', Action: 'secretsmanager:GetSecretValue' });
    expect(JSON.stringify(secretStatements[0]!.Resource)).toContain(
      `secret:${s.config.financeApiKeySecret}-??????`,
    );
    expect(actionsOf(statements)).toEqual([
      'logs:CreateLogStream',
      'logs:PutLogEvents',
      'secretsmanager:GetSecretValue',
    ]);
    const roleResource = s.template.toJSON().Resources[s.id(fn.role!)];
    expect(roleResource.Properties.ManagedPolicyArns).toBeUndefined();
  });

  it('is left out with checkFinanceKeyAtDeploy false', () => {
    const s = synth({ checkFinanceKeyAtDeploy: 'false' });

    s.template.resourceCountIs('Custom::FinanceKeyCheck', 0);
    expect(s.stack.financeKeyCheck).toBeUndefined();
    expect(s.config.checkFinanceKeyAtDeploy).toBe(false);
  });
});

describe('ConnectorStack (scheduled catch-up)', () => {
  const SHOP_API =
    '{"url":"https://shop-main.myshopify.com","credentialsRef":"connector/shop-api/shopify-main"}';

  it('is off unless configured: no function, no rule', () => {
    const s = synth();

    expect(s.stack.catchUp).toBeUndefined();
    expect(JSON.stringify(s.template.findResources('AWS::Lambda::Function'))).not.toContain(
      CATCH_UP_FUNCTION.description,
    );
    expect(JSON.stringify(s.template.findResources('AWS::Events::Rule'))).not.toContain('catch-up');
  });

  it('runs daily at the configured hour, with the catch-up settings and the sources', () => {
    const s = synth({ 'catchUp.enabled': 'true', 'catchUp.hourUtc': '4', 'sources.0.shopApi': SHOP_API });
    const fn = s.stack.catchUp!;

    s.template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'cron(0 4 * * ? *)',
      Targets: [
        Match.objectLike({
          Arn: { 'Fn::GetAtt': [s.id(fn), 'Arn'] },
          RetryPolicy: { MaximumRetryAttempts: 2 },
        }),
      ],
    });
    const env = s.template.toJSON().Resources[s.id(fn)].Properties.Environment.Variables;
    expect(env).toMatchObject({ CATCH_UP_HOURS: '48', QUEUE_URL: { Ref: s.id(s.stack.pipeline.queue) } });
    expect(SourcesFile.parse(JSON.parse(env.SOURCES))[0]?.shopApi).toEqual(JSON.parse(SHOP_API));
    s.template.hasResourceProperties('AWS::Lambda::Function', {
      Runtime: 'nodejs24.x',
      Architectures: ['arm64'],
      Timeout: 600,
    });
  });

  it('least privilege: sends to the main queue and reads the shop API credentials, nothing else', () => {
    const s = synth({ 'catchUp.enabled': 'true', 'sources.0.shopApi': SHOP_API });
    const statements = statementsOf(s, s.stack.catchUp!);

    expect(actionsOf(statements)).toEqual([
      'logs:CreateLogStream',
      'logs:PutLogEvents',
      'secretsmanager:GetSecretValue',
      'sqs:SendMessage',
    ]);
    expect(statements).toContainEqual(
      expect.objectContaining({
        Action: 'sqs:SendMessage',
        Resource: { 'Fn::GetAtt': [s.id(s.stack.pipeline.queue), 'Arn'] },
      }),
    );
    const secrets = JSON.stringify(statements.filter((st) => st.Action === 'secretsmanager:GetSecretValue'));
    expect(secrets).toContain(':secret:connector/shop-api/shopify-main-??????');
    expect(secrets).not.toContain('connector/webhooks/');
    expect(secrets).not.toContain('affiliate-token');
  });

  it('refuses to be enabled with no source that has a shop API, and a credentialsRef that is no secret name', () => {
    expect(() => synth({ 'catchUp.enabled': 'true' })).toThrow(
      'catchUp.enabled: no source has shopApi: the catch-up would read nothing',
    );
    expect(() =>
      synth({ 'sources.0.shopApi': '{"url":"https://s.myshopify.com","credentialsRef":"bad ref!"}' }),
    ).toThrow('sources.0.shopApi.credentialsRef');
  });
});

import type { CfnElement } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ConnectorStack } from '../../infra/connector-stack.ts';
import { UNCONFIRMED_SETTLE_MS } from '../../shared/accept/job.ts';
import { ACCEPT_DUE_INDEX } from '../../shared/adapters/dynamo-ledger.ts';
import { actionsOf, connectorApp, exampleConfig, roleStatements } from './support.ts';

/** Issue 17, part 2: the scheduled accept job, its sparse due-date index, its alarms and its rights. */

let stack: ConnectorStack;
let template: Template;
const id = (construct: IConstruct) =>
  stack.getLogicalId((construct.node.defaultChild ?? construct) as CfnElement);

beforeAll(() => {
  stack = connectorApp(exampleConfig()).stack;
  template = Template.fromStack(stack);
});

const statementsOfAccept = () => roleStatements(template, stack, stack.functions.accept);

describe('accept after the return window (CDK)', () => {
  it('the ledger has a sparse index on the due date, by source, keys only', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      GlobalSecondaryIndexes: [
        {
          IndexName: ACCEPT_DUE_INDEX,
          KeySchema: [
            { AttributeName: 'source', KeyType: 'HASH' },
            { AttributeName: 'acceptDueAt', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'KEYS_ONLY' },
        },
      ],
    });
  });

  it('an hourly EventBridge schedule runs the accept function', () => {
    template.hasResourceProperties('AWS::Lambda::Function', {
      Handler: 'index.handler',
      Runtime: 'nodejs24.x',
      Environment: {
        Variables: Match.objectLike({
          LEDGER_TABLE: { Ref: id(stack.ledger) },
          DLQ_URL: { Ref: id(stack.pipeline.deadLetterQueue) },
          ACCEPT_MAX_PER_RUN: '500',
        }),
      },
    });
    const rules = Object.values(
      template.findResources('AWS::Events::Rule', {
        Properties: {
          ScheduleExpression: 'rate(1 hour)',
          Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [id(stack.functions.accept), 'Arn'] } })],
        },
      }),
    );
    expect(rules).toHaveLength(1);
  });

  it('the accept function may Query the due index only (never Scan or the table), read and write ledger items, park in the DLQ', () => {
    const statements = statementsOfAccept();
    expect(actionsOf(statements)).toEqual([
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:Query',
      'logs:CreateLogStream',
      'logs:PutLogEvents',
      'secretsmanager:GetSecretValue',
      'sqs:SendMessage',
    ]);
    const query = statements.find((st) => actionsOf([st]).includes('dynamodb:Query'));
    expect(actionsOf([query!])).toEqual(['dynamodb:Query']);
    expect(JSON.stringify(query?.Resource)).toContain(`/index/${ACCEPT_DUE_INDEX}`);
    const send = statements.find((st) => actionsOf([st]).includes('sqs:SendMessage'));
    expect(send?.Resource).toEqual({ 'Fn::GetAtt': [id(stack.pipeline.deadLetterQueue), 'Arn'] });
  });

  it('alarms on failed accepts and on due conversions left for a day, and on the function’s errors', () => {
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'ConversionConnector',
      MetricName: 'AcceptFailures',
      Statistic: 'Sum',
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'ConversionConnector',
      MetricName: 'AcceptDueLeft',
      Statistic: 'Minimum',
      Period: 3600,
      EvaluationPeriods: 24,
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    template.hasResourceProperties('AWS::CloudWatch::Alarm', {
      Namespace: 'AWS/Lambda',
      MetricName: 'Errors',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: id(stack.functions.accept) } }],
    });
  });
});

describe('accept function and the pacing table', () => {
  it('the accept function is given no PACING_TABLE, so it makes no pacing-table calls that its role would refuse', () => {
    const resource = template.toJSON().Resources[id(stack.functions.accept)];
    const environment = resource.Properties.Environment.Variables as Record<string, unknown>;
    const mayWritePaces = statementsOfAccept().some(
      (st) =>
        actionsOf([st]).includes('dynamodb:UpdateItem') &&
        JSON.stringify(st.Resource) === JSON.stringify({ 'Fn::GetAtt': [id(stack.pacing), 'Arn'] }),
    );

    expect({ pacingTable: environment['PACING_TABLE'] !== undefined, mayWritePaces }).toEqual({
      pacingTable: false,
      mayWritePaces: false,
    });
  });
});

describe('accept function and a send left unconfirmed', () => {
  it('holds an unconfirmed order longer than the worker that left the mark can still be sending', () => {
    // The worker's invocation ends by its timeout; its message is handed out again only after the
    // main queue's visibility timeout. The hold (UNCONFIRMED_SETTLE_MS) is a constant of the accept
    // job, so a deployment that lengthened either would otherwise accept while a stale send may land.
    const resources = template.toJSON().Resources as Record<
      string,
      { Type: string; Properties: Record<string, unknown> }
    >;
    const workerTimeoutS = resources[id(stack.functions.worker)]?.Properties.Timeout as number;
    const visibilityS = Math.max(
      ...Object.values(resources)
        .filter((r) => r.Type === 'AWS::SQS::Queue')
        .map((r) => (r.Properties.VisibilityTimeout as number | undefined) ?? 30),
    );

    expect(workerTimeoutS).toBeGreaterThan(0);
    expect(UNCONFIRMED_SETTLE_MS).toBeGreaterThanOrEqual(2 * Math.max(workerTimeoutS, visibilityS) * 1000);
  });
});

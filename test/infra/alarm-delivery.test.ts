import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { type ConnectorStack, PROJECT_ROOT } from '../../infra/connector-stack.ts';
import { connectorApp, exampleConfig } from './support.ts';

/**
 * What the operator is told, and when. An alarm that fires into a topic CloudWatch may not publish
 * to, or that reports OK while orders sit in the DLQ, or that the runbook does not name, pages
 * nobody or misleads whoever it pages.
 */

const SHOP_API = '{"url":"https://shop-main.myshopify.com","credentialsRef":"connector/shop-api/main"}';

let stack: ConnectorStack;
let template: Template;
const id = (construct: IConstruct) =>
  stack.getLogicalId((construct.node.defaultChild ?? construct) as CfnElement);

beforeAll(() => {
  // Every optional alarm on: the catch-up's and the e-mail topic.
  stack = connectorApp(
    exampleConfig({
      alarmEmail: 'ops@example.com',
      'catchUp.enabled': 'true',
      'sources.0.shopApi': SHOP_API,
    }),
  ).stack;
  template = Template.fromStack(stack);
});

type Statement = {
  Effect: string;
  Principal?: unknown;
  Action: string | string[];
  Resource: unknown;
  Condition?: Record<string, Record<string, unknown>>;
};

function topicStatements(): Statement[] {
  const topic = stack.monitoring.topic;
  if (topic === undefined) throw new Error('no alarm topic with alarmEmail set');
  const policies = Object.values(
    template.findResources('AWS::SNS::TopicPolicy', { Properties: { Topics: [{ Ref: id(topic) }] } }),
  );
  expect(policies).toHaveLength(1);
  return (policies[0] as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties
    .PolicyDocument.Statement;
}

describe('alarm notifications (alarmEmail)', () => {
  it("lets CloudWatch publish the stack's alarms to the topic: its policy replaces SNS's default one", () => {
    // Prepare
    const alarmArns = stack.monitoring.alarms.map((alarm) => ({ 'Fn::GetAtt': [id(alarm), 'Arn'] }));

    // Act
    const allows = topicStatements().filter((st) => st.Effect === 'Allow');

    // Assess: without an Allow for the CloudWatch service, every alarm action fails with "is not
    // authorized to perform: SNS:Publish" (in the alarm's history only) and no e-mail is sent.
    expect(allows).toEqual([
      expect.objectContaining({
        Principal: { Service: 'cloudwatch.amazonaws.com' },
        Action: 'sns:Publish',
        Resource: { Ref: id(stack.monitoring.topic!) },
        Condition: { ArnEquals: { 'aws:SourceArn': alarmArns } },
      }),
    ]);
    expect(alarmArns.length).toBeGreaterThanOrEqual(16);
  });

  it('still refuses any publish without TLS', () => {
    expect(topicStatements()).toContainEqual(
      expect.objectContaining({
        Effect: 'Deny',
        Action: 'sns:Publish',
        Condition: { Bool: { 'aws:SecureTransport': 'false' } },
      }),
    );
  });
});

describe('the dead-letter queue alarm', () => {
  it('keeps its state while SQS reports nothing, so it does not turn OK with orders still parked', () => {
    // SQS reports a queue's metrics while it is active: while it holds messages, or for six hours
    // after a call on it. A DLQ holding parked orders keeps reporting, but should data go missing
    // anyway, "not breaching" would turn the alarm OK (and e-mail OK) with orders still parked.
    const alarms = template.findResources('AWS::CloudWatch::Alarm', {
      Properties: {
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateNumberOfMessagesVisible',
        Dimensions: [
          { Name: 'QueueName', Value: { 'Fn::GetAtt': [id(stack.pipeline.deadLetterQueue), 'QueueName'] } },
        ],
      },
    });

    expect(Object.values(alarms)).toEqual([
      expect.objectContaining({
        Properties: expect.objectContaining({
          Threshold: 0,
          ComparisonOperator: 'GreaterThanThreshold',
          TreatMissingData: 'ignore',
        }),
      }),
    ]);
  });
});

describe('the runbook', () => {
  it('names every alarm the stack creates, as its name in the e-mail and the console shows it', () => {
    // Prepare: CloudFormation names an alarm `<stack>-<logical id>-<suffix>`; the logical id holds
    // the construct's id (`MonitoringDeadLetterMessages1A2B3C4D`), which is what the page shows.
    const runbook = readFileSync(join(PROJECT_ROOT, 'docs', 'runbook.md'), 'utf8');
    const alarmsSection = runbook.slice(
      runbook.indexOf('## Alarms'),
      runbook.indexOf('\n## ', runbook.indexOf('## Alarms') + 1),
    );

    // Act
    const undocumented = stack.monitoring.alarms
      .map((alarm) => alarm.node.id)
      .filter((name) => !alarmsSection.includes(name));

    // Assess
    expect(stack.monitoring.alarms.length).toBeGreaterThanOrEqual(16);
    expect(undocumented).toEqual([]);
  });
});

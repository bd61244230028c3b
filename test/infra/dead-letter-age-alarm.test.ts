import type { CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import type { ConnectorStack } from '../../infra/connector-stack.ts';
import { DeployConfigError } from '../../infra/deploy-config.ts';
import { connectorApp, exampleConfig } from './support.ts';

/**
 * SQS deletes a message from the DLQ 14 days (its retention, the SQS maximum) after it was parked,
 * and a parked order or refund is then lost for good. `DeadLetterMessages` fires once, on the first
 * park; an operator who saw it and did nothing needs a second warning while there are still days to
 * act: an alarm on the age of the DLQ's oldest message. A FIFO DLQ's age counts from the move (SQS
 * resets the enqueue time), which is also where its retention counts from.
 */

const DAY = 86_400;

function synth(overrides: Record<string, unknown> = {}) {
  const { stack } = connectorApp(exampleConfig(overrides));
  const template = Template.fromStack(stack);
  const id = (construct: IConstruct) =>
    stack.getLogicalId((construct.node.defaultChild ?? construct) as CfnElement);
  return { stack, template, id };
}

type Properties = Record<string, unknown>;

/** The alarms on the age of the DLQ's oldest message, as synthesized. */
function deadLetterAgeAlarms(s: {
  stack: ConnectorStack;
  template: Template;
  id: (c: IConstruct) => string;
}) {
  const alarms = s.template.findResources('AWS::CloudWatch::Alarm', {
    Properties: {
      Namespace: 'AWS/SQS',
      MetricName: 'ApproximateAgeOfOldestMessage',
      Dimensions: [
        { Name: 'QueueName', Value: { 'Fn::GetAtt': [s.id(s.stack.pipeline.deadLetterQueue), 'QueueName'] } },
      ],
    },
  });
  return Object.entries(alarms).map(([logicalId, r]) => ({
    logicalId,
    properties: (r as { Properties: Properties }).Properties,
  }));
}

function deadLetterRetentionSeconds(s: {
  stack: ConnectorStack;
  template: Template;
  id: (c: IConstruct) => string;
}) {
  const queues = s.template.toJSON().Resources as Record<string, { Properties: Properties }>;
  return Number(queues[s.id(s.stack.pipeline.deadLetterQueue)]?.Properties['MessageRetentionPeriod']);
}

describe('the DLQ age alarm (DeadLetterExpiring)', () => {
  it('fires when a parked message has waited 10 days, four before SQS deletes it', () => {
    // Prepare
    const s = synth();

    // Act
    const alarms = deadLetterAgeAlarms(s);

    // Assess
    expect(alarms).toHaveLength(1);
    expect(alarms[0]?.logicalId).toMatch(/^MonitoringDeadLetterExpiring/);
    expect(alarms[0]?.properties).toMatchObject({
      Statistic: 'Maximum',
      ComparisonOperator: 'GreaterThanThreshold',
      Threshold: 10 * DAY,
      EvaluationPeriods: 1,
      // Missing only while the DLQ is empty (a queue holding messages is active and reported): OK.
      TreatMissingData: 'notBreaching',
    });
    expect(deadLetterRetentionSeconds(s)).toBe(14 * DAY);
  });

  it('takes its threshold from alarms.deadLetterAgeDays', () => {
    const s = synth({ 'alarms.deadLetterAgeDays': '12' });

    expect(deadLetterAgeAlarms(s).map((a) => a.properties['Threshold'])).toEqual([12 * DAY]);
  });

  it('e-mails alarmEmail when it fires and when the DLQ is dealt with, like every other alarm', () => {
    // Prepare
    const s = synth({ alarmEmail: 'ops@example.com' });
    const topic = { Ref: s.id(s.stack.monitoring.topic!) };

    // Act
    const [alarm] = deadLetterAgeAlarms(s);

    // Assess
    expect(alarm?.properties).toMatchObject({ AlarmActions: [topic], OKActions: [topic] });
    expect(s.stack.monitoring.alarms.map((a) => a.node.id)).toContain('DeadLetterExpiring');
  });

  it.each([
    ['the DLQ’s retention itself', '14'],
    ['more than the retention', '20'],
    ['no time at all', '0'],
  ])('refuses a threshold of %s, naming the setting and the retention', (_what, days) => {
    const load = () => exampleConfig({ 'alarms.deadLetterAgeDays': days });

    expect(load).toThrow(DeployConfigError);
    expect(load).toThrow(/alarms\.deadLetterAgeDays: .*14/);
  });
});

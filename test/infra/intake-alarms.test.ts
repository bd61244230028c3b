import type { CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import { CONNECTOR_METRICS } from '../../infra/monitoring.ts';
import { METRIC } from '../../shared/observability.ts';
import { connectorApp, exampleConfig } from './support.ts';

/**
 * The shops' side of the connector fails without a message in any queue: a webhook function that
 * cannot start (a bad SOURCES after a deploy) or that Lambda throttles (its reserved concurrency
 * spent) answers API Gateway's 500 to every delivery, WooCommerce gives up on each one and disables
 * the webhook after a few, Shopify removes the subscription after its retries. Nothing reaches the
 * queue or the DLQ, so only an alarm on the function itself tells anyone. Finance's `POST /refunds`
 * likewise: the one who sees its 500 is finance, not the operator.
 */

function synth(overrides: Record<string, unknown> = {}) {
  const { stack } = connectorApp(exampleConfig(overrides));
  const template = Template.fromStack(stack);
  const id = (construct: IConstruct) =>
    stack.getLogicalId((construct.node.defaultChild ?? construct) as CfnElement);
  return { stack, template, id };
}

describe('intake alarms', () => {
  it('alarms when the webhook function fails or is throttled, so refused shop deliveries are noticed', () => {
    const { stack, template, id } = synth();

    for (const metric of ['Errors', 'Throttles']) {
      template.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'AWS/Lambda',
        MetricName: metric,
        Dimensions: [{ Name: 'FunctionName', Value: { Ref: id(stack.functions.webhook) } }],
        Statistic: 'Sum',
        Threshold: 0,
        ComparisonOperator: 'GreaterThanThreshold',
        TreatMissingData: 'notBreaching',
      });
    }
  });

  it('the webhook alarms notify alarmEmail like the others', () => {
    const { stack, template, id } = synth({ alarmEmail: 'ops@example.com' });

    const alarms = Object.values(
      template.findResources('AWS::CloudWatch::Alarm', {
        Properties: {
          Namespace: 'AWS/Lambda',
          Dimensions: [{ Name: 'FunctionName', Value: { Ref: id(stack.functions.webhook) } }],
        },
      }),
    );

    expect(alarms).toHaveLength(2);
    const topic = [{ Ref: id(stack.monitoring.topic!) }];
    for (const alarm of alarms) {
      expect(alarm['Properties']).toMatchObject({ AlarmActions: topic, OKActions: topic });
    }
  });

  it('alarms when the refunds function fails or is throttled, so refunds refused to finance are noticed', () => {
    const { stack, template, id } = synth({ alarmEmail: 'ops@example.com' });
    const topic = [{ Ref: id(stack.monitoring.topic!) }];

    for (const [logicalPrefix, metric] of [
      ['RefundsErrors', 'Errors'],
      ['RefundsThrottles', 'Throttles'],
    ] as const) {
      const alarms = template.findResources('AWS::CloudWatch::Alarm', {
        Properties: {
          Namespace: 'AWS/Lambda',
          MetricName: metric,
          Dimensions: [{ Name: 'FunctionName', Value: { Ref: id(stack.functions.refunds) } }],
          Statistic: 'Sum',
          Period: 300,
          Threshold: 0,
          ComparisonOperator: 'GreaterThanThreshold',
          TreatMissingData: 'notBreaching',
          AlarmActions: topic,
          OKActions: topic,
        },
      });
      expect(Object.keys(alarms)).toEqual([expect.stringContaining(logicalPrefix)]);
    }
  });
  it.each([
    ['the webhook', 'WebhookUnavailable', 'WebhooksUnavailable'],
    ['POST /refunds', 'RefundsUnavailable', 'FinanceRefundsUnavailable'],
  ])(
    'alarms on any 503 %s answered itself because a secret, the ledger or the queue was out of reach',
    (_what, logicalPrefix, metric) => {
      // The function answers these itself: Lambda's Errors stay 0, so the alarms above never see them.
      const { stack, template, id } = synth({ alarmEmail: 'ops@example.com' });
      const topic = [{ Ref: id(stack.monitoring.topic!) }];

      const alarms = template.findResources('AWS::CloudWatch::Alarm', {
        Properties: {
          Namespace: 'ConversionConnector',
          MetricName: metric,
          Dimensions: [{ Name: 'service', Value: 'conversion-connector' }],
          Statistic: 'Sum',
          Period: 300,
          EvaluationPeriods: 1,
          Threshold: 0,
          ComparisonOperator: 'GreaterThanThreshold',
          TreatMissingData: 'notBreaching',
          AlarmActions: topic,
          OKActions: topic,
        },
      });

      expect(Object.keys(alarms)).toEqual([expect.stringContaining(logicalPrefix)]);
      // What the operator reads in the e-mail: what to check, and what the shops or finance need after.
      const description = String(Object.values(alarms)[0]?.['Properties']['AlarmDescription']);
      expect(description).toMatch(/503/);
      expect(description).toMatch(/queue/);
      expect(description).toMatch(/4xx/);
    },
  );

  it('the metrics the unavailable alarms watch are the ones the functions emit, and on the dashboard', () => {
    const { template } = synth();
    const body = JSON.stringify(Object.values(template.findResources('AWS::CloudWatch::Dashboard'))[0]);
    for (const metric of [METRIC.webhooksUnavailable, METRIC.financeRefundsUnavailable]) {
      expect(CONNECTOR_METRICS).toContain(metric);
      expect(body).toContain(metric);
    }
  });
});

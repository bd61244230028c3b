import type { CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import { connectorApp, exampleConfig } from './support.ts';

/**
 * The scheduled catch-up fails its run when a source's shop failed or was not read to the end within
 * its share of the function's time (a shop that keeps answering 429, a slow one). Nothing it missed
 * shows in any queue, and it runs once a day: only an alarm on the function's errors tells anyone
 * that a shop is not being caught up.
 */
const SHOP_API =
  '{"url":"https://shop-main.myshopify.com","credentialsRef":"connector/shop-api/shopify-main"}';

function synth(overrides: Record<string, unknown> = {}) {
  const { stack } = connectorApp(
    exampleConfig({ 'catchUp.enabled': 'true', 'sources.0.shopApi': SHOP_API, ...overrides }),
  );
  const template = Template.fromStack(stack);
  const id = (construct: IConstruct) =>
    stack.getLogicalId((construct.node.defaultChild ?? construct) as CfnElement);
  return { stack, template, id };
}

describe('catch-up alarm', () => {
  it('alarms on any failed catch-up run (a shop failed or not finished in time), and notifies alarmEmail', () => {
    // Prepare / Act
    const { stack, template, id } = synth({ alarmEmail: 'ops@example.com' });

    // Assess
    const alarms = Object.values(
      template.findResources('AWS::CloudWatch::Alarm', {
        Properties: {
          Namespace: 'AWS/Lambda',
          MetricName: 'Errors',
          Dimensions: [{ Name: 'FunctionName', Value: { Ref: id(stack.catchUp!) } }],
        },
      }),
    );
    expect(alarms).toHaveLength(1);
    const topic = [{ Ref: id(stack.monitoring.topic!) }];
    expect(alarms[0]?.['Properties']).toMatchObject({
      Statistic: 'Sum',
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
      AlarmActions: topic,
      OKActions: topic,
    });
    expect(String(alarms[0]?.['Properties']['AlarmDescription'])).toContain('catch-up unfinished');
  });
});

import type { CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { CONNECTOR_FUNCTIONS } from '../../infra/connector-stack.ts';
import { DeployConfigError } from '../../infra/deploy-config.ts';
import { longestQueueStaySeconds } from '../../shared/worker/batch.ts';
import { connectorApp, exampleConfig } from './support.ts';

/**
 * The `OldestMessageAge` alarm means a stalled worker, not one bad message (infra/deploy-config.ts):
 * its default threshold sits above how long one message failing transiently stays in the main queue
 * on the worker's backoffs before the worker parks it. That stay grows with `queue.maxReceiveCount`
 * (5 to 1000), so a fixed 30 minutes paged someone for one bad message at 7 receives and more. Waits
 * the platform asks for are not counted: a message kept by them pages, as the platform is in trouble.
 */
function oldestMessageThreshold(overrides: Record<string, unknown>): number {
  const stack = connectorApp(exampleConfig(overrides)).stack;
  const queueName = {
    'Fn::GetAtt': [stack.getLogicalId(stack.pipeline.queue.node.defaultChild as CfnElement), 'QueueName'],
  };
  // The main queue's, not the DLQ's (DeadLetterExpiring: test/infra/dead-letter-age-alarm.test.ts).
  const alarms = Template.fromStack(stack).findResources('AWS::CloudWatch::Alarm', {
    Properties: {
      MetricName: 'ApproximateAgeOfOldestMessage',
      Dimensions: [{ Name: 'QueueName', Value: queueName }],
    },
  });
  const found = Object.values(alarms) as { Properties: { Threshold: number } }[];
  return found.length === 1 ? found[0]!.Properties.Threshold : Number.NaN;
}

/** One failing message's stay on the worker's backoffs in the main queue as deployed, at `maxReceiveCount`. */
function stayAt(maxReceiveCount: number): number {
  return longestQueueStaySeconds({
    maxReceiveCount,
    visibilityTimeoutSeconds: 6 * CONNECTOR_FUNCTIONS.worker.timeout.toSeconds(),
    invocationSeconds: CONNECTOR_FUNCTIONS.worker.timeout.toSeconds(),
    longestWaitSeconds: 0,
  });
}

describe('the OldestMessageAge alarm', () => {
  it.each([6, 10, 20])(
    'sits above one failing message’s stay on the backoffs at maxReceiveCount %i',
    (count) => {
      const stay = stayAt(count);
      const threshold = oldestMessageThreshold({ 'queue.maxReceiveCount': String(count) });
      expect(threshold).toBeGreaterThan(stay);
      expect(threshold).toBeGreaterThanOrEqual(1800);
    },
  );

  it('keeps a threshold the deploy config gives, from one failing message’s stay on the backoffs up', () => {
    const above = stayAt(6) + 600;
    expect(oldestMessageThreshold({ 'alarms.oldestMessageAgeSeconds': String(above) })).toBe(above);
    expect(oldestMessageThreshold({ 'alarms.oldestMessageAgeSeconds': String(stayAt(6)) })).toBe(stayAt(6));
    expect(
      oldestMessageThreshold({
        'queue.maxReceiveCount': '10',
        'alarms.oldestMessageAgeSeconds': String(stayAt(10)),
      }),
    ).toBe(stayAt(10));
  });

  it.each([
    [6, 900],
    [6, stayAt(6) - 1],
    [10, 1800],
  ])('refuses a threshold one failing message would cross: maxReceiveCount %i, %i s', (count, seconds) => {
    // Prepare
    const load = () =>
      exampleConfig({
        'queue.maxReceiveCount': String(count),
        'alarms.oldestMessageAgeSeconds': String(seconds),
      });

    // Act
    let message = '';
    try {
      load();
    } catch (error) {
      expect(error).toBeInstanceOf(DeployConfigError);
      message = (error as Error).message;
    }

    // Assess: the setting, the value given and the least it may be for these receives.
    expect(message).toContain(`alarms.oldestMessageAgeSeconds: ${seconds} `);
    expect(message).toContain(`at least ${stayAt(count)}`);
    expect(message).toContain(`queue.maxReceiveCount ${count}`);
  });
});

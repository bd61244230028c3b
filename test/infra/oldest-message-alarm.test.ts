import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { CONNECTOR_FUNCTIONS } from '../../infra/connector-stack.ts';
import { longestQueueStaySeconds } from '../../shared/worker/batch.ts';
import { connectorApp, exampleConfig } from './support.ts';

/**
 * The `OldestMessageAge` alarm means a stalled worker, not one bad message (infra/deploy-config.ts):
 * its default threshold sits above the longest one message failing transiently stays in the main
 * queue before the worker parks it. That stay grows with `queue.maxReceiveCount` (5 to 1000), so a
 * fixed 30 minutes paged someone for one bad message at 7 receives and more.
 */
function oldestMessageThreshold(overrides: Record<string, unknown>): number {
  const stack = connectorApp(exampleConfig(overrides)).stack;
  const alarms = Template.fromStack(stack).findResources('AWS::CloudWatch::Alarm', {
    Properties: { MetricName: 'ApproximateAgeOfOldestMessage' },
  });
  const [alarm] = Object.values(alarms) as { Properties: { Threshold: number } }[];
  return alarm?.Properties.Threshold ?? Number.NaN;
}

describe('the OldestMessageAge alarm', () => {
  it.each([6, 10, 20])('sits above one failing message’s longest stay at maxReceiveCount %i', (count) => {
    const stay = longestQueueStaySeconds({
      maxReceiveCount: count,
      visibilityTimeoutSeconds: 6 * CONNECTOR_FUNCTIONS.worker.timeout.toSeconds(),
    });
    const threshold = oldestMessageThreshold({ 'queue.maxReceiveCount': String(count) });
    expect(threshold).toBeGreaterThan(stay);
    expect(threshold).toBeGreaterThanOrEqual(1800);
  });

  it('keeps a threshold the deploy config gives', () => {
    expect(oldestMessageThreshold({ 'alarms.oldestMessageAgeSeconds': '900' })).toBe(900);
  });
});

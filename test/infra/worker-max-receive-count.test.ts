import type { CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import { maxReceiveCountFromEnv } from '../../shared/config/env.ts';
import { connectorApp, exampleConfig } from './support.ts';

/**
 * The worker parks a message still failing transiently on the main queue's last receive, with a
 * reason, before SQS's redrive would move it with none: it must know the very maxReceiveCount of the
 * queue's redrive policy. The stack gives it as MAX_RECEIVE_COUNT, and no permission more: parking is
 * a SendMessage to the DLQ, which the worker already does (connector-stack.test.ts lists its actions).
 */

function synth(overrides: Record<string, unknown> = {}) {
  const { stack } = connectorApp(exampleConfig(overrides));
  const resources = Template.fromStack(stack).toJSON().Resources;
  const properties = (construct: IConstruct) =>
    resources[stack.getLogicalId(construct.node.defaultChild as CfnElement)].Properties;
  return {
    environment: properties(stack.functions.worker).Environment.Variables as Record<string, string>,
    redrive: properties(stack.pipeline.queue).RedrivePolicy as { maxReceiveCount: number },
  };
}

describe('the worker’s MAX_RECEIVE_COUNT', () => {
  it.each([
    ['the default', {}, 6],
    ['queue.maxReceiveCount from the config', { 'queue.maxReceiveCount': '8' }, 8],
  ])('is the main queue’s redrive maxReceiveCount, with %s', (_what, overrides, expected) => {
    const { environment, redrive } = synth(overrides);

    expect(redrive.maxReceiveCount).toBe(expected);
    expect(environment['MAX_RECEIVE_COUNT']).toBe(String(expected));
    // As the worker reads it at cold start.
    expect(maxReceiveCountFromEnv(environment)).toBe(expected);
  });
});

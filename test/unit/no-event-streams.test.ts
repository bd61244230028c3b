import * as dynamodb from '@aws-sdk/client-dynamodb';
import * as secretsManager from '@aws-sdk/client-secrets-manager';
import * as sqs from '@aws-sdk/client-sqs';
import { NormalizedSchema } from '@smithy/core/schema';
import { describe, expect, it } from 'vitest';
import { EventStreamSerde, eventStreamSerdeProvider } from '../../shared/adapters/no-event-streams.ts';

/**
 * The bundles load shared/adapters/no-event-streams.ts in place of `@smithy/core/event-streams`
 * (CONNECTOR_BUNDLING's alias). That holds only while no operation of the SDK clients they bundle
 * sends or receives an event stream: the SDK's protocols load event streams for exactly those
 * (`HttpProtocol.loadEventStreamCapability`, reached when the operation's input or output has an
 * event stream member, as `Command` itself decides with `getEventStreamMember`).
 */

type Operation = readonly [9, string, string, unknown, unknown, unknown];

/** The member of the operation's input or output that is an event stream, as the SDK finds it. */
function eventStreamOf(operation: Operation): string {
  const [, , , , input, output] = operation;
  return (
    NormalizedSchema.of(input as never).getEventStreamMember() ||
    NormalizedSchema.of(output as never).getEventStreamMember()
  );
}

/** Every command a client package exports, with its operation schema. */
function operationsOf(client: Record<string, unknown>): [string, Operation][] {
  return Object.entries(client).flatMap(([name, value]) => {
    if (!name.endsWith('Command') || name === '$Command' || typeof value !== 'function') return [];
    const command = new (value as new (input: object) => { schema?: unknown })({});
    return [[name, command.schema as Operation]];
  });
}

describe('the SDK clients the functions bundle', () => {
  it.each([
    ['@aws-sdk/client-sqs', sqs],
    ['@aws-sdk/client-dynamodb', dynamodb],
    ['@aws-sdk/client-secrets-manager', secretsManager],
  ] as const)('%s has no operation with an event stream', (_, client) => {
    const operations = operationsOf(client);

    // Every command was found and carries its operation's schema (9: an operation).
    expect(operations.length).toBeGreaterThan(20);
    for (const [name, operation] of operations) expect(operation?.[0], name).toBe(9);
    expect(operations.filter(([, operation]) => eventStreamOf(operation) !== '')).toEqual([]);
  });

  it('the check finds an event stream member where an operation has one', () => {
    // Prepare: an operation whose input has a member `events`, a union marked as a stream
    const events = [4, 'test', 'Events', { streaming: 1 }, [], []];
    const operation: Operation = [9, 'test', 'Subscribe', 0, [3, 'test', 'In', 0, ['events'], [events]], 0];

    expect(eventStreamOf(operation)).toBe('events');
  });
});

describe('the stand-in for @smithy/core/event-streams', () => {
  it('fails a call that reached it, naming what the bundle left out', () => {
    expect(() => eventStreamSerdeProvider({})).toThrow(/event streams.*left out of this bundle/);
    expect(() => new EventStreamSerde({})).toThrow(/event streams.*left out of this bundle/);
  });
});

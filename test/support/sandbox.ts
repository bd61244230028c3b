import { expect } from 'vitest';
import type { LocalStack } from '../../infra/local/stack.ts';
import type { StoredConversion } from '../../sandbox/types.ts';

/** The sandbox's conversions with `externalId` (none when the stack runs without the sandbox). */
export function sandboxConversions(stack: LocalStack, externalId: string): StoredConversion[] {
  return (stack.sandbox?.control.conversions() ?? []).filter((c) => c.externalId === externalId);
}

/** The one conversion with `externalId`: the test fails unless there is exactly one. */
export function onlyConversion(stack: LocalStack, externalId: string): StoredConversion {
  const found = sandboxConversions(stack, externalId);
  expect(found).toHaveLength(1);
  return found[0] as StoredConversion;
}

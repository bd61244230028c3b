import { afterAll, beforeAll, beforeEach, expect } from 'vitest';
import type { LocalStack } from '../../infra/local/stack.ts';
import { type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import type { RuntimeOptions, StoredConversion } from '../../sandbox/types.ts';

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

/** What a test file reads of the sandbox that `sandboxForTests` runs for it. */
export type TestSandbox = Pick<RunningSandbox, 'url' | 'token' | 'control'>;

/**
 * The platform sandbox for one test file, on port 0 (started before its tests, closed after), reset
 * before each test with `options` set again, such as `duplicates: 'reject'`: the platform answers a
 * second add of an externalId 409, where the sandbox's default records a second conversion.
 */
export function sandboxForTests(options: Partial<RuntimeOptions> = {}): TestSandbox {
  let sandbox: RunningSandbox | undefined;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0 });
  });
  afterAll(async () => {
    await sandbox?.close();
  });
  beforeEach(() => {
    running().control.reset();
    running().control.setOptions(options);
  });
  const running = (): RunningSandbox => {
    if (!sandbox) throw new Error('the sandbox is started in beforeAll');
    return sandbox;
  };
  return {
    get url() {
      return running().url;
    },
    get token() {
      return running().token;
    },
    get control() {
      return running().control;
    },
  };
}

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { localStateDir, runCli } from '../support/cli.ts';

/**
 * `connector status` tells when the accept job will accept an order of a source with a return
 * window (`acceptAfterDays`), and only for the orders the job does accept: not a shadowed order (no
 * conversion was made) nor a refused one.
 */

const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';

let stack: LocalStack;
let state: { dir: string; remove(): void };

beforeAll(async () => {
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    acceptAfterDays: 14,
    shadowSources: ['generic'],
  });
  state = localStateDir(stack);
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const cli = (...argv: string[]) => runCli(argv, { cwd: state.dir });

async function send(...argv: string[]): Promise<void> {
  const sent = await cli('send', ...argv);
  expect(sent.code, sent.stderr).toBe(0);
  await stack.waitForIdle();
}

/** The accept job run now as if every return window had passed. */
const acceptEverythingDue = () => stack.runAccept({ olderThanMs: 0 });

describe('connector status: acceptance', () => {
  it('shows when a live order is due, then that it was accepted', async () => {
    // Prepare
    await send('shopify', '--order-id', '5401', '--click-id', CLICK, '--ip', IP);
    // Act
    const due = await cli('status', '5401', '--source', 'shopify');
    const run = await acceptEverythingDue();
    const accepted = await cli('status', '5401', '--source', 'shopify');
    // Assess
    expect(due.stdout).toMatch(/accept\s+waiting \(due \d{4}-\d\d-\d\dT/);
    expect(run.items).toContainEqual(expect.objectContaining({ externalId: '5401', result: 'accepted' }));
    expect(accepted.stdout).toMatch(/accept\s+accepted \d{4}-\d\d-\d\dT\S+ \(due /);
  });

  it('says nothing of acceptance for a shadowed order, which the accept job passes by', async () => {
    // Prepare
    await send('generic', '--order-id', '5402', '--click-id', CLICK, '--ip', IP);
    // Act
    const shown = await cli('status', '5402', '--source', 'generic');
    const run = await acceptEverythingDue();
    const after = await cli('status', '5402', '--source', 'generic');
    // Assess
    expect(shown.stdout).toMatch(/state\s+shadowed\s+-/);
    expect(shown.stdout).toContain('recorded in shadow mode');
    expect(run.items.map((i) => i.externalId)).not.toContain('5402');
    for (const text of [shown.stdout, after.stdout]) {
      expect(text).not.toMatch(/^accept\s/m);
      expect(text).not.toContain('waiting (due');
    }
  });

  it('says nothing of acceptance for a conversion refused by a cancellation', async () => {
    // Prepare
    await send('shopify', '--order-id', '5403', '--click-id', CLICK, '--ip', IP);
    await send('shopify', '--order-id', '5403', '--sample', 'cancel');
    // Act
    const shown = await cli('status', '5403', '--source', 'shopify');
    const run = await acceptEverythingDue();
    // Assess
    expect(shown.stdout).toMatch(/state\s+refused\s+refused/);
    expect(run.items.map((i) => i.externalId)).not.toContain('5403');
    expect(shown.stdout).not.toMatch(/^accept\s/m);
  });
});

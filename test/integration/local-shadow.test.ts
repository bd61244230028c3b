import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { sandboxConversions } from '../support/sandbox.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

/**
 * Issue 17 part 1 from the README: `SHADOW_SOURCES=generic npm start` runs the local generic source in
 * shadow mode, so a new user can try the shadow report without writing a sources file.
 */

const START = fileURLToPath(new URL('../../infra/local/start.ts', import.meta.url));
const CLICK = 'a1b2c3d4e5f60718293a4b5c';

let stack: LocalStack;
beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, shadowSources: ['generic'] });
});
afterAll(async () => {
  await stack?.close();
});

describe('the local stack with shadow sources', () => {
  it('runs the named source in shadow mode and the others live', () => {
    expect(stack.sources.get('generic')?.mode).toBe('shadow');
    expect(stack.sources.get('shopify')?.mode).toBe('live');
  });

  it('records a shadow order in the ledger and adds nothing on the platform', async () => {
    const body = JSON.stringify({
      type: 'order',
      orderId: 'shadow-local-1',
      amount: '49.90',
      currency: 'EUR',
      clickIds: [CLICK],
      buyerIp: '203.0.113.9',
    });

    const answer = await post(
      `${stack.url}/webhooks/generic`,
      genericWebhook(body, stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? ''),
    );
    await stack.waitForIdle();

    expect(answer.status).toBe(202);
    const program = stack.sources.get('generic')?.program ?? '';
    expect(await stack.ledger.get(ledgerKey(program, 'shadow-local-1'))).toMatchObject({
      state: 'shadowed',
      currentAmount: 4_990,
    });
    const added = sandboxConversions(stack, 'shadow-local-1');
    expect(added).toEqual([]);
  });

  it('npm start refuses an unknown SHADOW_SOURCES id with exit 2 naming it', () => {
    const run = spawnSync(process.execPath, [START, '--quiet'], {
      env: { ...process.env, SHADOW_SOURCES: 'shopify,magento', PORT: '0', SANDBOX_PORT: '0' },
      encoding: 'utf8',
      timeout: 30_000,
    });

    expect(run.status).toBe(2);
    expect(run.stderr).toContain('SHADOW_SOURCES: unknown source magento');
  });

  it.each(['PROGRAM_ID', 'RULE_ID'])(
    'npm start refuses a %s that is no platform id with exit 2 naming it',
    (name) => {
      const run = spawnSync(process.execPath, [START, '--quiet'], {
        env: { ...process.env, [name]: 'not-an-id', PORT: '0', SANDBOX_PORT: '0' },
        encoding: 'utf8',
        timeout: 30_000,
      });

      expect(run.status).toBe(2);
      expect(run.stderr).toContain(`${name} must be 24 hexadecimal characters`);
      expect(run.stderr).toContain('"not-an-id"');
      expect(run.stderr).not.toContain('"code"');
    },
  );
});

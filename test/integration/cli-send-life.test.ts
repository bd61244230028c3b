import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalStack } from '../../infra/local/stack.ts';
import { emptyDir, localStackForCli, localStateDir, spawnCli } from '../support/cli.ts';
import { sandboxConversions } from '../support/sandbox.ts';

/**
 * The whole life of a conversion from the built-in samples, with `connector` as its own process:
 * order → partial refund → full refund on one order, and a cancellation, on every platform.
 */
const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';

const local = localStackForCli();

async function connector(...argv: string[]) {
  const result = await spawnCli(argv, { cwd: local.dir }).done;
  await local.stack.waitForIdle();
  return result;
}
const conversionOf = (externalId: string) => sandboxConversions(local.stack, externalId);

describe('connector send walks the life of one order', () => {
  it.each([
    ['shopify', '8101', 58_700, 19_567],
    // The 12.90 refund is the gross of line 316 (12.00 + 0.90 tax): 18.00 − 12.00.
    ['woocommerce', '8102', 1_800, 600],
    ['stripe', '8103', 5_990, 3_990],
    ['generic', '8104', 4_990, 3_990],
  ] as const)('%s: order, partial refund, full refund', async (platform, orderId, amount, afterPartial) => {
    // Act and assess, step by step
    const order = await connector('send', platform, '--order-id', orderId, '--click-id', CLICK, '--ip', IP);
    expect(order.code, order.stderr).toBe(0);
    expect(conversionOf(orderId)).toMatchObject([{ amount, status: 'pending' }]);

    const partial = await connector('send', platform, '--order-id', orderId, '--sample', 'partial-refund');
    expect(partial.code, partial.stderr).toBe(0);
    expect(conversionOf(orderId)).toMatchObject([{ amount: afterPartial, status: 'pending' }]);

    const full = await connector('send', platform, '--order-id', orderId, '--sample', 'full-refund');
    expect(full.code, full.stderr).toBe(0);
    expect(conversionOf(orderId)).toMatchObject([{ status: 'refused' }]);
  });

  it.each([
    ['shopify', '8201', ['--sample', 'cancel']],
    ['shopify', '8202', ['--topic', 'orders/cancelled']],
    ['woocommerce', '8203', ['--sample', 'cancel']],
    ['generic', '8204', ['--topic', 'cancel']],
  ] as const)('%s %s: a cancellation refuses the conversion', async (platform, orderId, flags) => {
    // Prepare
    await connector('send', platform, '--order-id', orderId, '--click-id', CLICK, '--ip', IP);
    // Act
    const cancel = await connector('send', platform, '--order-id', orderId, ...flags);
    // Assess
    expect(cancel.code, cancel.stderr).toBe(0);
    expect(conversionOf(orderId)).toMatchObject([{ status: 'refused' }]);
  });

  it.each([
    ['stripe', '8301', ['--topic', 'charge.refunded'], 3_990],
    ['stripe', '8302', ['--topic', 'refund.created'], 4_990],
    ['woocommerce', '8303', ['--topic', 'order.updated'], 600],
    ['generic', '8304', ['--topic', 'refund'], 3_990],
  ] as const)(
    "%s %s: --topic alone picks that topic's refund sample",
    async (platform, orderId, flags, left) => {
      // Prepare
      await connector('send', platform, '--order-id', orderId, '--click-id', CLICK, '--ip', IP);
      // Act
      const refund = await connector('send', platform, '--order-id', orderId, ...flags);
      // Assess
      expect(refund.code, refund.stderr).toBe(0);
      expect(conversionOf(orderId)).toMatchObject([{ amount: left }]);
    },
  );

  it('lists every built-in sample in --help', async () => {
    // Act
    const help = await spawnCli(['send', '--help'], { cwd: local.dir }).done;
    // Assess
    expect(help.code).toBe(0);
    for (const line of [
      /shopify\s+cancel\s+orders\/cancelled/,
      /woocommerce\s+full-refund\s+order\.updated\s+status refunded/,
      /stripe\s+partial-refund\s+refund\.created/,
      /stripe\s+full-refund\s+charge\.refunded/,
      /generic\s+partial-refund\s+-/,
    ]) {
      expect(help.stdout).toMatch(line);
    }
  });
});

describe('every command against a stopped stack', () => {
  let stopped: { dir: string; remove(): void };
  beforeAll(async () => {
    const gone = await startLocalStack({ port: 0, sandbox: { port: 0 } });
    stopped = localStateDir(gone);
    await gone.close();
    writeFileSync(
      join(stopped.dir, 'refunds.csv'),
      'externalId,refundId,amount,currency\n1001,r1,1.00,EUR\n',
    );
  });
  afterAll(() => stopped?.remove());

  it.each([
    [['send', 'generic']],
    [['status', '1001']],
    [['reconcile', '--from', '1d']],
    [['dlq', 'list']],
    [['dlq', 'replay', '--dry-run']],
    [['refund', '--csv', 'refunds.csv']],
    [['doctor']],
  ])('connector %j says which address it tried and how to start the stack', async (argv) => {
    // Act
    const result = await spawnCli(argv, { cwd: stopped.dir }).done;
    // Assess
    expect(result.code).not.toBe(0);
    const output = result.stdout + result.stderr;
    expect(output, output).toMatch(/http:\/\/127\.0\.0\.1:\d+/);
    expect(output).toContain('npm start');
    expect(output).not.toMatch(/^error: .*ECONNREFUSED\s*$/m);
    expect(output).not.toMatch(/\b[A-Z][A-Za-z]+(Error|Exception)\b/);
  });

  it('says how to start a stack when there is none at all', async () => {
    // Prepare
    const none = emptyDir();
    // Act
    const result = await spawnCli(['status', '1001'], { cwd: none.dir }).done;
    none.remove();
    // Assess
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('npm start');
  });
});

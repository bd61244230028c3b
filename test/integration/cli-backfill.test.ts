import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { emptyDir, localStackForCli, runCli } from '../support/cli.ts';
import { sandboxConversions } from '../support/sandbox.ts';

/**
 * `connector backfill` against the local stack: orders placed in the sandbox's shop fakes while no
 * webhook reached the connector are read from the shop's API and converted once; a second backfill
 * changes nothing; orders whose webhook came before are no-ops; refunds are applied once.
 */
const CLICK = '0123456789abcdef01234567';
const local = localStackForCli();

const shops = () => {
  const sandbox = local.stack.sandbox;
  if (!sandbox) throw new Error('the local stack runs the sandbox in process');
  return sandbox.shops.control;
};
const conversionsOf = (externalId: string) => sandboxConversions(local.stack, externalId);
const allConversions = () =>
  (local.stack.sandbox?.control.conversions() ?? []).map((c) => ({
    externalId: c.externalId,
    amount: c.amount,
    status: c.status,
  }));

async function connector(...argv: string[]) {
  const result = await runCli(argv, { cwd: local.dir });
  await local.stack.waitForIdle();
  return result;
}

const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000).toISOString();

beforeEach(() => {
  shops().reset();
});

describe('connector backfill', () => {
  it('Shopify: converts every order placed while ingest was off once, applies its refund once, and a second run changes nothing', async () => {
    // Arrange: three orders in the shop, one refunded, no webhook sent
    const orders = [0, 1, 2].map(
      () => shops().createOrder('shopify', { clickId: CLICK, at: minutesAgo(30) }).orderId,
    );
    shops().createRefund('shopify', orders[0]!, { at: minutesAgo(10) });

    // Act
    const first = await connector('backfill', '--source', 'shopify', '--from', '1h');
    const after = allConversions();
    const second = await connector('backfill', '--source', 'shopify', '--from', '1h');

    // Assert
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/found\s+4/);
    expect(first.stdout).toMatch(/queued\s+4/);
    expect(conversionsOf(orders[0]!)).toMatchObject([{ amount: 58_700 - 19_567, status: 'pending' }]);
    expect(conversionsOf(orders[1]!)).toMatchObject([{ amount: 58_700 }]);
    expect(conversionsOf(orders[2]!)).toMatchObject([{ amount: 58_700 }]);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stdout).toMatch(/already applied\s+4/);
    expect(second.stdout).toMatch(/queued\s+0/);
    expect(allConversions()).toEqual(after);
  });

  it('Shopify: an order whose webhook was delivered before is a no-op', async () => {
    // Arrange: the shop has the order, and its webhook reached the connector
    const { orderId } = shops().createOrder('shopify', { clickId: CLICK, at: minutesAgo(20) });
    const sent = await connector('send', 'shopify', '--order-id', orderId, '--click-id', CLICK);
    expect(sent.code, sent.stderr).toBe(0);

    // Act
    const backfilled = await connector('backfill', '--source', 'shopify', '--from', '1h');

    // Assert
    expect(backfilled.code, backfilled.stderr).toBe(0);
    expect(backfilled.stdout).toMatch(/already applied\s+1/);
    expect(conversionsOf(orderId)).toHaveLength(1);
  });

  it('WooCommerce: orders modified in the period and their refunds, once', async () => {
    const placed = shops().createOrder('woocommerce', { clickId: CLICK, at: minutesAgo(40) }).orderId;
    const refunded = shops().createOrder('woocommerce', { clickId: CLICK, at: minutesAgo(40) }).orderId;
    shops().createRefund('woocommerce', refunded, { at: minutesAgo(5) });

    const first = await connector('backfill', '--source', 'woocommerce', '--from', '1h');
    const second = await connector('backfill', '--source', 'woocommerce', '--from', '1h');

    expect(first.code, first.stderr).toBe(0);
    expect(conversionsOf(placed)).toMatchObject([{ amount: 1_800 }]);
    // The fake's refund pays back 10.00 gross and names no lines: the worker nets it at the order's
    // own net/gross ratio (18.00 net of 19.35 gross: 9.30), docs/refund-amounts.md.
    expect(conversionsOf(refunded)).toMatchObject([{ amount: 870 }]);
    expect(second.stdout).toMatch(/queued\s+0/);
    expect(conversionsOf(refunded)).toMatchObject([{ amount: 870 }]);
  });

  it('Stripe: the events of the period, a refund applied once, and a range older than 30 days is said', async () => {
    const { orderId } = shops().createOrder('stripe', { clickId: CLICK, at: minutesAgo(50) });
    shops().createRefund('stripe', orderId, { at: minutesAgo(5) });

    const first = await connector('backfill', '--source', 'stripe', '--from', '40d');
    const second = await connector('backfill', '--source', 'stripe', '--from', '40d');

    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toContain('Stripe keeps events 30 days');
    expect(conversionsOf(orderId)).toMatchObject([{ status: 'refused' }]);
    expect(second.stdout).toMatch(/already applied\s+2/);
  });

  it('--dry-run reads and tells, and queues nothing', async () => {
    const { orderId } = shops().createOrder('shopify', { clickId: CLICK, at: minutesAgo(15) });

    const dry = await connector('backfill', '--source', 'shopify', '--from', '1h', '--dry-run');

    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/to queue\s+1/);
    expect(conversionsOf(orderId)).toEqual([]);
  });

  it('--from without a unit (2, meant 2d) is refused before the shop is read, naming --from', async () => {
    shops().createOrder('shopify', { clickId: CLICK, at: minutesAgo(15) });
    const before = shops().calls().shopify;

    const bare = await connector('backfill', '--source', 'shopify', '--from', '2', '--dry-run');
    const bareTo = await connector(
      'backfill',
      '--source',
      'shopify',
      '--from',
      '2d',
      '--to',
      '1',
      '--dry-run',
    );

    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain('--from: "2" is neither a date');
    expect(bare.stderr).toContain('as in 2d');
    expect(bareTo.code).toBe(2);
    expect(bareTo.stderr).toContain('--to: "1" is neither a date');
    expect(bare.stdout + bareTo.stdout).toBe('');
    expect(shops().calls().shopify).toBe(before);
  });

  it('Generic: a file of webhook bodies, once', async () => {
    const file = join(local.dir, 'orders.jsonl');
    const order = {
      type: 'order',
      eventId: 'bf-1',
      orderId: 'BF-1001',
      amount: '49.90',
      currency: 'EUR',
      clickIds: [CLICK],
      buyerIp: '203.0.113.7',
    };
    const refund = {
      type: 'refund',
      eventId: 'bf-2',
      orderId: 'BF-1001',
      refundId: 'r1',
      amount: '10.00',
      currency: 'EUR',
    };
    writeFileSync(file, `${JSON.stringify(order)}\n\n${JSON.stringify(refund)}\n`);

    const first = await connector('backfill', '--source', 'generic', '--file', file);
    const second = await connector('backfill', '--source', 'generic', '--file', file);

    expect(first.code, first.stderr).toBe(0);
    expect(conversionsOf('BF-1001')).toMatchObject([{ amount: 3_990 }]);
    expect(second.stdout).toMatch(/already applied\s+2/);
  });

  it('names what is wrong: an unknown source, a generic source without --file, a source without shopApi', async () => {
    const unknown = await connector('backfill', '--source', 'nope', '--from', '1h');
    const generic = await connector('backfill', '--source', 'generic', '--from', '1h');

    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('--source: unknown source "nope"');
    expect(generic.code).toBe(2);
    expect(generic.stderr).toContain('--file');
  });

  it('does not send a credential from the environment to a shop URL read from .local-stack.json', async () => {
    const result = await runCli(['backfill', '--source', 'shopify', '--from', '1h'], {
      cwd: local.dir,
      env: { SHOPIFY_API_CREDENTIALS: '{"accessToken":"shpat_real_shop"}' },
    });

    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      'SHOPIFY_API_CREDENTIALS from the environment is not sent to a shop URL read from',
    );
  });

  it('a key the shop refuses is a setting to fix (exit 2), named without its value; --json prints the summary', async () => {
    const sources = [...local.stack.sources.values()].map((s) =>
      s.id === 'woocommerce' ? { ...s, shopApi: { ...s.shopApi!, credentialsRef: 'WOO_KEY' } } : s,
    );
    const env = {
      SOURCES: JSON.stringify(sources),
      WOO_KEY: '{"consumerKey":"ck_revoked","consumerSecret":"cs_revoked"}',
    };
    shops().createOrder('woocommerce', { clickId: CLICK, at: minutesAgo(5) });

    const refused = await runCli(['backfill', '--source', 'woocommerce', '--from', '1h'], {
      cwd: local.dir,
      env,
    });
    const json = await connector(
      'backfill',
      '--source',
      'woocommerce',
      '--from',
      '1h',
      '--dry-run',
      '--json',
    );

    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      'WooCommerce API refused the credentials (401 on GET /woocommerce/wp-json/wc/v3/orders): check the key and its scopes',
    );
    expect(refused.stderr).not.toContain('cs_revoked');
    expect(JSON.parse(json.stdout)).toMatchObject({
      source: 'woocommerce',
      dryRun: true,
      found: 1,
      queued: 1,
    });
  });

  it('a missing setting is named (exit 2), not reported as a failed run', async () => {
    const dir = emptyDir();
    try {
      const env = {
        SOURCES: JSON.stringify([...local.stack.sources.values()]),
        SHOPIFY_API_CREDENTIALS: local.stack.secrets['SHOPIFY_API_CREDENTIALS'] ?? '',
      };

      const result = await runCli(['backfill', '--source', 'shopify', '--from', '1h'], { cwd: dir.dir, env });

      expect(result.code).toBe(2);
      expect(result.stderr).toContain('missing the main queue URL: pass --queue-url or set QUEUE_URL');
    } finally {
      dir.remove();
    }
  });
});

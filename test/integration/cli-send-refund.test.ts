import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ledgerKey } from '../../shared/ledger.ts';
import { emptyDir, localStackForCli, runCli, spawnCli } from '../support/cli.ts';
import { sandboxConversions } from '../support/sandbox.ts';

const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';
const SAMPLE_CSV = join(import.meta.dirname, '..', 'fixtures', 'refunds.sample.csv');

const local = localStackForCli();

const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });
const conversionsOf = (externalId: string) => sandboxConversions(local.stack, externalId);
const program = () => [...local.stack.sources.values()][0]?.program ?? '';

async function placeOrder(platform: string, orderId: string): Promise<void> {
  const sent = await cli('send', platform, '--order-id', orderId, '--click-id', CLICK, '--ip', IP);
  expect(sent.code, sent.stderr).toBe(0);
  await local.stack.waitForIdle();
}

describe('connector send', () => {
  it.each([
    ['shopify', '7001', 58_700, 'USD'],
    ['woocommerce', '7002', 1_800, 'USD'],
    ['stripe', '7003', 5_990, 'EUR'],
    ['generic', '7004', 4_990, 'EUR'],
  ])(
    'signs the %s sample like the platform and the order becomes a conversion',
    async (platform, orderId, amount, currency) => {
      // Act
      const sent = await cli('send', platform, '--order-id', orderId, '--click-id', CLICK, '--ip', IP);
      await local.stack.waitForIdle();
      // Assess
      expect(sent.code, sent.stderr).toBe(0);
      expect(sent.stdout).toMatch(/^HTTP 202\n/);
      expect(JSON.parse(sent.stdout.slice('HTTP 202\n'.length))).toMatchObject({ status: 'queued' });
      const [conversion, ...more] = conversionsOf(orderId);
      expect(more).toHaveLength(0);
      expect(conversion).toMatchObject({ kind: 'tracking', amount, currency, cids: [CLICK], ip: IP });
    },
  );

  it('sends a manual-mode conversion with an affiliate tracking id', async () => {
    const trackingId = local.stack.sandbox?.seed.trackingIds[0] ?? 0;

    const sent = await cli('send', 'generic', '--order-id', '7010', '--tracking-id', String(trackingId));
    await local.stack.waitForIdle();

    expect(sent.code, sent.stderr).toBe(0);
    expect(conversionsOf('7010')).toMatchObject([{ kind: 'manual', affiliateTrackingId: trackingId }]);
  });

  it('sends the Shopify refund sample for an order given by --order-id', async () => {
    // Prepare
    await placeOrder('shopify', '7020');
    // Act
    const sent = await cli('send', 'shopify', '--topic', 'refunds/create', '--order-id', '7020');
    await local.stack.waitForIdle();
    // Assess
    expect(sent.code, sent.stderr).toBe(0);
    // 587.00 minus the two refunded lines excluding tax (195.66 + 195.67).
    expect(conversionsOf('7020')[0]?.amountHistory.map((h) => h.amount)).toEqual([19_567]);
  });

  it('signs a body of your own from --file, byte for byte', async () => {
    // Prepare
    const file = join(local.dir, 'own-order.json');
    writeFileSync(
      file,
      `{"type":"order","eventId":"own-1","orderId":"7030","amount":"10.00","currency":"EUR","clickIds":["${CLICK}"],"buyerIp":"${IP}"}`,
    );
    // Act
    const sent = await cli('send', 'generic', '--file', file);
    await local.stack.waitForIdle();
    // Assess
    expect(sent.code, sent.stderr).toBe(0);
    expect(conversionsOf('7030')).toMatchObject([{ amount: 1000 }]);
  });

  it('exits 1 with the 401 answer when the secret is wrong', async () => {
    // Act
    const sent = await cli('send', 'shopify', '--order-id', '7040', '--secret', 'not-the-secret');
    // Assess
    expect(sent.code).toBe(1);
    expect(sent.stdout).toMatch(/^HTTP 401\n/);
    expect(conversionsOf('7040')).toHaveLength(0);
  });

  it('exits 2 naming the flag when a value is wrong, before sending', async () => {
    // Act
    const sent = await cli('send', 'shopify', '--click-id', 'not-hex');
    // Assess
    expect(sent.code).toBe(2);
    expect(sent.stderr).toContain('--click-id: must be 24 hexadecimal characters');
    expect(sent.stdout).toBe('');
  });

  it('exits 2 naming the flag and the variable when the connector URL is not configured', async () => {
    // Act
    const nowhere = emptyDir();
    try {
      const sent = await runCli(['send', 'shopify'], { cwd: nowhere.dir });
      // Assess
      expect(sent.code).toBe(2);
      expect(sent.stderr).toMatch(/^error: missing the connector URL: pass --url or set CONNECTOR_URL/);
      expect(sent.stderr).not.toMatch(/\n\s+at /);
    } finally {
      nowhere.remove();
    }
  });

  it('runs as a program: exit code 2 and one line naming the setting, no stack trace', async () => {
    // Prepare
    const nowhere = emptyDir();
    try {
      // Act
      const result = await spawnCli(['dlq', 'list'], {
        cwd: nowhere.dir,
        env: { PATH: process.env['PATH'] ?? '' },
      }).done;
      // Assess
      expect(result.code).toBe(2);
      expect(result.stderr).toBe(
        'error: missing the dead-letter queue URL: pass --dlq-url or set DLQ_URL (locally, `npm start` writes it to .local-stack.json)\n',
      );
    } finally {
      nowhere.remove();
    }
  });

  it('signs with the documented local default when the connector on this machine has no secret configured', async () => {
    // Prepare
    const nowhere = emptyDir();
    try {
      // Act
      const sent = await runCli(
        ['send', 'generic', '--url', local.stack.url, '--order-id', '7050', '--click-id', CLICK, '--ip', IP],
        { cwd: nowhere.dir },
      );
      await local.stack.waitForIdle();
      // Assess
      expect(sent.code, sent.stderr).toBe(0);
      expect(sent.stderr).toContain(
        'signing with the local default GENERIC_WEBHOOK_SECRET=local-generic-secret',
      );
      expect(conversionsOf('7050')).toHaveLength(1);
    } finally {
      nowhere.remove();
    }
  });

  it('prefers the environment over .local-stack.json', async () => {
    // Act
    const sent = await runCli(['send', 'shopify'], {
      cwd: local.dir,
      env: { CONNECTOR_URL: 'http://127.0.0.1:9' },
    });
    // Assess
    expect(sent.code).toBe(1);
    expect(sent.stderr).toContain('could not reach http://127.0.0.1:9/webhooks/shopify');
  });
});

describe('connector refund', () => {
  it('queues one refund from flags, which the worker applies', async () => {
    // Prepare
    await placeOrder('shopify', '7101');
    // Act
    const refunded = await cli('refund', '--external-id', '7101', '--refund-id', 'RF-1', '--amount', '87.00');
    await local.stack.waitForIdle();
    // Assess
    expect(refunded.code, refunded.stderr).toBe(0);
    expect(refunded.stdout).toMatch(/order 7101 {2}refund RF-1 {2}→ 202 queued {2}message \S+/);
    expect(conversionsOf('7101')[0]?.amount).toBe(50_000);
  });

  it('sends the sample CSV: every row queued, and each order refunded', async () => {
    // Prepare
    await placeOrder('shopify', '1001');
    await placeOrder('woocommerce', '1002');
    await placeOrder('generic', '1003');
    // Act
    const refunded = await cli('refund', '--csv', SAMPLE_CSV);
    await local.stack.waitForIdle();
    // Assess
    expect(refunded.code, refunded.stdout + refunded.stderr).toBe(0);
    expect(refunded.stdout).toContain('[3/3] line 4  order 1003');
    expect(refunded.stdout).toContain('3 refunds: 3 queued, 0 failed');
    expect(conversionsOf('1001')[0]?.amount).toBe(57_700);
    expect(conversionsOf('1002')[0]?.status).toBe('refused');
    expect(conversionsOf('1003')[0]?.amount).toBe(4_490);
  });

  it('validates a CSV whole: with one bad row, every problem is listed and nothing is sent', async () => {
    // Prepare
    await placeOrder('shopify', '7201');
    const csv = join(local.dir, 'refunds-bad.csv');
    writeFileSync(
      csv,
      [
        'externalId,refundId,amount,full,reason,source,currency',
        '7201,RF-A,10.00,,first,,USD',
        '7201,RF-B,"1,000.00",,thousands separator,,USD',
        '7201,RF-C,,maybe,,,',
        '7201,RF-D,5.00,,fine,,',
      ].join('\n'),
    );
    const before = await local.stack.ledger.get(ledgerKey(program(), '7201'));
    // Act
    const refunded = await cli('refund', '--csv', csv);
    await local.stack.waitForIdle();
    // Assess
    expect(refunded.code).toBe(2);
    expect(refunded.stderr).toContain('line 3: amount: "1,000.00" is not a decimal amount');
    expect(refunded.stderr).toContain('line 4: full: "maybe" is not true or false');
    expect(refunded.stderr).toContain('error: 2 problems; ');
    expect(refunded.stdout).toBe('');
    const after = await local.stack.ledger.get(ledgerKey(program(), '7201'));
    expect(after?.refunds).toEqual(before?.refunds);
    expect(conversionsOf('7201')[0]?.amountHistory).toEqual([]);
  });

  it('--dry-run validates and prints what would be sent, and sends nothing', async () => {
    // Prepare
    await placeOrder('shopify', '7301');
    const csv = join(local.dir, 'refunds-dry.csv');
    writeFileSync(csv, 'externalId,refundId,amount,full\n7301,RF-DRY,10.00,false\n');
    // Act
    const refunded = await cli('refund', '--csv', csv, '--dry-run');
    await local.stack.waitForIdle();
    // Assess
    expect(refunded.code).toBe(0);
    expect(refunded.stdout).toContain(
      'line 2  would POST /refunds {"externalId":"7301","refundId":"RF-DRY","amount":"10.00"}',
    );
    expect(refunded.stdout).toContain('dry run: 1 refund valid, nothing sent');
    const record = await local.stack.ledger.get(ledgerKey(program(), '7301'));
    expect(record?.refunds).toEqual({});
  });

  it('reports each failed row, and exits 1', async () => {
    // Prepare
    const csv = join(local.dir, 'refunds-unknown.csv');
    writeFileSync(csv, 'externalId,refundId,amount,source\n7401,RF-X,10.00,no-such-source\n');
    // Act
    const refunded = await cli('refund', '--csv', csv);
    // Assess
    expect(refunded.code).toBe(1);
    expect(refunded.stdout).toContain('→ 400 source: unknown source "no-such-source"');
    expect(refunded.stdout).toContain('1 refund: 0 queued, 1 failed');
  });

  it('stops at the first row when the API key is refused', async () => {
    // Act
    const refunded = await runCli(['refund', '--csv', SAMPLE_CSV, '--api-key', 'wrong-key'], {
      cwd: local.dir,
    });
    // Assess
    expect(refunded.code).toBe(1);
    expect(refunded.stdout).toContain('→ 401');
    expect(refunded.stdout).toContain('3 refunds: 0 queued, 1 failed, 2 not sent');
    expect(refunded.stderr).toContain('stopped: the connector refused the API key');
  });

  it('follows no redirect: the API key never reaches where it points, and the run stops naming it', async () => {
    // Prepare: the connector URL answers 307 (which keeps the POST and its headers) to another host
    const seen: string[] = [];
    const elsewhere = createServer((request, response) => {
      seen.push(String(request.headers['x-api-key']));
      response.writeHead(202, { 'content-type': 'application/json' }).end('{"status":"queued"}');
    });
    const redirector = createServer((_request, response) => {
      const { port } = elsewhere.address() as AddressInfo;
      response.writeHead(307, { location: `http://127.0.0.1:${port}/refunds?k=1` }).end();
    });
    for (const server of [elsewhere, redirector]) {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    }
    const url = `http://127.0.0.1:${(redirector.address() as AddressInfo).port}`;
    try {
      // Act
      const refunded = await runCli(
        ['refund', '--csv', SAMPLE_CSV, '--url', url, '--api-key', 'finance-key-do-not-leak'],
        { cwd: local.dir },
      );

      // Assess
      expect(seen).toEqual([]);
      expect(refunded.code).toBe(1);
      expect(refunded.stdout).toContain('3 refunds: 0 queued, 1 failed, 2 not sent');
      expect(refunded.stderr).toContain(
        `stopped: the connector URL answered 307, a redirect to http://127.0.0.1:${(elsewhere.address() as AddressInfo).port}/refunds: set CONNECTOR_URL (or --url) to where the connector is`,
      );
      expect(refunded.stderr + refunded.stdout).not.toContain('finance-key-do-not-leak');
    } finally {
      for (const server of [elsewhere, redirector]) await new Promise((resolve) => server.close(resolve));
    }
  });

  it('exits 2 when flags give both an amount and --full', async () => {
    // Act
    const refunded = await cli(
      'refund',
      '--external-id',
      '7501',
      '--refund-id',
      'R',
      '--amount',
      '1.00',
      '--full',
    );
    // Assess
    expect(refunded.code).toBe(2);
    expect(refunded.stderr).toContain('--amount: give an amount');
  });

  it('keeps the sample CSV in the documented format', () => {
    // Act
    const header = readFileSync(SAMPLE_CSV, 'utf8').split('\n')[0];
    // Assess
    expect(header).toBe('externalId,refundId,amount,full,reason,source,currency');
  });
});

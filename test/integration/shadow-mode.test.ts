import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { DEFAULT_SEED } from '../../sandbox/ids.ts';
import { CurrentApiBackend } from '../../shared/affiliate/backend.ts';
import { AffiliateClient } from '../../shared/affiliate/client.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { ConnectorEvent } from '../../shared/domain/events.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { localStateDir, runCli } from '../support/cli.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

const PROGRAM = DEFAULT_SEED.programs[0] ?? '';
const RULE = DEFAULT_SEED.rules[0] ?? '';
const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const IP = '198.51.100.4';
const SHADOW = {
  id: 'pilot',
  platform: 'generic' as const,
  program: PROGRAM,
  rule: RULE,
  secretRef: 'GENERIC_WEBHOOK_SECRET',
  mode: 'shadow' as const,
};

let stack: LocalStack;
let state: { dir: string; remove(): void };
const startedAt = new Date(Date.now() - 60_000).toISOString();

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, sources: [SHADOW] });
  state = localStateDir(stack);
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const control = () => {
  if (!stack.sandbox) throw new Error('the local stack runs the sandbox');
  return stack.sandbox.control;
};
const conversionsOf = (externalId: string) =>
  control()
    .conversions()
    .filter((c) => c.externalId === externalId);
const platformWrites = () =>
  Object.entries(control().calls())
    .filter(([path]) => /conversions\.(add|update|refuse|accept)$/.test(path))
    .reduce((sum, [, count]) => sum + count.total, 0);

async function send(body: Record<string, unknown>): Promise<void> {
  const signed = genericWebhook(
    JSON.stringify({ eventId: randomUUID(), ...body }),
    stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '',
  );
  expect((await post(`${stack.url}/webhooks/${SHADOW.id}`, signed)).status).toBe(202);
}
const order = (orderId: string, amount: string, attributed = true) =>
  send({
    type: 'order',
    orderId,
    amount,
    currency: 'EUR',
    ...(attributed ? { clickIds: [CLICK], buyerIp: IP } : {}),
  });

describe('a source in shadow mode', () => {
  it('records in the ledger what it would have sent, and changes nothing on the platform', async () => {
    // Prepare: the platform's browser pixel recorded three orders of the shop.
    control().seedConversion({ program: PROGRAM, externalId: '7001', amount: 4_990 });
    control().seedConversion({ program: PROGRAM, externalId: '7002', amount: 5_990 });
    control().seedConversion({ program: PROGRAM, externalId: '7004', amount: 2_500 });
    // Act: the shop's webhooks reach the connector for three of them, and a refund for one.
    await order('7001', '49.90');
    await order('7002', '49.90');
    await order('7003', '120.00');
    await order('7005', '10.00', false);
    await stack.waitForIdle();
    await send({ type: 'refund', orderId: '7001', refundId: 'r-7001', amount: '10.00', currency: 'EUR' });
    await stack.waitForIdle();
    // Assess
    expect(platformWrites()).toBe(0);
    expect(
      control()
        .conversions()
        .map((c) => [c.externalId, c.amount]),
    ).toEqual([
      ['7001', 4_990],
      ['7002', 5_990],
      ['7004', 2_500],
    ]);
    const only = await stack.ledger.get(ledgerKey(PROGRAM, '7003'));
    expect(only).toMatchObject({ state: 'shadowed', shadow: true, currentAmount: 12_000, currency: 'EUR' });
    expect(only?.conversionId).toBeUndefined();
    const refunded = await stack.ledger.get(ledgerKey(PROGRAM, '7001'));
    expect(refunded).toMatchObject({ state: 'shadowed', shadow: true, originalAmount: 4_990 });
    expect(refunded?.refunds['r-7001']).toMatchObject({ status: 'pending', amount: 1_000 });
    expect(await stack.ledger.get(ledgerKey(PROGRAM, '7005'))).toMatchObject({
      state: 'skipped',
      shadow: true,
    });
  });

  it('shadow-report compares the pixel’s conversions with the shadow ledger by externalId', async () => {
    // Act
    const json = await runCli(['shadow-report', '--from', startedAt, '--json'], { cwd: state.dir });
    const text = await runCli(['shadow-report', '--from', startedAt], { cwd: state.dir });
    const csv = await runCli(['shadow-report', '--from', startedAt, '--csv'], { cwd: state.dir });
    const status = await runCli(['status', '7002'], { cwd: state.dir });
    // Assess
    expect(json.code, json.stderr).toBe(0);
    const report = JSON.parse(json.stdout) as {
      rows: { kind: string; externalId: string; difference?: number }[];
      totals: {
        kind: string;
        currency: string;
        count: number;
        connectorAmount: number;
        pixelAmount: number;
      }[];
      atStake: Record<string, number>;
    };
    expect(report.rows.map((r) => [r.kind, r.externalId, r.difference])).toEqual([
      ['only_connector', '7003', 12_000],
      ['amount_differs', '7002', -1_000],
      ['only_pixel', '7004', -2_500],
      ['same', '7001', 0],
    ]);
    expect(report.totals).toEqual([
      { kind: 'only_connector', currency: 'EUR', count: 1, connectorAmount: 12_000, pixelAmount: 0 },
      { kind: 'amount_differs', currency: 'EUR', count: 1, connectorAmount: 4_990, pixelAmount: 5_990 },
      { kind: 'only_pixel', currency: 'EUR', count: 1, connectorAmount: 0, pixelAmount: 2_500 },
      { kind: 'same', currency: 'EUR', count: 1, connectorAmount: 4_990, pixelAmount: 4_990 },
    ]);
    // The orders the pixel missed, and what the pixel's amounts are off by (one way or the other).
    expect(report.atStake).toEqual({ EUR: 12_000 + 1_000 + 2_500 });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/only_connector\s+7003\s+-\s+EUR 120\.00/);
    expect(text.stdout).toMatch(/amount_differs\s+7002\s+EUR 59\.90\s+EUR 49\.90\s+EUR -10\.00/);
    expect(text.stdout).toContain('only the connector saw 1 order (EUR 120.00)');
    expect(text.stdout).toContain('money at stake: EUR 155.00');
    expect(csv.stdout.split('\n')[0]).toBe(
      'kind,program,externalId,pixelConversionId,pixelStatus,pixelAmount,connectorAmount,difference,currency,detail',
    );
    expect(status.code, status.stdout).toBe(0);
    expect(status.stdout).toContain('recorded in shadow mode: nothing was sent to the platform');
    expect(csv.stdout).toMatch(/\nonly_connector,5ad000000000000000000101,7003,,,,120\.00,120\.00,EUR,/);
  });

  it('adds nothing for an order the pixel recorded once the source is live (replayed, or first seen then), and adds what it missed once', async () => {
    // Prepare: the same source, switched to live; the shadow period's orders are replayed.
    const live = SourceConfig.parse({ ...SHADOW, mode: 'live', lookupBeforeAdd: true });
    const deps = {
      ledger: stack.ledger,
      sources: new Map([[live.id, live]]),
      backendFor: () =>
        new CurrentApiBackend(
          new AffiliateClient({ baseUrl: stack.platformUrl, token: stack.sandbox?.token ?? '' }),
        ),
      now: Date.now,
      workerId: 'switch-test',
      leaseMs: 60_000,
    };
    const replay = (externalId: string, amount: number) =>
      processEvent(
        deps,
        ConnectorEvent.parse({
          type: 'OrderPlaced',
          eventId: randomUUID(),
          source: live.id,
          platform: 'generic',
          externalId,
          receivedAt: new Date().toISOString(),
          amount,
          currency: 'EUR',
          clickIds: [CLICK],
          buyerIp: IP,
        }),
      );
    const pixel7001 = conversionsOf('7001')[0]?.id;
    // Act
    const recorded = await replay('7001', 4_990);
    const missed = await replay('7003', 12_000);
    const again = await replay('7003', 12_000);
    // The pixel's order 7004 reaches the connector only now (a shop's retry), and a new order 7006.
    const late = await replay('7004', 2_500);
    const fresh = await replay('7006', 3_000);
    // Assess
    expect(recorded).toMatchObject({ result: 'refund_applied', conversionId: pixel7001 });
    expect(conversionsOf('7001')).toHaveLength(1);
    // The refund recorded in shadow mode is applied to the conversion the pixel recorded.
    expect(conversionsOf('7001')[0]?.amount).toBe(3_990);
    expect(missed).toMatchObject({ result: 'added' });
    expect(again).toMatchObject({ result: 'duplicate' });
    expect(conversionsOf('7003').map((c) => c.amount)).toEqual([12_000]);
    expect(late).toMatchObject({ result: 'reconciled', conversionId: conversionsOf('7004')[0]?.id });
    expect(conversionsOf('7004')).toHaveLength(1);
    expect(fresh).toMatchObject({ result: 'added' });
    expect(conversionsOf('7006').map((c) => c.amount)).toEqual([3_000]);
    const adopted = await stack.ledger.get(ledgerKey(PROGRAM, '7001'));
    expect(adopted).toMatchObject({ state: 'added', conversionId: pixel7001, currentAmount: 3_990 });
    expect(adopted?.shadow).toBeUndefined();
  });
});

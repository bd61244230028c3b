import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { peekQueue } from '../support/sqs-records.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

const CLICK = 'a1b2c3d4e5f60718293a4b5c';
let stack: LocalStack;

beforeAll(async () => {
  // Three shops on one program: a and b share order ids, c prefixes its own.
  const probe = await startLocalStack({ port: 0, sandbox: { port: 0 }, autoPoll: false });
  const { program, rule } = probe.sources.get('generic') ?? { program: '', rule: '' };
  await probe.close();
  const shop = (id: string, extra: Record<string, unknown> = {}) => ({
    id,
    platform: 'generic' as const,
    program,
    rule,
    secretRef: 'GENERIC_WEBHOOK_SECRET',
    ...extra,
  });
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    visibilityBaseSeconds: 1,
    sources: [shop('shop-a'), shop('shop-b'), shop('shop-c', { externalIdPrefix: 'c-' })],
  });
});
afterAll(async () => {
  await stack?.close();
});

async function send(source: string, body: Record<string, unknown>): Promise<void> {
  const signed = genericWebhook(
    JSON.stringify({ eventId: randomUUID(), ...body }),
    stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '',
  );
  expect((await post(`${stack.url}/webhooks/${source}`, signed)).status).toBe(202);
  await stack.waitForIdle();
}
const order = (source: string, orderId: string, amount: string) =>
  send(source, {
    type: 'order',
    orderId,
    amount,
    currency: 'EUR',
    clickIds: [CLICK],
    buyerIp: '198.51.100.4',
  });
const amounts = (externalId: string) =>
  (stack.sandbox?.control.conversions() ?? [])
    .filter((c) => c.externalId === externalId)
    .map((c) => c.amount);

describe('sources of one program keep their orders apart', () => {
  it('parks the second of two orders with the same id from two sources, saying to set a prefix', async () => {
    await order('shop-a', '1001', '30.00');
    await order('shop-b', '1001', '70.00');

    expect(amounts('1001')).toEqual([3_000]);
    const parked = await peekQueue(stack.emulators.sqs, stack.emulators.dlqUrl);
    const reasons = parked.map((m) => m.attributes['reason']);
    expect(reasons).toEqual([expect.stringMatching(/source "shop-b".*source "shop-a".*"externalIdPrefix"/)]);
  });

  it('converts both orders when one source has an externalIdPrefix, and refunds each through its own source', async () => {
    await order('shop-a', '2002', '30.00');
    await order('shop-c', '2002', '70.00');
    await send('shop-c', {
      type: 'refund',
      orderId: '2002',
      refundId: 'r1',
      amount: '10.00',
      currency: 'EUR',
    });

    expect(amounts('2002')).toEqual([3_000]);
    expect(amounts('c-2002')).toEqual([6_000]);
  });

  it('rejects a prefix that is not a plain token, naming the setting', () => {
    const result = SourceConfig.safeParse({
      id: 'x',
      platform: 'generic',
      program: 'a'.repeat(24),
      rule: 'b'.repeat(24),
      secretRef: 'S',
      externalIdPrefix: 'shop a/',
    });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path).toEqual(['externalIdPrefix']);
  });
});

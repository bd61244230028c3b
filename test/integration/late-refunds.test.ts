import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ledgerKey } from '../../shared/ledger.ts';
import { localStackForCli, runCli } from '../support/cli.ts';
import { peekQueue } from '../support/sqs-records.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const fixture = localStackForCli();

const control = () => {
  const sandbox = fixture.stack.sandbox;
  if (!sandbox) throw new Error('the local stack runs the sandbox');
  return sandbox.control;
};
const conversion = (externalId: string) => {
  const found = control()
    .conversions()
    .filter((c) => c.externalId === externalId);
  expect(found).toHaveLength(1);
  return found[0]!;
};
const calls = (route: string) => control().calls()[`/advertiser/${route}`]?.total ?? 0;

async function send(body: Record<string, unknown>): Promise<void> {
  const signed = genericWebhook(
    JSON.stringify({ eventId: randomUUID(), ...body }),
    fixture.stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '',
  );
  expect((await post(`${fixture.stack.url}/webhooks/generic`, signed)).status).toBe(202);
  await fixture.stack.waitForIdle();
}
const order = (orderId: string, amount: string) =>
  send({ type: 'order', orderId, amount, currency: 'EUR', clickIds: [CLICK], buyerIp: '198.51.100.4' });
const refund = (orderId: string, refundId: string, extra: Record<string, unknown>) =>
  send({ type: 'refund', orderId, refundId, ...extra });

async function parked(externalId: string): Promise<unknown[]> {
  const messages = await peekQueue(fixture.stack.emulators.sqs, fixture.stack.emulators.dlqUrl);
  return messages.filter((m) => m.body['externalId'] === externalId);
}
const refundIn = async (externalId: string, refundId: string) => {
  const record = await fixture.stack.ledger.get(ledgerKey(conversion(externalId).program, externalId));
  return record?.refunds[refundId];
};

describe('a refund after the platform locked the conversion', () => {
  it('is recorded as a late refund in the ledger: tried once, not retried, not parked in the DLQ', async () => {
    // Prepare: a 200.00 order, accepted and locked (the sandbox's commission is 10 %: 20.00).
    await order('8101', '200.00');
    control().lock(conversion('8101').id);
    const updatesBefore = calls('conversions.update');
    // Act
    await refund('8101', 'r-8101', { amount: '50.00', currency: 'EUR' });
    // Assess
    expect(calls('conversions.update') - updatesBefore).toBe(1);
    expect(await parked('8101')).toEqual([]);
    expect(conversion('8101')).toMatchObject({ amount: 20_000, status: 'accepted', isLocked: true });
    expect(await refundIn('8101', 'r-8101')).toMatchObject({
      status: 'late',
      amount: 5_000,
      late: { because: 'locked', conversionAmount: 20_000, commission: 2_000 },
    });
  });

  it('records a full refund of a locked conversion as late too, and leaves the conversion as it is', async () => {
    // Prepare
    await order('8102', '80.00');
    control().lock(conversion('8102').id);
    const refusalsBefore = calls('conversions.refuse');
    // Act
    await refund('8102', 'r-8102', { full: true, reason: 'returned' });
    // Assess
    expect(calls('conversions.refuse') - refusalsBefore).toBe(1);
    expect(await parked('8102')).toEqual([]);
    expect(conversion('8102').status).toBe('accepted');
    expect(await refundIn('8102', 'r-8102')).toMatchObject({
      status: 'late',
      full: true,
      late: { because: 'locked', conversionAmount: 8_000, commission: 800 },
    });
  });

  it('records a partial refund of an accepted conversion as late (its amount can no longer change), and refuses one refunded in full', async () => {
    // Prepare: accepted, not locked yet.
    await order('8103', '33.33');
    await order('8104', '40.00');
    control().accept(conversion('8103').id);
    control().accept(conversion('8104').id);
    // Act
    await refund('8103', 'r-8103', { amount: '10.00', currency: 'EUR' });
    await refund('8104', 'r-8104', { full: true });
    // Assess
    expect(await refundIn('8103', 'r-8103')).toMatchObject({
      status: 'late',
      late: { because: 'accepted', conversionAmount: 3_333, commission: 333 },
    });
    expect(conversion('8103').amount).toBe(3_333);
    expect(conversion('8104').status).toBe('refused');
    expect(await refundIn('8104', 'r-8104')).toMatchObject({ status: 'applied' });
  });

  it('late-refunds lists them for finance with the commission share each refund represents', async () => {
    // Act
    const table = await runCli(['late-refunds'], { cwd: fixture.dir });
    const csv = await runCli(['late-refunds', '--csv'], { cwd: fixture.dir });
    // Assess
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(
      /8101\s+r-8101\s+EUR 50\.00\s+EUR 200\.00\s+EUR 20\.00\s+EUR 5\.00\s+locked/,
    );
    expect(table.stdout).toMatch(
      /8102\s+r-8102\s+EUR 80\.00 \(full\)\s+EUR 80\.00\s+EUR 8\.00\s+EUR 8\.00\s+locked/,
    );
    expect(table.stdout).toContain('3 late refunds');
    expect(csv.code, csv.stderr).toBe(0);
    const lines = csv.stdout.trim().split('\n');
    expect(lines[0]).toBe(
      'externalId,refundId,refundAmount,full,conversionId,conversionAmount,commission,commissionShare,currency,because,recordedAt,source,program,refusedBy,reappliedAt',
    );
    // 3.33 × 10.00 / 33.33 = 0.9991, rounded half away from zero to the cent.
    expect(lines).toContainEqual(
      expect.stringMatching(/^8103,r-8103,10\.00,false,[0-9a-f]{24},33\.33,3\.33,1\.00,EUR,accepted,/),
    );
    expect(lines).toHaveLength(4);
  });
});

import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { LateRefundRow } from '../../cli/late-refunds.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { localStackForCli, runCli } from '../support/cli.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

/**
 * docs/runbook.md, "Late refunds": should the platform let a conversion change again, finance sends
 * each late refund again under its own refund id, and the worker applies it there. The platform then
 * carries it, what is left of the order counts it once, and `late-refunds` shows it re-applied with
 * nothing to take back. The whole local stack: the shop's refunds come late through the Generic
 * webhook, finance sends them again with `connector refund`, the sandbox (10 % commission) reopens or
 * unlocks the conversion as the platform's support would.
 */

const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const local = localStackForCli();
const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });

const control = () => {
  const sandbox = local.stack.sandbox;
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
/** Calls of the platform's API so far, all routes, or one (`conversions.update`). */
const calls = (route?: string) =>
  Object.entries(control().calls())
    .filter(
      ([path]) => path.startsWith('/advertiser/') && (route === undefined || path === `/advertiser/${route}`),
    )
    .reduce((sum, [, count]) => sum + count.total, 0);

async function send(body: Record<string, unknown>): Promise<void> {
  const signed = genericWebhook(
    JSON.stringify({ eventId: randomUUID(), ...body }),
    local.stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '',
  );
  expect((await post(`${local.stack.url}/webhooks/generic`, signed)).status).toBe(202);
  await local.stack.waitForIdle();
}
const order = (orderId: string, amount: string) =>
  send({ type: 'order', orderId, amount, currency: 'EUR', clickIds: [CLICK], buyerIp: '198.51.100.4' });
const shopRefund = (orderId: string, refundId: string, extra: Record<string, unknown>) =>
  send({ type: 'refund', orderId, refundId, ...extra });

/** `connector refund` of `orderId` (finance), then the stack idle. */
async function financeRefund(orderId: string, refundId: string, ...amount: string[]): Promise<void> {
  const sent = await cli('refund', '--external-id', orderId, '--refund-id', refundId, ...amount);
  expect(sent.code, sent.stderr + sent.stdout).toBe(0);
  await local.stack.waitForIdle();
}

const refundIn = async (externalId: string, refundId: string) => {
  const record = await local.stack.ledger.get(ledgerKey(conversion(externalId).program, externalId));
  return record?.refunds[refundId];
};
async function lateRows(externalId: string): Promise<LateRefundRow[]> {
  const listed = await cli('late-refunds', '--json');
  expect(listed.code, listed.stderr).toBe(0);
  return (JSON.parse(listed.stdout) as { lateRefunds: LateRefundRow[] }).lateRefunds.filter(
    (r) => r.externalId === externalId,
  );
}

describe('a late refund sent again under its own refund id', () => {
  it('is applied once the platform has reopened the conversion, counted once in what is left, and listed with nothing to take back', async () => {
    // Prepare: EUR 100.00, locked; the shop refunds 30.00 (late); the platform reopens the conversion.
    await order('8401', '100.00');
    control().lock(conversion('8401').id);
    await shopRefund('8401', 'r-8401', { amount: '30.00', currency: 'EUR' });
    expect(await refundIn('8401', 'r-8401')).toMatchObject({ status: 'late', amount: 3_000 });
    control().reopen(conversion('8401').id);
    // Act
    await financeRefund('8401', 'r-8401', '--amount', '30.00');
    // Assess: the platform carries it; the ledger says so.
    expect(conversion('8401')).toMatchObject({ amount: 7_000, status: 'pending', isLocked: false });
    expect(await refundIn('8401', 'r-8401')).toMatchObject({
      status: 'applied',
      resultingAmount: 7_000,
      outcome: expect.stringMatching(/re-applied/),
    });
    const [row, ...more] = await lateRows('8401');
    expect(more).toEqual([]);
    expect(row).toMatchObject({ refundId: 'r-8401', commission: 1_000, commissionShare: 0 });
    expect(row?.reappliedAt).toEqual(expect.any(String));
    const table = await cli('late-refunds');
    expect(table.stdout).toMatch(/8401 r-8401: re-applied on the platform since .*reverse an adjustment/);

    // Act: the buyer gets 50.00 more back; all 70.00 left may be refunded.
    await financeRefund('8401', 'r-8401-2', '--amount', '50.00');
    const over = await cli('refund', '--external-id', '8401', '--refund-id', 'r-8401-3', '--amount', '20.01');
    // Assess: 100.00 − 30.00 − 50.00, the late refund counted once.
    expect(conversion('8401').amount).toBe(2_000);
    expect(over.code).toBe(2);
    expect(over.stderr).toContain('EUR 20.00 remains');
  });

  it('changes nothing while the conversion is still locked: nothing sent, still late, listed as before', async () => {
    // Prepare
    await order('8402', '100.00');
    control().lock(conversion('8402').id);
    await shopRefund('8402', 'r-8402', { amount: '30.00', currency: 'EUR' });
    const before = await refundIn('8402', 'r-8402');
    const rowsBefore = await lateRows('8402');
    const updates = calls('conversions.update');
    // Act
    await financeRefund('8402', 'r-8402', '--amount', '30.00');
    // Assess
    expect(calls('conversions.update')).toBe(updates);
    expect(conversion('8402')).toMatchObject({ amount: 10_000, isLocked: true });
    expect(await refundIn('8402', 'r-8402')).toEqual(before);
    expect(await lateRows('8402')).toEqual(rowsBefore);
    expect(rowsBefore[0]).toMatchObject({ commissionShare: 300 });
  });

  it('refuses the conversion for a late full refund once the platform has unlocked it (accepted, not locked)', async () => {
    // Prepare
    await order('8403', '80.00');
    control().lock(conversion('8403').id);
    await shopRefund('8403', 'r-8403', { full: true, reason: 'returned' });
    expect(await refundIn('8403', 'r-8403')).toMatchObject({ status: 'late', full: true });
    control().unlock(conversion('8403').id);
    // Act
    await financeRefund('8403', 'r-8403', '--full');
    // Assess
    expect(conversion('8403').status).toBe('refused');
    expect(await refundIn('8403', 'r-8403')).toMatchObject({ status: 'applied', resultingAmount: 0 });
    const rows = await lateRows('8403');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ refundId: 'r-8403', commission: 800, commissionShare: 0 });
    expect(rows[0]?.reappliedAt).toEqual(expect.any(String));
    expect(rows[0]?.refusedBy).toBeUndefined();
  });

  it("stays a duplicate when it is the shop's delivery again: no call to the platform, the refund still late", async () => {
    // Prepare: a shop resends its refunds with every update of the order (WooCommerce's refunds[]).
    await order('8404', '100.00');
    control().lock(conversion('8404').id);
    await shopRefund('8404', 'r-8404', { amount: '30.00', currency: 'EUR' });
    control().reopen(conversion('8404').id);
    const before = calls();
    // Act
    await shopRefund('8404', 'r-8404', { amount: '30.00', currency: 'EUR' });
    // Assess
    expect(calls()).toBe(before);
    expect(conversion('8404').amount).toBe(10_000);
    expect(await refundIn('8404', 'r-8404')).toMatchObject({ status: 'late' });
  });

  it('is applied once: a delivery of it after it was re-applied sends nothing', async () => {
    // Prepare
    await order('8405', '100.00');
    control().lock(conversion('8405').id);
    await shopRefund('8405', 'r-8405', { amount: '30.00', currency: 'EUR' });
    control().reopen(conversion('8405').id);
    await financeRefund('8405', 'r-8405', '--amount', '30.00');
    const before = calls();
    // Act
    await shopRefund('8405', 'r-8405', { amount: '30.00', currency: 'EUR' });
    // Assess
    expect(calls()).toBe(before);
    expect(conversion('8405').amount).toBe(7_000);
    expect(await refundIn('8405', 'r-8405')).toMatchObject({ status: 'applied', resultingAmount: 7_000 });
  });
});

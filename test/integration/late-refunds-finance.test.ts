import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LateRefundRow } from '../../cli/late-refunds.ts';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { RecordReport } from '../../shared/worker/batch.ts';
import { localStateDir, runCli } from '../support/cli.ts';
import { peekQueue } from '../support/sqs-records.ts';
import { genericWebhook, post, sampleFixture, stripeWebhook } from '../support/webhooks.ts';

/**
 * What finance gets of late refunds (adversarial review): every late refund once, its amount and
 * currency right, the commission share to take back only where the platform still pays it.
 * The whole local stack: dynalite, fauxqs, the sandbox (10 % commission), `connector late-refunds`.
 */

const CLICK = 'a1b2c3d4e5f60718293a4b5c';
let stack: LocalStack | undefined;
let state: { dir: string; remove(): void } | undefined;
const reports: RecordReport[] = [];

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, observe: (r) => reports.push(r) });
  state = localStateDir(stack);
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const local = () => {
  if (!stack || !state) throw new Error('the local stack is started in beforeAll');
  return { stack, dir: state.dir };
};
const control = () => {
  const sandbox = local().stack.sandbox;
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
  const { stack } = local();
  const signed = genericWebhook(
    JSON.stringify({ eventId: randomUUID(), ...body }),
    stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '',
  );
  expect((await post(`${stack.url}/webhooks/generic`, signed)).status).toBe(202);
  await stack.waitForIdle();
}
const order = (orderId: string, amount: string, currency = 'EUR') =>
  send({ type: 'order', orderId, amount, currency, clickIds: [CLICK], buyerIp: '198.51.100.4' });
const refund = (orderId: string, refundId: string, extra: Record<string, unknown>) =>
  send({ type: 'refund', orderId, refundId, ...extra });

async function stripe(type: string, object: Record<string, unknown>): Promise<void> {
  const { stack } = local();
  const body = JSON.stringify({ id: `evt_${randomUUID()}`, object: 'event', type, data: { object } });
  const signed = stripeWebhook(body, stack.secrets['STRIPE_WEBHOOK_SECRET'] ?? '');
  expect((await post(`${stack.url}/webhooks/stripe`, signed)).status).toBe(202);
  await stack.waitForIdle();
}

/**
 * A Stripe Checkout session of two lines of the same gross, 12.00, at other tax rates: A 10.00 net
 * (20 %), B 11.21 net (7 %). A refund states only its gross, matched to the first line left.
 */
async function stripeOrder(orderId: string): Promise<void> {
  const sample = JSON.parse(sampleFixture('../samples/stripe-checkout-session-completed.json')) as {
    data: { object: Record<string, unknown> };
  };
  await stripe('checkout.session.completed', {
    ...sample.data.object,
    id: `cs_${orderId}`,
    payment_intent: `pi_${orderId}`,
    metadata: { order_id: orderId, aecid: CLICK, buyer_ip: '198.51.100.4' },
    amount_subtotal: 2_400,
    amount_total: 2_400,
    total_details: { amount_discount: 0, amount_shipping: 0, amount_tax: 279 },
    line_items: {
      has_more: false,
      data: [
        { id: 'li_A', quantity: 1, amount_total: 1_200, amount_tax: 200 },
        { id: 'li_B', quantity: 1, amount_total: 1_200, amount_tax: 79 },
      ],
    },
  });
}
const stripeRefund = (orderId: string, refundId: string, gross: number) =>
  stripe('refund.created', {
    id: refundId,
    object: 'refund',
    amount: gross,
    currency: 'eur',
    status: 'succeeded',
    payment_intent: `pi_${orderId}`,
    metadata: { order_id: orderId },
  });

async function lateRows(...extra: string[]): Promise<LateRefundRow[]> {
  const listed = await runCli(['late-refunds', '--json', ...extra], { cwd: local().dir });
  expect(listed.code, listed.stderr).toBe(0);
  return (JSON.parse(listed.stdout) as { lateRefunds: LateRefundRow[] }).lateRefunds;
}
const rowsOf = (rows: readonly LateRefundRow[], externalId: string) =>
  rows.filter((r) => r.externalId === externalId);
const refundIn = async (externalId: string, refundId: string) => {
  const record = await local().stack.ledger.get(ledgerKey(conversion(externalId).program, externalId));
  return record?.refunds[refundId];
};
const lateReports = (externalId: string) =>
  reports.filter((r) => r.status === 'late_refund' && r.event?.externalId === externalId).length;

describe('late refunds as finance settles them', () => {
  it('takes back nothing for a late partial refund of an accepted conversion that a later full refund refused', async () => {
    // Prepare: accepted, not locked; a partial refund cannot change its amount (late), then the
    // order is refunded in full, which refuses the conversion: the platform takes the whole
    // commission back itself.
    await order('8201', '33.33');
    control().accept(conversion('8201').id);
    await refund('8201', 'r-8201-part', { amount: '10.00', currency: 'EUR' });
    expect(await refundIn('8201', 'r-8201-part')).toMatchObject({ status: 'late' });
    // Act
    await refund('8201', 'r-8201-full', { full: true, reason: 'returned' });
    // Assess: refused on the platform (no commission left to pay), so finance takes nothing more back.
    expect(conversion('8201').status).toBe('refused');
    const rows = rowsOf(await lateRows(), '8201');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      refundId: 'r-8201-part',
      commission: 333,
      commissionShare: 0,
      refusedBy: 'r-8201-full',
    });
    const table = await runCli(['late-refunds'], { cwd: local().dir });
    expect(table.stdout).toMatch(/8201\s+r-8201-part\s+EUR 10\.00\s+EUR 33\.33\s+EUR 3\.33\s+EUR 0\.00\s+/);
    expect(table.stdout).toContain('refused since by refund r-8201-full');
  });

  it('does the same after a cancellation refused the accepted conversion', async () => {
    // Prepare
    await order('8202', '50.00');
    control().accept(conversion('8202').id);
    await refund('8202', 'r-8202', { amount: '20.00', currency: 'EUR' });
    // Act
    await send({ type: 'cancel', orderId: '8202', reason: 'order cancelled' });
    // Assess
    expect(conversion('8202').status).toBe('refused');
    const [row] = rowsOf(await lateRows(), '8202');
    expect(row).toMatchObject({ refundId: 'r-8202', commission: 500, commissionShare: 0 });
    expect(row?.refusedBy).toBeDefined();
  });

  it('lists a second late refund with its own amount, and a full one after a partial one at what was left', async () => {
    // Prepare: 200.00, locked: commission 20.00.
    await order('8203', '200.00');
    control().lock(conversion('8203').id);
    // Act
    await refund('8203', 'r-8203-a', { amount: '50.00', currency: 'EUR' });
    await refund('8203', 'r-8203-b', { amount: '30.00', currency: 'EUR' });
    await refund('8203', 'r-8203-c', { full: true });
    // Assess: all late; the full one is what the first two left, 120.00; the shares add up to 20.00.
    expect(conversion('8203')).toMatchObject({ amount: 20_000, isLocked: true });
    const rows = rowsOf(await lateRows(), '8203');
    expect(rows.map((r) => [r.refundId, r.refundAmount, r.full, r.commissionShare])).toEqual([
      ['r-8203-a', 5_000, false, 500],
      ['r-8203-b', 3_000, false, 300],
      ['r-8203-c', 12_000, true, 1_200],
    ]);
  });

  it('turns a second late refund net from the lines the first one left, as it would an applied one', async () => {
    // Prepare: the same two refunds of 12.00 gross, one order pending (applied), one locked (late).
    await stripeOrder('8211');
    await stripeOrder('8212');
    control().lock(conversion('8212').id);
    // Act
    for (const orderId of ['8211', '8212']) {
      await stripeRefund(orderId, `re_${orderId}_1`, 1_200);
      await stripeRefund(orderId, `re_${orderId}_2`, 1_200);
    }
    // Assess: the first is line A (10.00 net), the second line B (11.21 net), late or not.
    expect(await refundIn('8211', 're_8211_2')).toMatchObject({ status: 'applied', amount: 1_121 });
    const rows = rowsOf(await lateRows(), '8212');
    expect(rows.map((r) => [r.refundId, r.refundAmount])).toEqual([
      ['re_8212_1', 1_000],
      ['re_8212_2', 1_121],
    ]);
  });

  it('counts a late refund once however often it comes, at its first amount', async () => {
    // Prepare
    await order('8204', '80.00');
    control().lock(conversion('8204').id);
    await refund('8204', 'r-8204', { amount: '20.00', currency: 'EUR' });
    const updates = calls('conversions.update');
    // Act: the same refund again, then again at another amount.
    await refund('8204', 'r-8204', { amount: '20.00', currency: 'EUR' });
    await refund('8204', 'r-8204', { amount: '35.00', currency: 'EUR' });
    // Assess: one row, one LateRefunds count, nothing more sent.
    expect(calls('conversions.update')).toBe(updates);
    const rows = rowsOf(await lateRows(), '8204');
    expect(rows.map((r) => [r.refundId, r.refundAmount, r.commissionShare])).toEqual([
      ['r-8204', 2_000, 200],
    ]);
    expect(lateReports('8204')).toBe(1);
    const dlq = await peekQueue(local().stack.emulators.sqs, local().stack.emulators.dlqUrl);
    expect(dlq.filter((m) => m.body['externalId'] === '8204')).toEqual([]);
  });

  it('keeps JPY and KWD in their own minor units and totals each currency apart', async () => {
    // Prepare: JPY has no decimals, KWD three.
    await order('8205', '12345', 'JPY');
    await order('8206', '12.345', 'KWD');
    control().lock(conversion('8205').id);
    control().lock(conversion('8206').id);
    // Act
    await refund('8205', 'r-8205', { amount: '2000', currency: 'JPY' });
    await refund('8206', 'r-8206', { amount: '1.005', currency: 'KWD' });
    // Assess: commission 10 %: JPY 1235 (1234.5 up), KWD 1.235 (1.2345 up); shares 200 and 0.101 (0.1005 up).
    const rows = await lateRows();
    expect(rowsOf(rows, '8205')[0]).toMatchObject({
      refundAmount: 2_000,
      conversionAmount: 12_345,
      commission: 1_235,
      commissionShare: 200,
      currency: 'JPY',
    });
    expect(rowsOf(rows, '8206')[0]).toMatchObject({
      refundAmount: 1_005,
      conversionAmount: 12_345,
      commission: 1_235,
      commissionShare: 101,
      currency: 'KWD',
    });
    const csv = (await runCli(['late-refunds', '--csv'], { cwd: local().dir })).stdout.split('\n');
    expect(csv).toContainEqual(
      expect.stringMatching(/^8205,r-8205,2000,false,[0-9a-f]{24},12345,1235,200,JPY,locked,/),
    );
    expect(csv).toContainEqual(
      expect.stringMatching(/^8206,r-8206,1\.005,false,[0-9a-f]{24},12\.345,1\.235,0\.101,KWD,locked,/),
    );
    const table = (await runCli(['late-refunds'], { cwd: local().dir })).stdout;
    expect(table).toMatch(/commission to take back .*JPY 200/);
    expect(table).toMatch(/commission to take back .*KWD 0\.101/);
  });

  it('records a refund late when the ledger still believes the conversion pending, and gives a zero commission a zero share', async () => {
    // Prepare: an order the connector never saw, accepted with no commission, locked by the
    // platform's own schedule; the ledger learns of it only from the refund.
    const seeded = control().seedConversion({
      program: conversion('8201').program,
      externalId: '8207',
      amount: 9_900,
      currency: 'EUR',
      status: 'accepted',
      commission: 0,
    });
    control().lock(seeded.id);
    // Act
    await refund('8207', 'r-8207', { amount: '9.90', currency: 'EUR' });
    // Assess
    const [row] = rowsOf(await lateRows(), '8207');
    expect(row).toMatchObject({ refundAmount: 990, commission: 0, commissionShare: 0, because: 'locked' });
  });

  it('lists each late refund of consecutive periods exactly once, --from and --to on when it was recorded', async () => {
    // Prepare
    const all = await lateRows();
    expect(all.length).toBeGreaterThan(3);
    const split = all[2]!.recordedAt;
    const after = new Date(Date.parse(split) + 1).toISOString();
    // Act
    const first = await lateRows('--to', split);
    const second = await lateRows('--from', after);
    // Assess: the two periods together are the whole list, none twice, shares as in the whole list.
    const key = (r: LateRefundRow) => `${r.externalId}/${r.refundId}`;
    expect([...first, ...second].map(key)).toEqual(all.map(key));
    expect([...first, ...second]).toEqual(all);
    expect(first.every((r) => r.recordedAt <= split)).toBe(true);
  });

  it('writes a CSV a spreadsheet cannot run: an id starting like a formula is quoted as text', async () => {
    // Prepare
    await order('8208', '40.00');
    control().lock(conversion('8208').id);
    // Act
    await refund('8208', '=HYPERLINK("http://x","y")', { amount: '4.00', currency: 'EUR' });
    // Assess
    const csv = (await runCli(['late-refunds', '--csv'], { cwd: local().dir })).stdout.split('\n');
    expect(csv).toContainEqual(expect.stringMatching(/^8208,"'=HYPERLINK\(""http:\/\/x"",""y""\)",4\.00,/));
  });
});

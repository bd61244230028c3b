import { describe, expect, it } from 'vitest';
import { ledgerKey } from '../../shared/ledger.ts';
import { localStackForCli, placeSampleOrder, runCli } from '../support/cli.ts';
import { postRefund, postRefundWithQueueDown } from '../support/finance-refunds.ts';
import { sandboxConversions } from '../support/sandbox.ts';

/**
 * `POST /refunds` reserved partial refunds only. Finance sent a full refund RF-1 of an order, then
 * RF-1 again as a partial 10.00 (or a partial RF-2) before the worker recorded the first: both were
 * answered 202, yet the worker refuses the conversion for the full refund and drops the partial (a
 * duplicate of RF-1, or "conversion already refused"), so finance was told of a refund never made.
 * A full refund is now reserved too: the same refund id at an amount is a 409 naming `refundId`, and
 * any further partial refund of the order a 400 naming `amount`. Real handlers on dynalite and
 * fauxqs, the worker, the sandbox and the `connector` CLI.
 */

const COUNTS_ONCE = 'a refund id counts once; send another refund id for another refund';

const local = localStackForCli();
const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });
/** The CLI run two hours after now, past the local queue's drop floor (73 minutes). */
const cliLater = (...argv: string[]) =>
  runCli(argv, { cwd: local.dir, now: () => new Date(Date.now() + 120 * 60_000) });
const program = () => local.stack.sources.get('generic')?.program ?? '';

/** The Generic sample order (EUR 49.90) as `orderId`, added as a conversion. */
const placeOrder = (orderId: string) => placeSampleOrder(local, 'generic', orderId);

async function financeRefund(body: Record<string, unknown>) {
  const { status, text } = await postRefund(local.stack, body);
  return { status, body: JSON.parse(text) as Record<string, unknown> };
}

const conversionOf = (orderId: string) => sandboxConversions(local.stack, orderId)[0];
const recordOf = (orderId: string) => local.stack.ledger.get(ledgerKey(program(), orderId));

describe('POST /refunds: a full refund, then the same refund id as a partial one, before the worker records it', () => {
  it('answers 409 naming refundId and that it is reserved as a full refund; only the full refund is applied', async () => {
    // Prepare
    await placeOrder('7601');
    await local.stack.stopPolling();
    const full = await financeRefund({ externalId: '7601', refundId: 'RF-1', full: true });
    // Act
    const partial = await financeRefund({ externalId: '7601', refundId: 'RF-1', amount: '10.00' });
    const resent = await financeRefund({ externalId: '7601', refundId: 'RF-1', full: true });
    local.stack.startPolling();
    await local.stack.waitForIdle();
    // Assess
    expect(full.status).toBe(202);
    expect(partial).toEqual({
      status: 409,
      body: {
        error: 'conflict',
        field: 'refundId',
        message: `refund RF-1 of order 7601 is reserved as a full refund (requested, not yet applied): ${COUNTS_ONCE}`,
      },
    });
    expect(resent.status).toBe(202);
    expect(conversionOf('7601')).toMatchObject({ status: 'refused', amount: 4_990, amountHistory: [] });
    expect((await recordOf('7601'))?.refunds['RF-1']).toMatchObject({ full: true, status: 'applied' });
  });

  it('answers 409 the other way round too: a partial refund reserved, then its refund id as a full refund', async () => {
    // Prepare
    await placeOrder('7602');
    await local.stack.stopPolling();
    const partial = await financeRefund({ externalId: '7602', refundId: 'RF-1', amount: '10.00' });
    // Act
    const full = await financeRefund({ externalId: '7602', refundId: 'RF-1', full: true });
    local.stack.startPolling();
    await local.stack.waitForIdle();
    // Assess
    expect(partial.status).toBe(202);
    expect(full).toMatchObject({ status: 409, body: { error: 'conflict', field: 'refundId' } });
    expect(full.body['message']).toBe(
      `refund RF-1 of order 7602 is reserved at EUR 10.00 (requested, not yet applied): ${COUNTS_ONCE}`,
    );
    expect(conversionOf('7602')).toMatchObject({ status: 'pending', amount: 3_990 });
  });
});

describe('POST /refunds: a partial refund of an order being refunded in full', () => {
  it('answers 400 naming amount while the full refund is reserved, and once it is recorded; a partial one sent before it stays accepted', async () => {
    // Prepare: RF-0 (5.00) reserved before the full refund RF-1, the worker stopped
    await placeOrder('7603');
    await local.stack.stopPolling();
    const before = await financeRefund({ externalId: '7603', refundId: 'RF-0', amount: '5.00' });
    const full = await financeRefund({ externalId: '7603', refundId: 'RF-1', full: true });
    // Act
    const reserved = await financeRefund({ externalId: '7603', refundId: 'RF-2', amountCents: 1_000 });
    local.stack.startPolling();
    await local.stack.waitForIdle();
    const recorded = await financeRefund({ externalId: '7603', refundId: 'RF-3', amount: '10.00' });
    await local.stack.waitForIdle();
    // Assess
    expect([before.status, full.status]).toEqual([202, 202]);
    expect(reserved).toEqual({
      status: 400,
      body: {
        error: 'bad_request',
        field: 'amount',
        message:
          'order 7603 is being refunded in full (refund RF-1, requested and not yet applied): a partial refund ' +
          'of it would never be applied; the full refund gives back all of it',
      },
    });
    expect(recorded).toMatchObject({ status: 400, body: { field: 'amount' } });
    expect(recorded.body['message']).toBe(
      'order 7603 is refunded in full (refund RF-1, applied): a partial refund of it would never be ' +
        'applied; the full refund gives back all of it',
    );
    expect(conversionOf('7603')).toMatchObject({ status: 'refused' });
    expect(Object.keys((await recordOf('7603'))?.refunds ?? {}).sort()).toEqual(['RF-0', 'RF-1']);
  });
});

describe('connector reservations and status: a full refund reserved', () => {
  it('shows it as "full", and --drop --yes removes it: a partial refund of the order is then accepted', async () => {
    // Prepare: the full refund's send failed (503): reserved, never queued
    await placeOrder('7604');
    expect(
      await postRefundWithQueueDown(local.stack, { externalId: '7604', refundId: 'RF-F', full: true }),
    ).toBe(503);
    const refused = await financeRefund({ externalId: '7604', refundId: 'RF-P', amount: '10.00' });
    // Act
    const listed = await cli('reservations', '7604');
    const json = await cli('reservations', '7604', '--json');
    const status = await cli('status', '7604');
    const unconfirmed = await cliLater('reservations', '7604', '--drop', 'RF-F');
    const dropped = await cliLater('reservations', '7604', '--drop', 'RF-F', '--yes');
    const after = await financeRefund({ externalId: '7604', refundId: 'RF-P', amount: '10.00' });
    await local.stack.waitForIdle();
    // Assess
    expect(refused.status).toBe(400);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(/RF-F\s+full\s+\d{4}-\d\d-\d\dT/);
    expect(JSON.parse(json.stdout)).toMatchObject({
      unrecordedReservations: [{ refundId: 'RF-F', full: true, amount: 0, currency: 'EUR' }],
    });
    expect(status.stdout).toMatch(/Refunds reserved[^\n]*\n[^\n]*\n\s*RF-F\s+full\s+\d{4}-/);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stdout).toContain('Refund RF-F (full refund, reserved ');
    expect(unconfirmed.stdout).not.toMatch(/EUR 0\.00|0 minor units/);
    expect(dropped.code, dropped.stderr).toBe(0);
    expect(dropped.stdout).toContain('✓ dropped the reservation of refund RF-F (full refund, reserved ');
    expect(after.status).toBe(202);
    expect(conversionOf('7604')).toMatchObject({ status: 'pending', amount: 3_990 });
  });
});

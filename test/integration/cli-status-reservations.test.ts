import { describe, expect, it } from 'vitest';
import { localStackForCli, placeSampleOrder, runCli } from '../support/cli.ts';
import { postRefund, postRefundWithQueueDown } from '../support/finance-refunds.ts';

/**
 * `POST /refunds` reserves a partial refund before it queues it, and the reservation counts against
 * what remains of the order until the worker records the refund: a request answered 503 and never
 * sent again keeps its amount reserved, and later partial refunds are refused naming it. `connector
 * status` shows those reservations, or the operator cannot see why the door refuses.
 */

const local = localStackForCli();
const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });

/** A EUR 49.90 Generic order (the built-in sample), added as a conversion. */
const placeOrder = (orderId: string) => placeSampleOrder(local, 'generic', orderId);

const financeRefund = async (body: Record<string, unknown>) => (await postRefund(local.stack, body)).status;

/** `POST /refunds` wired to the stack's ledger, with a queue that cannot be reached: a 503. */
const financeRefundWithQueueDown = (body: Record<string, unknown>) =>
  postRefundWithQueueDown(local.stack, body);

describe('connector status: refunds reserved at POST /refunds and not recorded', () => {
  it('lists a refund whose request failed (503) beside the recorded ones, with its amount and when it was reserved', async () => {
    // Prepare: EUR 20.00 reserved and never queued, then EUR 5.00 queued and recorded
    await placeOrder('5301');
    const failed = await financeRefundWithQueueDown({
      externalId: '5301',
      refundId: 'RF-5301-lost',
      amount: '20.00',
    });
    const queued = await financeRefund({ externalId: '5301', refundId: 'RF-5301-ok', amount: '5.00' });
    await local.stack.waitForIdle();
    // Act
    const shown = await cli('status', '5301');
    const json = await cli('status', '5301', '--json');
    // Assess
    expect([failed, queued]).toEqual([503, 202]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(
      'requested through POST /refunds, not yet recorded by the worker: in the queue, or its request failed — send it again to settle it',
    );
    expect(shown.stdout).toMatch(/RF-5301-lost\s+EUR 20\.00\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/);
    const reserved = shown.stdout.slice(shown.stdout.indexOf('Refunds reserved'));
    expect(reserved).toContain('RF-5301-lost');
    expect(reserved).not.toContain('RF-5301-ok');
    expect(JSON.parse(json.stdout)).toMatchObject({
      found: true,
      record: { refunds: { 'RF-5301-ok': { status: 'applied' } } },
      unrecordedReservations: [{ refundId: 'RF-5301-lost', amount: 2_000, reservedAt: expect.any(String) }],
    });
  });

  it('lists a refund still in the queue, and nothing once the worker recorded it', async () => {
    // Prepare
    await placeOrder('5302');
    await local.stack.stopPolling();
    const queued = await financeRefund({ externalId: '5302', refundId: 'RF-5302-1', amount: '10.00' });
    // Act
    const waiting = await cli('status', '5302');
    local.stack.startPolling();
    await local.stack.waitForIdle();
    const recorded = await cli('status', '5302');
    const recordedJson = await cli('status', '5302', '--json');
    // Assess
    expect(queued).toBe(202);
    expect(waiting.stdout).toMatch(/RF-5302-1\s+EUR 10\.00\s+\d{4}-/);
    expect(waiting.stdout).toContain('not yet recorded by the worker');
    expect(recorded.stdout).not.toContain('not yet recorded by the worker');
    expect(recorded.stdout).toMatch(/RF-5302-1\s+finance\s+EUR 10\.00\s+applied/);
    expect(JSON.parse(recordedJson.stdout)).toMatchObject({ unrecordedReservations: [] });
  });
});

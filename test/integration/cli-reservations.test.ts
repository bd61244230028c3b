import { describe, expect, it } from 'vitest';
import { SqsFailureQueue } from '../../shared/adapters/sqs.ts';
import { messageGroupId } from '../../shared/queueing.ts';
import { localStackForCli, placeSampleOrder, runCli } from '../support/cli.ts';
import { postRefund, postRefundWithQueueDown } from '../support/finance-refunds.ts';

/**
 * `POST /refunds` reserves a partial refund before it queues it. A request answered 503 whose refund
 * finance then decides not to make leaves its reservation behind, lowering what later partial refunds
 * may take. `connector reservations` lists an order's reservations the worker has not recorded and
 * drops one, only when its refund was never queued as far as the connector can tell.
 */

// Past the local queue's floor: 6 receives of up to 30 s and a 10-minute wait each, and 10 minutes (73).
const TWO_HOURS_LATER = () => new Date(Date.now() + 120 * 60_000);

const local = localStackForCli();
const cli = (...argv: string[]) => runCli(argv, { cwd: local.dir });
/** The CLI run two hours after now: the reservations made by the test are two hours old to it. */
const cliLater = (...argv: string[]) => runCli(argv, { cwd: local.dir, now: TWO_HOURS_LATER });
const program = () => [...local.stack.sources.values()][0]?.program ?? '';

/** A EUR 49.90 Generic order (the built-in sample), added as a conversion. */
const placeOrder = (orderId: string) => placeSampleOrder(local, 'generic', orderId);

const financeRefund = (body: Record<string, unknown>) => postRefund(local.stack, body);

/** `POST /refunds` wired to the stack's ledger, with a queue that cannot be reached: a 503. */
const financeRefundWithQueueDown = (body: Record<string, unknown>) =>
  postRefundWithQueueDown(local.stack, body);

/** The refund's message parked in the DLQ, as the worker parks one (it was queued after all). */
async function parkRefund(externalId: string, refundId: string, amount: number): Promise<void> {
  const event = {
    type: 'OrderRefunded',
    eventId: `finance:${refundId}`,
    source: 'generic',
    platform: 'finance',
    externalId,
    receivedAt: new Date().toISOString(),
    refundId,
    amount,
    full: false,
    origin: 'finance',
  };
  await new SqsFailureQueue(
    local.stack.emulators.sqs,
    local.stack.emulators.queueUrl,
    local.stack.emulators.dlqUrl,
  ).park(
    {
      body: JSON.stringify(event),
      groupId: messageGroupId(program(), externalId),
      deduplicationId: `park-${refundId}`,
    },
    {
      failureClass: 'transient',
      reason: 'ledger unavailable',
      attempts: '6',
      firstFailureAt: new Date().toISOString(),
      lastFailureAt: new Date().toISOString(),
      eventType: 'OrderRefunded',
      externalId,
      source: 'generic',
    },
  );
}

const reservedIds = (stdout: string) =>
  (JSON.parse(stdout) as { unrecordedReservations: { refundId: string }[] }).unrecordedReservations.map(
    (r) => r.refundId,
  );

describe('connector reservations <externalId>: the refunds reserved and not recorded', () => {
  it('lists a reservation whose request failed, with its amount and when it was reserved, and not the recorded ones', async () => {
    // Prepare: EUR 20.00 reserved and never queued, EUR 5.00 queued and recorded
    await placeOrder('5501');
    const failed = await financeRefundWithQueueDown({
      externalId: '5501',
      refundId: 'RF-5501-lost',
      amount: '20.00',
    });
    const queued = await financeRefund({ externalId: '5501', refundId: 'RF-5501-ok', amount: '5.00' });
    await local.stack.waitForIdle();
    // Act
    const shown = await cli('reservations', '5501');
    const json = await cli('reservations', '5501', '--json');
    // Assess
    expect([failed, queued.status]).toEqual([503, 202]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/RF-5501-lost\s+EUR 20\.00\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/);
    expect(shown.stdout).not.toContain('RF-5501-ok');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      externalId: '5501',
      unrecordedReservations: [
        {
          program: program(),
          refundId: 'RF-5501-lost',
          amount: 2_000,
          currency: 'EUR',
          reservedAt: expect.any(String),
        },
      ],
    });
  });

  it('says there is none for an order without reservations (exit 0)', async () => {
    // Act
    const shown = await cli('reservations', 'no-such-order');
    const json = await cli('reservations', 'no-such-order', '--json');
    // Assess
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain('no-such-order');
    expect(shown.stdout).toMatch(/no refund reserved/i);
    expect(JSON.parse(json.stdout)).toMatchObject({
      externalId: 'no-such-order',
      unrecordedReservations: [],
    });
  });
});

describe('connector reservations <externalId> --drop <refundId>', () => {
  it('drops a failed request’s reservation with --yes, and the partial refund it held back is then accepted', async () => {
    // Prepare: EUR 40.00 reserved of EUR 49.90 and never queued: a EUR 30.00 refund is refused
    await placeOrder('5502');
    expect(
      await financeRefundWithQueueDown({ externalId: '5502', refundId: 'RF-5502-lost', amount: '40.00' }),
    ).toBe(503);
    const before = await financeRefund({ externalId: '5502', refundId: 'RF-5502-2', amount: '30.00' });
    // Act
    const dropped = await cliLater('reservations', '5502', '--drop', 'RF-5502-lost', '--yes');
    const listed = await cli('reservations', '5502', '--json');
    const after = await financeRefund({ externalId: '5502', refundId: 'RF-5502-2', amount: '30.00' });
    await local.stack.waitForIdle();
    const status = await cli('status', '5502', '--json');
    // Assess
    expect(before.status).toBe(400);
    expect(before.text).toContain('more than is left');
    expect(dropped.code, dropped.stderr).toBe(0);
    expect(dropped.stdout).toContain('RF-5502-lost');
    expect(dropped.stdout).toMatch(/dropped/i);
    expect(reservedIds(listed.stdout)).toEqual([]);
    expect(after.status, after.text).toBe(202);
    expect(JSON.parse(status.stdout)).toMatchObject({
      record: { currentAmount: 1_990, refunds: { 'RF-5502-2': { status: 'applied' } } },
      unrecordedReservations: [],
    });
  });

  it('drops nothing without --yes: says what dropping means, and that a refund in fact queued is still applied (exit 2)', async () => {
    // Prepare
    await placeOrder('5503');
    expect(
      await financeRefundWithQueueDown({ externalId: '5503', refundId: 'RF-5503-lost', amount: '10.00' }),
    ).toBe(503);
    // Act
    const unconfirmed = await cliLater('reservations', '5503', '--drop', 'RF-5503-lost');
    const listed = await cli('reservations', '5503', '--json');
    // Assess
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toContain('--yes');
    expect(unconfirmed.stdout + unconfirmed.stderr).toMatch(/never queued/);
    expect(unconfirmed.stdout + unconfirmed.stderr).toMatch(/worker (still )?applies it/);
    expect(reservedIds(listed.stdout)).toEqual(['RF-5503-lost']);
  });

  it('refuses a refund id the order has no reservation of, and one the worker recorded (exit 2)', async () => {
    // Prepare: RF-5504-ok queued, applied and recorded by the worker
    await placeOrder('5504');
    expect((await financeRefund({ externalId: '5504', refundId: 'RF-5504-ok', amount: '5.00' })).status).toBe(
      202,
    );
    await local.stack.waitForIdle();
    // Act
    const unknown = await cliLater('reservations', '5504', '--drop', 'RF-5504-typo', '--yes');
    const recorded = await cliLater('reservations', '5504', '--drop', 'RF-5504-ok', '--yes');
    // Assess
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('RF-5504-typo');
    expect(unknown.stderr).toMatch(/not reserved/);
    expect(recorded.code).toBe(2);
    expect(recorded.stderr).toContain('RF-5504-ok');
    expect(recorded.stderr).toMatch(/recorded in the ledger \(applied\)/);
    expect(recorded.stderr).toContain('applied');
  });

  it('refuses a reservation younger than the worker’s longest normal delay: its refund may still be on its way (exit 2)', async () => {
    // Prepare
    await placeOrder('5505');
    expect(
      await financeRefundWithQueueDown({ externalId: '5505', refundId: 'RF-5505-lost', amount: '10.00' }),
    ).toBe(503);
    // Act: now, not two hours later
    const early = await cli('reservations', '5505', '--drop', 'RF-5505-lost', '--yes');
    const listed = await cli('reservations', '5505', '--json');
    // Assess
    expect(early.code).toBe(2);
    expect(early.stderr).toMatch(/reserved \d+[sm] ago/);
    expect(early.stderr).toContain('73 minutes');
    expect(reservedIds(listed.stdout)).toEqual(['RF-5505-lost']);
  });

  it('refuses a reservation whose refund is parked in the DLQ: it was queued, and a replay applies it (exit 2)', async () => {
    // Prepare: the send answered 503, yet SQS had the message; the worker later parked it
    await placeOrder('5506');
    expect(
      await financeRefundWithQueueDown({ externalId: '5506', refundId: 'RF-5506-parked', amount: '10.00' }),
    ).toBe(503);
    await parkRefund('5506', 'RF-5506-parked', 1_000);
    // Act
    const refused = await cliLater('reservations', '5506', '--drop', 'RF-5506-parked', '--yes');
    const listed = await cli('reservations', '5506', '--json');
    // Assess
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/parked in the DLQ \(message [^)]+\)/);
    expect(refused.stderr).toContain('dlq');
    expect(reservedIds(listed.stdout)).toEqual(['RF-5506-parked']);
  });
});

describe('connector status of an order with neither record nor conversion', () => {
  it('shows the refunds reserved for it, still saying the order is unknown (exit 1)', async () => {
    // Prepare: a refund of an order the connector never saw, whose queue send failed
    expect(
      await financeRefundWithQueueDown({
        externalId: '5507',
        refundId: 'RF-5507-lost',
        amountCents: 1_500,
        currency: 'EUR',
      }),
    ).toBe(503);
    // Act
    const shown = await cli('status', '5507');
    const json = await cli('status', '5507', '--json');
    // Assess
    expect(shown.code).toBe(1);
    expect(shown.stderr).toContain('order 5507: not in the ledger and no conversion on the platform');
    expect(shown.stdout).toMatch(/RF-5507-lost\s+\S.*\s+\d{4}-\d\d-\d\dT/);
    expect(JSON.parse(json.stdout)).toMatchObject({
      found: false,
      externalId: '5507',
      unrecordedReservations: [{ refundId: 'RF-5507-lost', amount: 1_500 }],
    });
  });
});

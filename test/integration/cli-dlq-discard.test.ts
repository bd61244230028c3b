import { randomUUID } from 'node:crypto';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { DEFAULT_SEED } from '../../sandbox/server.ts';
import { SqsFailureQueue } from '../../shared/adapters/sqs.ts';
import { ledgerKey, type RefundRecord } from '../../shared/ledger.ts';
import { messageGroupId } from '../../shared/queueing.ts';
import { localStateDir, runCli } from '../support/cli.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

/**
 * `connector dlq discard <messageId>`: the messages the connector tells operators to settle by hand
 * and "then discard" (a partial refund on the legacy interface, a refund or accept the platform
 * refused for good) are deleted one at a time, and a refund the ledger still holds pending is
 * recorded as settled by hand, so that the accept job, `status` and the worker stop waiting for it.
 */
const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const IP = '203.0.113.7';
const LONG_AGO = '2026-01-05T10:00:00.000Z';
const UPDATE_ROUTE = '/advertiser/conversions.update';

let stack: LocalStack;
let state: { dir: string; remove(): void };
let program: string;

beforeAll(async () => {
  program = DEFAULT_SEED.programs[0] ?? '';
  const rule = DEFAULT_SEED.rules[0] ?? '';
  const common = { platform: 'generic' as const, program, rule, secretRef: 'GENERIC_WEBHOOK_SECRET' };
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    visibilityBaseSeconds: 1,
    sources: [
      { id: 'shop', ...common, acceptAfterDays: 30 },
      { id: 'old-shop', ...common, backend: 'legacy', acceptAfterDays: 30 },
    ],
  });
  state = localStateDir(stack);
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const cli = (argv: string[], input?: string) =>
  runCli(argv, { cwd: state.dir, ...(input === undefined ? {} : { input }) });
const onPlatform = (externalId: string) =>
  (stack.sandbox?.control.conversions() ?? []).find((c) => c.externalId === externalId);
const recordOf = (externalId: string) => stack.ledger.get(ledgerKey(program, externalId));
const refundIn = async (externalId: string, refundId: string): Promise<RefundRecord | undefined> =>
  (await recordOf(externalId))?.refunds[refundId];

async function webhook(source: string, body: Record<string, unknown>): Promise<void> {
  const answer = await post(
    `${stack.url}/webhooks/${source}`,
    genericWebhook(
      JSON.stringify({ eventId: randomUUID(), ...body }),
      stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '',
    ),
  );
  expect(answer.status).toBe(202);
  await stack.waitForIdle();
}

/** An order of 100.00 EUR placed long ago (due for acceptance), added as a pending conversion. */
async function order(source: 'shop' | 'old-shop', orderId: string): Promise<void> {
  await webhook(source, {
    type: 'order',
    orderId,
    amount: '100.00',
    currency: 'EUR',
    orderDate: LONG_AGO,
    ...(source === 'old-shop'
      ? { affiliateTrackingId: stack.sandbox?.seed.trackingIds[0] }
      : { clickIds: [CLICK], buyerIp: IP }),
  });
  expect(onPlatform(orderId)?.status).toBe('pending');
}

async function partialRefund(source: string, orderId: string, refundId: string, amount: string) {
  await webhook(source, { type: 'refund', orderId, refundId, amount, currency: 'EUR' });
}

interface Listed {
  messageId: string;
  externalId: string;
  eventType: string;
  reason: string;
}

async function dlqMessages(): Promise<Listed[]> {
  const listed = await cli(['dlq', 'list', '--json']);
  expect(listed.code, listed.stderr).toBe(0);
  return (JSON.parse(listed.stdout) as { messages: Listed[] }).messages;
}

async function messageOf(externalId: string): Promise<Listed> {
  const found = (await dlqMessages()).find((m) => m.externalId === externalId);
  if (!found) throw new Error(`no DLQ message for order ${externalId}`);
  return found;
}

/** Order `orderId` of the legacy source, 100.00 EUR placed long ago, as its shop sends it. */
async function placeOnLegacy(orderId: string): Promise<void> {
  await webhook('old-shop', {
    type: 'order',
    orderId,
    amount: '100.00',
    currency: 'EUR',
    orderDate: LONG_AGO,
    affiliateTrackingId: stack.sandbox?.seed.trackingIds[0],
  });
}

/**
 * The shop's pixel recorded order `orderId` (100.00) before the connector, so the legacy add of it
 * is refused as a duplicate and its message parked, the record failed. A partial refund r-held
 * (10.00) then comes and is held for the order (its message done). The order's replay adopts the
 * pixel's conversion and its own message applies r-held, which the legacy interface cannot do: that
 * message is parked again, r-held pending on the added conversion. Returns that parked message.
 */
async function parkedWithHeldRefund(orderId: string): Promise<Listed> {
  const control = stack.sandbox?.control;
  control?.seedConversion({ program, externalId: orderId, amount: 10_000, currency: 'EUR' });
  control?.setOptions({ duplicates: 'reject' });
  try {
    await placeOnLegacy(orderId);
  } finally {
    control?.setOptions({ duplicates: 'create' });
  }
  expect(await recordOf(orderId)).toMatchObject({ state: 'failed' });
  await partialRefund('old-shop', orderId, 'r-held', '10.00');
  const held = await refundIn(orderId, 'r-held');
  expect(held).toMatchObject({ status: 'pending' });
  expect(held?.unconfirmedSend).toBeUndefined();
  const replayed = await cli(['dlq', 'replay', '--external-id', orderId, '--yes']);
  expect(replayed.code, replayed.stderr).toBe(0);
  await stack.waitForIdle();
  const parked = await messageOf(orderId);
  expect(parked.eventType).toBe('OrderPlaced');
  expect(parked.reason).toContain('cannot change a conversion amount');
  expect(await recordOf(orderId)).toMatchObject({
    state: 'added',
    refunds: { 'r-held': { status: 'pending' } },
  });
  return parked;
}

describe('connector dlq discard', () => {
  it('deletes only the legacy partial refund it names and records the refund settled by hand: the accept job accepts the order, status has nothing pending', async () => {
    // Prepare: two orders on the legacy interface, each with a partial refund it cannot apply.
    await order('old-shop', 'L-1');
    await order('old-shop', 'L-2');
    await partialRefund('old-shop', 'L-1', 'r-1', '10.00');
    await partialRefund('old-shop', 'L-2', 'r-2', '20.00');
    const parked = await messageOf('L-1');
    expect(await refundIn('L-1', 'r-1')).toMatchObject({ status: 'pending' });
    // What an operator met before: the pending refund holds the conversion back from acceptance.
    const before = await stack.runAccept();
    expect(before.items.find((i) => i.externalId === 'L-1')).toMatchObject({ result: 'held' });
    expect(parked.reason).toContain('connector dlq discard');

    // Act
    const discarded = await cli(['dlq', 'discard', parked.messageId, '--yes']);

    // Assess
    expect(discarded.code, discarded.stderr).toBe(0);
    expect(discarded.stdout).toContain(`discarded ${parked.messageId}`);
    expect(discarded.stdout).toMatch(/refund r-1 of order L-1: recorded as settled by hand/);
    expect((await dlqMessages()).map((m) => m.externalId)).toEqual(['L-2']);
    expect(await refundIn('L-1', 'r-1')).toMatchObject({
      status: 'manual',
      outcome: expect.stringMatching(
        /^settled by hand by an operator \(connector dlq discard, 20\d\d-\d\d-\d\dT[\d:.]+Z\)$/,
      ),
    });
    expect(await refundIn('L-2', 'r-2')).toMatchObject({ status: 'pending' });
    const after = await stack.runAccept();
    expect(after.items.find((i) => i.externalId === 'L-1')).toMatchObject({ result: 'accepted' });
    expect(after.items.find((i) => i.externalId === 'L-2')).toMatchObject({ result: 'held' });
    expect(onPlatform('L-1')).toMatchObject({ status: 'accepted', amount: 10_000 });
    const status = await cli(['status', 'L-1', '--source', 'old-shop']);
    expect(status.stdout).toMatch(/r-1\s+shop\s+EUR 10\.00\s+manual/);
    expect(status.stdout).not.toMatch(/refunds? pending/);
    expect(status.stdout).toContain('✓ ledger and platform agree');
  });

  it('a refund settled by hand is never sent again; a later full refund still refuses the conversion', async () => {
    // Prepare: L-1's refund r-1 was settled by hand (above).
    const version = (await recordOf('L-1'))?.version;

    // Act: the shop sends r-1 again, then refunds the rest of the order.
    await partialRefund('old-shop', 'L-1', 'r-1', '10.00');
    const afterRepeat = await dlqMessages();
    const versionAfterRepeat = (await recordOf('L-1'))?.version;
    await webhook('old-shop', { type: 'refund', orderId: 'L-1', refundId: 'r-full', full: true });

    // Assess: sent again, the legacy interface would have parked it again (it cannot change amounts).
    expect(afterRepeat.map((m) => m.externalId)).toEqual(['L-2']);
    expect(versionAfterRepeat).toBe(version);
    expect(onPlatform('L-1')?.status).toBe('refused');
    const record = await recordOf('L-1');
    expect(record?.state).toBe('refused');
    expect(record?.refunds['r-1']?.status).toBe('manual');
    expect((await dlqMessages()).map((m) => m.externalId)).toEqual(['L-2']);
  });

  it('counts a refund settled by hand in the amount later refunds set (current API)', async () => {
    // Prepare: the platform refuses the amount update for good (422, conversion still pending), so
    // the partial refund is parked pending; the operator sets 90.00 by hand, then discards it.
    await order('shop', 'C-1');
    stack.sandbox?.control.setFaults({ errorRate: 1, errorStatus: 422, routes: [UPDATE_ROUTE] });
    try {
      await partialRefund('shop', 'C-1', 'r-1', '10.00');
    } finally {
      stack.sandbox?.control.setFaults({});
    }
    const parked = await messageOf('C-1');
    const byHand = await fetch(`${stack.platformUrl}${UPDATE_ROUTE}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.sandbox?.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: onPlatform('C-1')?.id, amount: 9_000, reason: 'refund r-1, by hand' }),
    });
    expect(byHand.status).toBe(200);
    expect((await cli(['dlq', 'discard', parked.messageId, '--yes'])).code).toBe(0);

    // Act
    await partialRefund('shop', 'C-1', 'r-2', '5.00');

    // Assess: 100.00 − 10.00 (by hand) − 5.00, not 95.00.
    expect(onPlatform('C-1')?.amount).toBe(8_500);
    expect(await refundIn('C-1', 'r-1')).toMatchObject({ status: 'manual' });
    expect(await refundIn('C-1', 'r-2')).toMatchObject({ status: 'applied', resultingAmount: 8_500 });
    const status = await cli(['status', 'C-1', '--source', 'shop']);
    expect(status.stdout).toContain('✓ ledger and platform agree');
  });

  it('asks first: without a terminal it refuses (exit 2), "n" exits 1, and nothing is deleted or written', async () => {
    // Prepare
    const parked = await messageOf('L-2');
    const version = (await recordOf('L-2'))?.version;

    // Act
    const noTerminal = await cli(['dlq', 'discard', parked.messageId]);
    const declined = await cli(['dlq', 'discard', parked.messageId], 'n\n');

    // Assess
    expect(noTerminal.code).toBe(2);
    expect(noTerminal.stderr).toContain('pass --yes');
    expect(declined.code).toBe(1);
    expect(declined.stderr).toContain('refund r-2 of order L-2');
    expect(declined.stderr).toContain('not confirmed; nothing discarded');
    expect((await dlqMessages()).map((m) => m.messageId)).toContain(parked.messageId);
    expect((await recordOf('L-2'))?.version).toBe(version);
  });

  it('with "y" at the prompt discards, and --json says what it did', async () => {
    // Prepare
    const parked = await messageOf('L-2');

    // Act
    const discarded = await cli(['dlq', 'discard', parked.messageId, '--json'], 'y\n');

    // Assess
    expect(discarded.code, discarded.stderr).toBe(0);
    expect(JSON.parse(discarded.stdout)).toMatchObject({
      discarded: { messageId: parked.messageId, externalId: 'L-2', eventType: 'OrderRefunded' },
      ledger: { settled: true, program, refundId: 'r-2', status: 'manual' },
    });
    expect((await dlqMessages()).map((m) => m.externalId)).not.toContain('L-2');
    expect(await refundIn('L-2', 'r-2')).toMatchObject({ status: 'manual' });
  });

  it('deletes an accept failure or a parked order without touching the ledger', async () => {
    // Prepare: an order the legacy interface cannot add (click ids only), and a conversion refused
    // on the platform by hand, which the accept job then parks.
    await webhook('old-shop', {
      type: 'order',
      orderId: 'O-1',
      amount: '50.00',
      currency: 'EUR',
      clickIds: [CLICK],
      buyerIp: IP,
    });
    await order('shop', 'A-1');
    await fetch(`${stack.platformUrl}/advertiser/conversions.refuse`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.sandbox?.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ program, id: onPlatform('A-1')?.id, reason: 'fraud' }),
    });
    await stack.runAccept();
    const orderMessage = await messageOf('O-1');
    const acceptMessage = await messageOf('A-1');
    expect(acceptMessage.eventType).toBe('ConversionAccept');
    const [orderBefore, acceptBefore] = await Promise.all([recordOf('O-1'), recordOf('A-1')]);

    // Act
    const first = await cli(['dlq', 'discard', orderMessage.messageId, '--yes']);
    const second = await cli(['dlq', 'discard', acceptMessage.messageId, '--yes']);

    // Assess
    expect(first.code, first.stderr).toBe(0);
    expect(second.code, second.stderr).toBe(0);
    expect(first.stdout).toContain('ledger unchanged');
    const left = (await dlqMessages()).map((m) => m.externalId);
    expect(left).not.toContain('O-1');
    expect(left).not.toContain('A-1');
    expect(await recordOf('O-1')).toEqual(orderBefore);
    expect(await recordOf('A-1')).toEqual(acceptBefore);
  });

  it("an order's message parked applying a refund held for it (legacy): discarding it records that refund settled by hand, the accept job accepts, a new delivery of the order parks nothing", async () => {
    // Prepare
    const parked = await parkedWithHeldRefund('H-1');
    const before = await stack.runAccept();
    expect(before.items.find((i) => i.externalId === 'H-1')).toMatchObject({ result: 'held' });

    // Act
    const discarded = await cli(['dlq', 'discard', parked.messageId, '--yes']);

    // Assess
    expect(discarded.code, discarded.stderr).toBe(0);
    expect(discarded.stdout).toContain(`discarded ${parked.messageId} (OrderPlaced of order H-1)`);
    expect(discarded.stdout).toMatch(/refund r-held of order H-1: recorded as settled by hand/);
    expect(await refundIn('H-1', 'r-held')).toMatchObject({
      status: 'manual',
      outcome: expect.stringMatching(/^settled by hand by an operator \(connector dlq discard, /),
    });
    expect((await recordOf('H-1'))?.unconfirmedSend).toBeUndefined();
    const after = await stack.runAccept();
    expect(after.items.find((i) => i.externalId === 'H-1')).toMatchObject({ result: 'accepted' });
    const status = await cli(['status', 'H-1', '--source', 'old-shop']);
    expect(status.stdout).toMatch(/r-held\s+shop\s+EUR 10\.00\s+manual/);
    expect(status.stdout).not.toMatch(/refunds? pending/);
    // The shop sends the order again (a resend, a backfill): nothing is left for it to apply.
    const version = (await recordOf('H-1'))?.version;
    await placeOnLegacy('H-1');
    expect((await dlqMessages()).map((m) => m.externalId)).not.toContain('H-1');
    expect((await recordOf('H-1'))?.version).toBe(version);
  });

  it("leaves pending a refund whose own message is parked beside the order's, and says which refunds it settles (prompt, --json)", async () => {
    // Prepare: after the order's message was parked, refund r-own came and was parked on its own.
    const parked = await parkedWithHeldRefund('H-2');
    await partialRefund('old-shop', 'H-2', 'r-own', '5.00');
    expect(await refundIn('H-2', 'r-own')).toMatchObject({ status: 'pending', unconfirmedSend: true });

    // Act
    const discarded = await cli(['dlq', 'discard', parked.messageId, '--json'], 'y\n');

    // Assess
    expect(discarded.code, discarded.stderr).toBe(0);
    expect(discarded.stderr).toContain('refund r-held of order H-2');
    expect(discarded.stderr).toMatch(/refund r-own of order H-2 stays pending/);
    expect(JSON.parse(discarded.stdout)).toMatchObject({
      discarded: { messageId: parked.messageId, externalId: 'H-2', eventType: 'OrderPlaced' },
      ledger: {
        settled: true,
        program,
        externalId: 'H-2',
        refundIds: ['r-held'],
        status: 'manual',
        stillPending: ['r-own'],
      },
    });
    expect(await refundIn('H-2', 'r-held')).toMatchObject({ status: 'manual' });
    expect(await refundIn('H-2', 'r-own')).toMatchObject({ status: 'pending' });
    // r-own's own message is next in the order's group, and settles it when discarded.
    const own = await messageOf('H-2');
    expect(own.eventType).toBe('OrderRefunded');
    const second = await cli(['dlq', 'discard', own.messageId, '--yes']);
    expect(second.stdout).toMatch(/refund r-own of order H-2: recorded as settled by hand/);
    expect(await refundIn('H-2', 'r-own')).toMatchObject({ status: 'manual' });
  });

  it('says when the message is not reachable now (behind another of its order) and when it is unknown', async () => {
    // Prepare: two messages of one order's group; the FIFO DLQ hands out the first one only.
    const group = messageGroupId(program, 'F-1');
    const failures = new SqsFailureQueue(
      stack.emulators.sqs,
      stack.emulators.queueUrl,
      stack.emulators.dlqUrl,
    );
    const body = (refundId: string) =>
      JSON.stringify({
        type: 'OrderRefunded',
        eventId: `finance:${refundId}`,
        source: 'shop',
        platform: 'finance',
        externalId: 'F-1',
        receivedAt: new Date().toISOString(),
        refundId,
        full: true,
        origin: 'finance',
      });
    await failures.park(
      { body: body('rf-1'), groupId: group, deduplicationId: 'discard-f1-1' },
      {
        failureClass: 'permanent',
        reason: 'first',
        attempts: '1',
        firstFailureAt: new Date().toISOString(),
        lastFailureAt: new Date().toISOString(),
        eventType: 'OrderRefunded',
        externalId: 'F-1',
      },
    );
    const second = await stack.emulators.sqs.send(
      new SendMessageCommand({
        QueueUrl: stack.emulators.dlqUrl,
        MessageBody: body('rf-2'),
        MessageGroupId: group,
        MessageDeduplicationId: 'discard-f1-2',
      }),
    );

    // Act
    const behind = await cli(['dlq', 'discard', second.MessageId ?? '', '--yes']);
    const unknown = await cli(['dlq', 'discard', 'no-such-message', '--yes']);

    // Assess
    expect(behind.code).toBe(1);
    expect(behind.stderr).toMatch(/not reachable now/);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('message no-such-message is not in the DLQ');
    expect((await dlqMessages()).filter((m) => m.externalId === 'F-1')).toHaveLength(1);
  });

  it('dlq discard --help says what it deletes, what it records and how to confirm', async () => {
    const help = await runCli(['dlq', 'discard', '--help'], { cwd: '/' });
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/<messageId>/);
    expect(help.stdout).toMatch(/--yes/);
    expect(help.stdout).toMatch(/--json/);
    expect(help.stdout).toMatch(/settled by hand/);
    expect(help.stdout).toMatch(/connector dlq discard/);
  });
});

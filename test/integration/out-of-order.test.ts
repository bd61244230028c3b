import { randomUUID } from 'node:crypto';
import { DeleteMessageCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { PermanentError } from '../../shared/errors.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { messageGroupId } from '../../shared/queueing.ts';
import { sandboxConversions } from '../support/sandbox.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

const CLICK = 'a1b2c3d4e5f60718293a4b5c';

let stack: LocalStack;
/** Order ids whose next Conversion Add fails for good (a platform refusal), once each. */
const failNextAdd = new Set<string>();

beforeAll(async () => {
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0 },
    visibilityBaseSeconds: 1,
    wrapBackend: (backend) => ({
      ...backend,
      add: (input, call) => {
        if (failNextAdd.delete(input.externalId)) {
          return Promise.reject(new PermanentError('unknown affiliate tracking id', { status: 400 }));
        }
        return backend.add(input, call);
      },
      find: (...args) => backend.find(...args),
      refuse: (...args) => backend.refuse(...args),
      updateAmount: (...args) => backend.updateAmount(...args),
    }),
  });
});
afterAll(async () => {
  await stack?.close();
});

const secret = () => stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '';
const program = () => stack.sources.get('generic')?.program ?? '';
const conversionsOf = (externalId: string) => sandboxConversions(stack, externalId);

async function send(body: Record<string, unknown>): Promise<void> {
  const answer = await post(
    `${stack.url}/webhooks/generic`,
    genericWebhook(JSON.stringify({ eventId: randomUUID(), ...body }), secret()),
  );
  expect(answer.status).toBe(202);
}

const order = (orderId: string, amount = '40.00') =>
  send({ type: 'order', orderId, amount, currency: 'EUR', clickIds: [CLICK], buyerIp: '198.51.100.4' });
const refund = (orderId: string, refundId: string, amount: string) =>
  send({ type: 'refund', orderId, refundId, amount, currency: 'EUR' });

function dlqCount(): number {
  const c = stack.emulators.counts(stack.emulators.dlqName);
  return c.ready + c.inflight + c.delayed;
}

describe('a refund or cancellation that arrives before its order', () => {
  it('holds 20 refunds that came first and applies each when its order arrives, with nothing parked', async () => {
    const ids = Array.from({ length: 20 }, (_, i) => `early-${i}`);

    await Promise.all(ids.map((id) => refund(id, `r-${id}`, '15.00')));
    await stack.waitForIdle();
    const held = await stack.ledger.get(ledgerKey(program(), 'early-0'));
    expect(held?.state).toBe('awaiting');
    expect(held?.refunds['r-early-0']).toMatchObject({ status: 'pending', amount: 1_500 });
    await Promise.all(ids.map((id) => order(id)));
    await stack.waitForIdle();

    const wrong = ids.filter((id) => {
      const found = conversionsOf(id);
      return found.length !== 1 || found[0]?.amount !== 2_500;
    });
    expect(wrong).toEqual([]);
    expect(dlqCount()).toBe(0);
    const record = await stack.ledger.get(ledgerKey(program(), 'early-7'));
    expect(record).toMatchObject({ state: 'added', originalAmount: 4_000, currentAmount: 2_500 });
    expect(record?.refunds['r-early-7']).toMatchObject({ status: 'applied', resultingAmount: 2_500 });
  });

  it('never adds an order whose cancellation came first', async () => {
    await send({ type: 'cancel', orderId: 'cancelled-first', reason: 'buyer changed their mind' });
    await stack.waitForIdle();
    await order('cancelled-first');
    await stack.waitForIdle();

    expect(conversionsOf('cancelled-first')).toEqual([]);
    expect(await stack.ledger.get(ledgerKey(program(), 'cancelled-first'))).toMatchObject({
      state: 'skipped',
      skipReason: expect.stringMatching(/cancelled before the order arrived/),
    });
    expect(dlqCount()).toBe(0);
  });

  it('applies a refund queued behind a parked order when the order is replayed, without a second replay', async () => {
    failNextAdd.add('replayed');
    await order('replayed', '50.00');
    await stack.waitForIdle();
    expect(dlqCount()).toBe(1);
    await refund('replayed', 'r-replayed', '20.00');
    await stack.waitForIdle();
    expect(dlqCount()).toBe(1);

    // The operator replays what the DLQ holds: the order only.
    const parked = await stack.emulators.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: stack.emulators.dlqUrl, MaxNumberOfMessages: 10 }),
    );
    expect(parked.Messages).toHaveLength(1);
    const [message] = parked.Messages ?? [];
    await stack.emulators.sqs.send(
      new SendMessageCommand({
        QueueUrl: stack.emulators.queueUrl,
        MessageBody: message?.Body ?? '',
        MessageGroupId: messageGroupId(program(), 'replayed'),
        MessageDeduplicationId: randomUUID(),
      }),
    );
    await stack.emulators.sqs.send(
      new DeleteMessageCommand({
        QueueUrl: stack.emulators.dlqUrl,
        ReceiptHandle: message?.ReceiptHandle ?? '',
      }),
    );
    await stack.waitForIdle();

    expect(conversionsOf('replayed').map((c) => c.amount)).toEqual([3_000]);
    expect(dlqCount()).toBe(0);
  });
});

describe('a retried add', () => {
  it('sends what the ledger records: a corrected order after a parked one, then a refund, agree everywhere', async () => {
    failNextAdd.add('corrected');
    await send({
      type: 'order',
      orderId: 'corrected',
      amount: '10.00',
      currency: 'EUR',
      clickIds: [CLICK],
      buyerIp: '198.51.100.4',
    });
    await stack.waitForIdle();
    expect(await stack.ledger.get(ledgerKey(program(), 'corrected'))).toMatchObject({ state: 'failed' });

    await send({
      type: 'order',
      orderId: 'corrected',
      amount: '99.00',
      currency: 'USD',
      clickIds: [CLICK],
      buyerIp: '198.51.100.4',
    });
    await stack.waitForIdle();
    await send({ type: 'refund', orderId: 'corrected', refundId: 'r-c', amount: '94.00', currency: 'USD' });
    await stack.waitForIdle();

    const [conversion] = conversionsOf('corrected');
    expect(conversionsOf('corrected')).toHaveLength(1);
    expect(conversion).toMatchObject({ amount: 500, currency: 'USD' });
    expect(await stack.ledger.get(ledgerKey(program(), 'corrected'))).toMatchObject({
      state: 'added',
      originalAmount: 9_900,
      currentAmount: 500,
      currency: 'USD',
      refunds: { 'r-c': { status: 'applied', resultingAmount: 500 } },
    });
  });
});

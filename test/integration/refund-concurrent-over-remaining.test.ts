import { randomUUID } from 'node:crypto';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRefundsDeps, makeHandler } from '../../functions/refunds.ts';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { EventQueue } from '../../shared/ports.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { onlyConversion } from '../support/sandbox.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

/**
 * Partial finance refunds of one order sent at the same time, which fit what remains alone but not
 * together. Each request was judged against the ledger alone, so both were answered 202; the worker
 * then saw refunds reaching the order amount and refused the whole conversion, which cannot be
 * undone. The door reserves each partial refund in the ledger before it queues it, so the second
 * request sees the first. Real handlers on dynalite and fauxqs, the worker and the sandbox.
 */

const CLICK = 'a1b2c3d4e5f60718293a4b5c';

let stack: LocalStack;

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, visibilityBaseSeconds: 1 });
});
afterAll(async () => {
  await stack?.close();
});

/** A EUR 50.00 order through the generic source, added as a conversion. */
async function placeOrder(orderId: string): Promise<void> {
  const body = JSON.stringify({
    type: 'order',
    eventId: randomUUID(),
    orderId,
    amount: '50.00',
    currency: 'EUR',
    clickIds: [CLICK],
    buyerIp: '203.0.113.7',
  });
  const answer = await post(
    `${stack.url}/webhooks/generic`,
    genericWebhook(body, stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? ''),
  );
  expect(answer.status).toBe(202);
  await stack.waitForIdle();
  expect(onlyConversion(stack, orderId)).toMatchObject({ status: 'pending', amount: 5_000 });
}

/** A generic shop's refund webhook for its order. */
async function shopRefund(orderId: string, refund: Record<string, unknown>): Promise<void> {
  const body = JSON.stringify({ type: 'refund', orderId, eventId: randomUUID(), ...refund });
  const answer = await post(
    `${stack.url}/webhooks/generic`,
    genericWebhook(body, stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? ''),
  );
  expect(answer.status).toBe(202);
}

async function financeRefund(body: Record<string, unknown>) {
  const res = await fetch(`${stack.url}/refunds`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': stack.secrets['FINANCE_API_KEY'] ?? '' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('POST /refunds: partial refunds of one order sent at the same time', () => {
  it('queues the one that fits and answers 400 naming amount to the other, and the conversion is lowered, not refused', async () => {
    // Prepare
    await placeOrder('7101');
    // Act: EUR 30.00 twice, under two refund ids, at once: each fits the EUR 50.00 alone
    const answers = await Promise.all(
      ['RF-7101-a', 'RF-7101-b'].map((refundId) =>
        financeRefund({ externalId: '7101', refundId, amount: '30.00' }),
      ),
    );
    await stack.waitForIdle();
    // Assess
    expect(answers.map((a) => a.status).sort()).toEqual([202, 400]);
    const refused = answers.find((a) => a.status === 400);
    expect(refused?.body).toMatchObject({ error: 'bad_request', field: 'amount' });
    expect(refused?.body['message']).toMatch(
      /^EUR 30\.00 is more than is left of order 7101: EUR 20\.00 remains after refund RF-7101-[ab], requested and not yet applied \(EUR 30\.00\)\. A partial refund past it would refuse the conversion/,
    );
    expect(onlyConversion(stack, '7101')).toMatchObject({ status: 'pending', amount: 2_000 });
  });
});

/**
 * The refunds handler wired by `buildRefundsDeps` to the stack's dynalite and fauxqs, as the local
 * stack wires it, with a queue whose first `failures` sends fail as an unreachable SQS does.
 */
function refundsHandlerWithQueueDown(failures: number) {
  const deps = buildRefundsDeps({
    sqs: stack.emulators.sqs,
    dynamo: stack.emulators.dynamo,
    secrets: new EnvSecretStore(stack.secrets),
    env: {
      SOURCES: JSON.stringify([...stack.sources.values()]),
      QUEUE_URL: stack.emulators.queueUrl,
      LEDGER_TABLE: stack.emulators.tableName,
      FINANCE_API_KEY_SECRET: 'FINANCE_API_KEY',
    },
  });
  let left = failures;
  const queue: EventQueue = {
    send: async (event, options) => {
      if (left-- > 0) throw Object.assign(new Error('connect ECONNREFUSED'), { name: 'TimeoutError' });
      return deps.queue.send(event, options);
    },
  };
  const handler = makeHandler({ ...deps, queue });
  return async (body: Record<string, unknown>) => {
    const result = await handler({
      version: '2.0',
      routeKey: 'POST /refunds',
      rawPath: '/refunds',
      rawQueryString: '',
      headers: { 'content-type': 'application/json', 'x-api-key': stack.secrets['FINANCE_API_KEY'] ?? '' },
      body: JSON.stringify(body),
      isBase64Encoded: false,
      requestContext: {} as APIGatewayProxyEventV2['requestContext'],
    } as APIGatewayProxyEventV2);
    return { status: result.statusCode, body: JSON.parse(result.body ?? '{}') as Record<string, unknown> };
  };
}

describe('POST /refunds: what a reservation counts, and for how long', () => {
  it('settles many requests at once: exactly those that fit are queued', async () => {
    // Prepare
    await placeOrder('7102');
    // Act: five refunds of EUR 15.00 at once against EUR 50.00
    const answers = await Promise.all(
      [1, 2, 3, 4, 5].map((n) =>
        financeRefund({ externalId: '7102', refundId: `RF-7102-${n}`, amount: '15.00' }),
      ),
    );
    await stack.waitForIdle();
    // Assess
    expect(answers.map((a) => a.status).sort()).toEqual([202, 202, 202, 400, 400]);
    expect(onlyConversion(stack, '7102')).toMatchObject({ status: 'pending', amount: 500 });
  });

  it('answers 202 again to a refund resent with its refund id, which counts once, queued or recorded', async () => {
    // Prepare
    await placeOrder('7103');
    await stack.stopPolling();
    // Act: a lost answer, resent while the refund is only reserved, then after the worker recorded it
    const first = await financeRefund({ externalId: '7103', refundId: 'RF-7103-1', amount: '30.00' });
    const resent = await financeRefund({ externalId: '7103', refundId: 'RF-7103-1', amount: '30.00' });
    const past = await financeRefund({ externalId: '7103', refundId: 'RF-7103-2', amount: '20.01' });
    const fits = await financeRefund({ externalId: '7103', refundId: 'RF-7103-2', amount: '15.00' });
    stack.startPolling();
    await stack.waitForIdle();
    const resentAfter = await financeRefund({ externalId: '7103', refundId: 'RF-7103-1', amount: '30.00' });
    const pastAfter = await financeRefund({ externalId: '7103', refundId: 'RF-7103-3', amount: '5.01' });
    await stack.waitForIdle();
    // Assess
    expect([first.status, resent.status, past.status, fits.status]).toEqual([202, 202, 400, 202]);
    expect(past.body['message']).toContain(
      'EUR 20.01 is more than is left of order 7103: EUR 20.00 remains after refund RF-7103-1, requested and not yet applied (EUR 30.00)',
    );
    expect(resentAfter.status).toBe(202);
    expect(pastAfter.status).toBe(400);
    expect(pastAfter.body['message']).toContain(
      'EUR 5.01 is more than is left of order 7103: EUR 5.00 remains. ',
    );
    expect(onlyConversion(stack, '7103')).toMatchObject({ status: 'pending', amount: 500 });
  });

  it('holds the amount of a refund whose send failed (503) for its retry, which is queued, not refused by its own reservation', async () => {
    // Prepare
    await placeOrder('7104');
    const refund = refundsHandlerWithQueueDown(1);
    await stack.stopPolling();
    // Act
    const failed = await refund({ externalId: '7104', refundId: 'RF-7104-1', amount: '30.00' });
    // Another refund meanwhile: the failed send may have reached SQS, so the reservation counts.
    const other = await refund({ externalId: '7104', refundId: 'RF-7104-2', amount: '30.00' });
    const retried = await refund({ externalId: '7104', refundId: 'RF-7104-1', amount: '30.00' });
    stack.startPolling();
    await stack.waitForIdle();
    // Assess
    expect(failed).toMatchObject({ status: 503, body: { error: 'unavailable' } });
    expect(other).toMatchObject({ status: 400, body: { field: 'amount' } });
    expect(other.body['message']).toContain('EUR 20.00 remains after refund RF-7104-1');
    expect(retried.status).toBe(202);
    expect(onlyConversion(stack, '7104')).toMatchObject({ status: 'pending', amount: 2_000 });
  });

  it('counts a shop refund recorded after a finance refund was reserved once, beside it', async () => {
    // Prepare
    await placeOrder('7105');
    await stack.stopPolling();
    const finance = await financeRefund({ externalId: '7105', refundId: 'RF-7105-1', amount: '20.00' });
    await shopRefund('7105', { refundId: 'shop-7105-1', amount: '20.00', currency: 'EUR' });
    stack.startPolling();
    await stack.waitForIdle();
    // Act
    const past = await financeRefund({ externalId: '7105', refundId: 'RF-7105-2', amount: '10.01' });
    // Assess: EUR 50.00 − 20.00 (finance, recorded, its reservation no longer counted) − 20.00 (shop)
    expect(finance.status).toBe(202);
    expect(past).toMatchObject({ status: 400, body: { field: 'amount' } });
    expect(past.body['message']).toContain(
      'EUR 10.01 is more than is left of order 7105: EUR 10.00 remains. ',
    );
    const record = await stack.ledger.get(ledgerKey(stack.sources.get('generic')?.program ?? '', '7105'));
    expect(Object.keys(record?.refunds ?? {}).sort()).toEqual(['RF-7105-1', 'shop-7105-1']);
    expect(onlyConversion(stack, '7105')).toMatchObject({ status: 'pending', amount: 1_000 });
  });
});

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, describe, expect, it } from 'vitest';
import { LOCAL_AWS, LOCAL_SECRETS } from '../../local/defaults.ts';
import { type LocalServing, type LocalStart, spawnLocalStart, untilServing } from '../support/local-start.ts';
import { until } from '../support/until.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

/**
 * `npm start` with LOCAL_DATA_DIR, killed with SIGKILL while it drains, then started again: every
 * order answered 202 ends as exactly one conversion, without anything sent again.
 */
const ORDERS = 300;
const CLICK = 'a1b2c3d4e5f6a7b8c9d0e1f2';

const dataDir = mkdtempSync(join(tmpdir(), 'connector-data-'));
const cwd = mkdtempSync(join(tmpdir(), 'connector-cwd-'));
const children: LocalStart[] = [];
afterAll(() => {
  for (const c of children) c.child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(cwd, { recursive: true, force: true });
});

async function start(env: Record<string, string>): Promise<LocalServing> {
  const running = spawnLocalStart(cwd, env);
  children.push(running);
  return untilServing(running);
}

async function conversions(platformUrl: string): Promise<{ externalId: string }[]> {
  const res = await fetch(`${platformUrl}/_sandbox/conversions`);
  return ((await res.json()) as { conversions: { externalId: string }[] }).conversions;
}

async function queueLeft(): Promise<number> {
  const state = JSON.parse(readFileSync(join(cwd, '.local-stack.json'), 'utf8')) as {
    sqsEndpoint: string;
    queueUrl: string;
    dlqUrl: string;
  };
  const sqs = new SQSClient({ ...LOCAL_AWS, endpoint: state.sqsEndpoint });
  try {
    let total = 0;
    for (const url of [state.queueUrl, state.dlqUrl]) {
      const out = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }));
      const a = out.Attributes ?? {};
      total +=
        Number(a['ApproximateNumberOfMessages'] ?? 0) +
        Number(a['ApproximateNumberOfMessagesNotVisible'] ?? 0) +
        Number(a['ApproximateNumberOfMessagesDelayed'] ?? 0);
    }
    return total;
  } finally {
    sqs.destroy();
  }
}

/**
 * `until`'s bound here: 300 orders drain through adds the sandbox slows to 150 ms. Each read asks
 * the stack that drains (two SQS calls, or the whole list of conversions), so it reads every 100 ms.
 */
const DRAINING = { timeoutMs: 90_000, everyMs: 100 };

function order(i: number): string {
  return JSON.stringify({
    type: 'order',
    eventId: `crash-${i}`,
    orderId: `crash-${i}`,
    amount: '19.90',
    currency: 'EUR',
    clickIds: [CLICK],
    buyerIp: '198.51.100.4',
  });
}

describe('npm start with LOCAL_DATA_DIR killed with SIGKILL mid-drain', () => {
  it('turns every order answered 202 into exactly one conversion after a restart, nothing resent', async () => {
    const secret = LOCAL_SECRETS.GENERIC_WEBHOOK_SECRET;
    const first = await start({ LOCAL_DATA_DIR: dataDir });
    // Slow adds, so that the kill finds orders queued, in flight and half-added.
    await fetch(`${first.platformUrl}/_sandbox/faults`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ latencyMs: 150, routes: ['/advertiser/conversions.add'] }),
    });
    const statuses: number[] = [];
    for (let i = 0; i < ORDERS; i++) {
      statuses.push((await post(`${first.url}/webhooks/generic`, genericWebhook(order(i), secret))).status);
    }
    expect(statuses.filter((s) => s === 202)).toHaveLength(ORDERS);
    await until(
      () => conversions(first.platformUrl),
      (c) => c.length > 0,
      'a first conversion',
      DRAINING,
    );
    first.child.kill('SIGKILL');
    expect((await first.exited).signal).toBe('SIGKILL');
    const atKill = (await conversions(first.platformUrl).catch(() => undefined))?.length;
    expect(atKill).toBeUndefined(); // the sandbox died with it

    const second = await start({ LOCAL_DATA_DIR: dataDir });
    const before = await conversions(second.platformUrl);
    expect(before.length).toBeGreaterThan(0);
    expect(before.length).toBeLessThan(ORDERS);

    await until(queueLeft, (n) => n === 0, 'the queues to drain', DRAINING);
    // fauxqs forgets the FIFO deduplication window on a restart: a shop's retry is queued again, and
    // the ledger makes it a no-op.
    expect((await post(`${second.url}/webhooks/generic`, genericWebhook(order(0), secret))).status).toBe(202);
    await until(queueLeft, (n) => n === 0, 'the resent order to be handled', DRAINING);
    const after = await conversions(second.platformUrl);
    const byOrder = new Map<string, number>();
    for (const c of after) byOrder.set(c.externalId, (byOrder.get(c.externalId) ?? 0) + 1);
    expect(byOrder.size).toBe(ORDERS);
    expect([...byOrder.values()].every((n) => n === 1)).toBe(true);
  }, 180_000);

  it('says in its banner, without LOCAL_DATA_DIR, that a crash loses queued work', async () => {
    // Act
    const memory = await start({});
    memory.child.kill('SIGKILL');
    await memory.exited;
    // Assess
    expect(memory.output()).toContain('in memory: stopping or a crash loses queued work and the ledger');
    expect(memory.output()).not.toContain('survive a crash');
  });
});

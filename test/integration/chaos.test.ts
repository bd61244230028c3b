import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import type { Ledger } from '../../shared/ports.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

const ORDERS = 60;
const REFUNDED = 20;
const CLICK = 'a1b2c3d4e5f60718293a4b5c';
const SEED = 20_261_122;
/** A refund for an order that is never placed: held in the ledger for its order, never in the DLQ. */
const ORPHAN = 'chaos-never-placed';

/** mulberry32: a seeded PRNG so the delivery order, and so the whole run, repeats. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function shuffle<T>(items: T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

interface Delivery {
  readonly orderId: string;
  readonly kind: 'order' | 'refund';
  readonly body: string;
}

const orderId = (i: number) => `chaos-${i}`;
/** 10.01 … 69.60 in minor units: every order a distinct amount, so a mix-up shows. */
const orderAmount = (i: number) => 1_001 + i * 101;
const refundAmount = (i: number) => 100 + i * 7;
const decimal = (minor: number) => `${Math.trunc(minor / 100)}.${String(minor % 100).padStart(2, '0')}`;

/**
 * Each webhook twice: the even ones as the same bytes (a platform retry, deduplicated by SQS), the
 * odd ones under a new event id (a platform that re-sends as a new event: only the ledger dedupes).
 */
function deliveries(): Delivery[] {
  const out: Delivery[] = [];
  const twice = (id: string, kind: Delivery['kind'], fields: Record<string, unknown>, n: number) => {
    const body = (eventId: string) => JSON.stringify({ type: kind, eventId, orderId: id, ...fields });
    out.push({ orderId: id, kind, body: body(`${id}-${kind}-a`) });
    out.push({ orderId: id, kind, body: body(n % 2 === 0 ? `${id}-${kind}-a` : `${id}-${kind}-b`) });
  };
  for (let i = 0; i < ORDERS; i++) {
    twice(
      orderId(i),
      'order',
      { amount: decimal(orderAmount(i)), currency: 'EUR', clickIds: [CLICK], buyerIp: '198.51.100.4' },
      i,
    );
  }
  for (let i = 0; i < REFUNDED; i++) {
    twice(
      orderId(i * 3),
      'refund',
      { refundId: `r-${i * 3}`, amount: decimal(refundAmount(i * 3)), currency: 'EUR' },
      i,
    );
  }
  return out;
}

/**
 * Errors, hangs, and late writes: requests the platform leaves unanswered past the client's timeout
 * (CLIENT_TIMEOUT_MS) yet carries out 6 s later, past the 5 s settle period (an add recorded after the
 * worker gave up on it). A hang lasts until the client gives up (hangMs only bounds it).
 */
const FAULTS = { errorRate: 0.1, hangRate: 0.05, hangMs: 10_000, lateWriteRate: 0.05, lateWriteMs: 6_000 };
/**
 * Only the sandbox's hangs may reach it. An answer that is merely slow (tens of ms on an idle machine,
 * up to 830 ms at load average 12 on two cores, where 38 requests outlasted the 300 ms this was,
 * against 9 to 12 hangs) would be one more unclear add, verified for 8 s before it is sent again, and
 * one more receive towards the DLQ, so the run would depend on how busy the machine is. Below 2.5 s it
 * keeps the settle period at its 5 s floor, which the late writes must come after.
 */
const CLIENT_TIMEOUT_MS = 1_500;

let stack: LocalStack;
/**
 * Ledger writes that "kill" the worker: `added` hits the write after conversions.add (or the one
 * that records a received refund), `refund` the write after conversions.update, so the platform has
 * changed and the ledger does not know.
 */
const kills = { added: 0, refund: 0 };
let addedWrites = 0;
let refundWrites = 0;

beforeAll(async () => {
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0, faults: { ...FAULTS, seed: SEED } },
    pollers: 3,
    leaseMs: 1_500,
    // An add cut by the client's timeout is verified for 8 s (10 minutes in production) before it is
    // sent again; the sandbox's hangs never record.
    verifyMs: 8_000,
    visibilityBaseSeconds: 1,
    client: { timeoutMs: CLIENT_TIMEOUT_MS, baseDelayMs: 20, maxDelayMs: 400 },
    // The worker hides what it gives back itself; the queue's own timeout only ends a batch that
    // outlives it, which a loaded machine's batches did at 3 s: delivered again while in hand or done.
    emulators: { maxReceiveCount: 10, visibilityTimeoutSeconds: 30 },
    wrapLedger: (ledger: Ledger): Ledger => ({
      get: (key) => ledger.get(key),
      create: (record) => ledger.create(record),
      list: (program) => ledger.list(program),
      update: async (record: OrderRecord) => {
        const appliedRefund = Object.values(record.refunds).some((r) => r.status === 'applied');
        // The write that records an add (the platform has the conversion, the ledger not yet).
        if (record.state === 'added' && !appliedRefund && (await ledger.get(record.key))?.state !== 'added') {
          addedWrites += 1;
          if (addedWrites % 9 === 0 && kills.added < 5) {
            kills.added += 1;
            throw new Error('worker killed before its ledger write');
          }
        }
        if (appliedRefund) {
          refundWrites += 1;
          if (refundWrites % 4 === 0 && kills.refund < 3) {
            kills.refund += 1;
            throw new Error('worker killed after conversions.update');
          }
        }
        return ledger.update(record);
      },
    }),
  });
});
afterAll(async () => {
  await stack?.close();
});

async function dlqMessages() {
  const seen = new Map<
    string,
    { body: Record<string, unknown>; attributes: Record<string, string | undefined> }
  >();
  for (let round = 0; round < 5; round++) {
    const out = await stack.emulators.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: stack.emulators.dlqUrl,
        MaxNumberOfMessages: 10,
        MessageAttributeNames: ['All'],
        VisibilityTimeout: 30,
      }),
    );
    for (const m of out.Messages ?? []) {
      seen.set(m.MessageId ?? '', {
        body: JSON.parse(m.Body ?? '{}') as Record<string, unknown>,
        attributes: Object.fromEntries(
          Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, v.StringValue]),
        ),
      });
    }
    if ((out.Messages ?? []).length === 0) break;
  }
  return [...seen.values()];
}

describe('the whole pipeline under faults, duplicates, reordering and killed workers', () => {
  it('ends with exactly one right conversion per order and every refund applied once', async () => {
    const secret = stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '';
    const random = prng(SEED);
    // Refunds may come before their orders (shops do not deliver in order): the ledger holds them.
    const sequence = shuffle(deliveries(), random);
    const orphan = JSON.stringify({
      type: 'refund',
      eventId: 'orphan',
      orderId: ORPHAN,
      refundId: 'o1',
      amount: '1.00',
      currency: 'EUR',
    });
    sequence.splice(Math.floor(sequence.length / 2), 0, { orderId: ORPHAN, kind: 'refund', body: orphan });
    const statuses: number[] = [];
    let burstAt = 0;

    for (const [n, d] of sequence.entries()) {
      statuses.push((await post(`${stack.url}/webhooks/generic`, genericWebhook(d.body, secret))).status);
      if (n % 40 === 20) {
        // A 429 burst on top of the running faults (setFaults restarts the seeded draws).
        burstAt += 1;
        stack.sandbox?.control.setFaults({
          ...FAULTS,
          seed: SEED + burstAt,
          burst429: 25,
          burstRetryAfterMs: 150,
        });
      }
      if (n % 50 === 49) {
        // Pollers stopped with batches in flight, then started again.
        await stack.stopPolling();
        stack.startPolling();
      }
    }
    // Done when the queue is empty (polled, no quiet period). The deadline only turns a stuck queue
    // into a failure that shows its counts: the drain takes 9 to 21 s, mostly the verification
    // windows of the unclear adds the seeded faults make.
    await stack.waitForIdle(60_000);

    expect(statuses.filter((s) => s !== 202)).toEqual([]);
    const conversions = stack.sandbox?.control.conversions() ?? [];
    const byOrder = new Map<string, typeof conversions>();
    for (const c of conversions) byOrder.set(c.externalId, [...(byOrder.get(c.externalId) ?? []), c]);
    const wrong: string[] = [];
    for (let i = 0; i < ORDERS; i++) {
      const id = orderId(i);
      const found = byOrder.get(id) ?? [];
      const refunded = i % 3 === 0 && i / 3 < REFUNDED;
      const expected = refunded ? orderAmount(i) - refundAmount(i) : orderAmount(i);
      const [one] = found;
      if (found.length !== 1 || !one) {
        wrong.push(`${id}: ${found.length} conversions`);
        continue;
      }
      if (one.amount !== expected) wrong.push(`${id}: amount ${one.amount}, expected ${expected}`);
      const history = one.amountHistory.map((h) => h.amount);
      // Updates are absolute targets: a worker killed after the update, or an update the platform
      // carried out after the client's timeout, repeats the same amount; a refund counted twice would show as a
      // second, lower amount.
      // A refund that came first is subtracted in the add itself: no update at all.
      const historyOk = refunded ? history.every((a) => a === expected) : history.length === 0;
      if (!historyOk) wrong.push(`${id}: amountHistory ${JSON.stringify(history)}`);
    }
    expect(wrong).toEqual([]);
    expect(conversions).toHaveLength(ORDERS);
    expect(stack.emulators.counts(stack.emulators.queueName)).toEqual({ ready: 0, inflight: 0, delayed: 0 });
    expect(await dlqMessages()).toEqual([]);
    // The refund whose order never came waits in the ledger, where status, reconcile and the alarm see it.
    const held = await stack.ledger.get(ledgerKey(stack.sources.get('generic')?.program ?? '', ORPHAN));
    expect(held).toMatchObject({ state: 'awaiting', refunds: { o1: { status: 'pending' } } });
    const firstRefunds = sequence.filter(
      (d, n) =>
        d.kind === 'refund' &&
        !sequence.slice(0, n).some((o) => o.kind === 'order' && o.orderId === d.orderId),
    );
    expect(firstRefunds.length).toBeGreaterThan(3);
    // The chaos really happened.
    expect(kills).toEqual({ added: 5, refund: 3 });
    const calls = Object.values(stack.sandbox?.control.calls() ?? {});
    const byStatus = (status: string) => calls.reduce((sum, c) => sum + (c.byStatus[status] ?? 0), 0);
    expect(byStatus('429')).toBeGreaterThan(0);
    expect(byStatus('503')).toBeGreaterThan(0);
    expect(byStatus('hang')).toBeGreaterThan(0);
    // 120 s: the 241 signed webhooks, posted one after another, are CPU work (6.5 s alone, 37 s at load
    // average 12 on two cores), then the drain; neither is a claim of the test.
  }, 120_000);
});

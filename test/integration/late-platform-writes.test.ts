import type { SQSRecord } from 'aws-lambda';
import { afterEach, describe, expect, it } from 'vitest';
import { backendFor } from '../../functions/worker.ts';
import { DEFAULT_SEED, type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import { CurrentApiBackend } from '../../shared/affiliate/backend.ts';
import { AffiliateClient } from '../../shared/affiliate/client.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEventInput } from '../../shared/domain/events.ts';
import type { FailureQueue } from '../../shared/ports.ts';
import { type BatchDeps, processBatch } from '../../shared/worker/batch.ts';
import { settleMsFor } from '../../shared/worker/flow.ts';
import { FakeClock } from '../support/clock.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { fifoRecord } from '../support/sqs-records.ts';

/**
 * Issue 12, item 4, against the sandbox: the platform records an add minutes after the connector
 * gave up on it. The sandbox, the ledger and the worker share one fake clock, and the queue below
 * hands a message back after the visibility delay the worker asked for by advancing that clock, so
 * a write 240 s late costs no real time. Only the client's short timeout is waited for, for real.
 */

const START = Date.parse('2026-03-02T09:00:00.000Z');
const PROGRAM = DEFAULT_SEED.programs[0]!;
const SOURCE = SourceConfig.parse({
  id: 'shop',
  platform: 'shopify',
  program: PROGRAM,
  rule: DEFAULT_SEED.rules[0]!,
  secretRef: 'SHOP_SECRET',
});
const ADD_ROUTE = '/advertiser/conversions.add';
/** Short, so that a hung add gives up quickly in real time. */
const CLIENT_TIMEOUT_MS = 150;
const ORDERS = 4;
/** The queue's maxReceiveCount: a message received more often would go to the DLQ. */
const MAX_RECEIVES = 6;

let sandbox: RunningSandbox | undefined;
afterEach(async () => {
  await sandbox?.close();
  sandbox = undefined;
});

interface Message {
  readonly id: string;
  readonly event: ConnectorEventInput;
  receiveCount: number;
  visibleAt: number;
}

/** The SQS FIFO queue as the worker sees it: `delay` hides a message, which comes back after. */
class HidingQueue implements FailureQueue {
  readonly parked: string[] = [];
  readonly #byHandle = new Map<string, Message>();
  readonly #clock: FakeClock;

  constructor(clock: FakeClock) {
    this.#clock = clock;
  }

  record(message: Message): SQSRecord {
    message.receiveCount += 1;
    const receiptHandle = `rh-${message.id}-${message.receiveCount}`;
    this.#byHandle.set(receiptHandle, message);
    return sqsRecord(message, receiptHandle);
  }

  async park(message: { body: string }): Promise<void> {
    this.parked.push(message.body);
  }

  async delay(receiptHandle: string, seconds: number): Promise<void> {
    const message = this.#byHandle.get(receiptHandle);
    if (message) message.visibleAt = this.#clock.now() + seconds * 1_000;
  }
}

function orderPlaced(externalId: string): ConnectorEventInput {
  return {
    type: 'OrderPlaced',
    eventId: `evt-${externalId}`,
    source: SOURCE.id,
    platform: 'shopify',
    externalId,
    receivedAt: new Date(START - 60_000).toISOString(),
    amount: 2000,
    currency: 'EUR',
    clickIds: ['c1c1c1c1c1c1c1c1c1c1c1c1'],
    buyerIp: '203.0.113.7',
  };
}

function sqsRecord(message: Message, receiptHandle: string): SQSRecord {
  return fifoRecord(message.event, {
    messageId: message.id,
    receiptHandle,
    program: PROGRAM,
    sentAt: START - 60_000,
    receiveCount: message.receiveCount,
  });
}

/**
 * Places `ORDERS` orders while every add is held unanswered and recorded `lateMs` later; the faults
 * are lifted after the first receive, as a platform that recovers. Each message is received again
 * once the delay the worker hid it for has passed, until none is left; answers the conversions the
 * platform holds in the end, once every late write is due.
 */
async function scenario(lateMs: number, verifyMs: number) {
  const clock = new FakeClock({ start: START, whenIdle: 'wait' });
  sandbox = await startSandbox({
    port: 0,
    now: clock.now,
    faults: { lateWriteRate: 1, lateWriteMs: lateMs, routes: [ADD_ROUTE] },
  });
  const client = new AffiliateClient({
    baseUrl: sandbox.url,
    token: sandbox.token,
    timeoutMs: CLIENT_TIMEOUT_MS,
    now: clock.now,
    baseDelayMs: 10,
    maxDelayMs: 50,
  });
  const queue = new HidingQueue(clock);
  const deps: BatchDeps = {
    ledger: new MemoryLedger(clock.now),
    sources: new Map([[SOURCE.id, SOURCE]]),
    backendFor: backendFor({ current: new CurrentApiBackend(client) }),
    failures: queue,
    now: clock.now,
    workerId: 'worker-1',
    leaseMs: 60_000,
    settleMs: settleMsFor(CLIENT_TIMEOUT_MS),
    verifyMs,
    random: () => 0,
    sleep: clock.sleep,
  };

  let waiting: Message[] = Array.from({ length: ORDERS }, (_, i) => ({
    id: `m${i + 1}`,
    event: orderPlaced(`${1001 + i}`),
    receiveCount: 0,
    visibleAt: START,
  }));
  let receives = 0;
  while (waiting.length > 0) {
    const at = Math.min(...waiting.map((m) => m.visibleAt));
    clock.time = Math.max(clock.time, at);
    const due = waiting.filter((m) => m.visibleAt <= clock.time);
    if (due.some((m) => m.receiveCount >= MAX_RECEIVES)) {
      throw new Error(`received ${MAX_RECEIVES} times: it would be redriven to the DLQ`);
    }
    const answer = await clock.run(
      processBatch(
        deps,
        due.map((m) => queue.record(m)),
        clock.now() + 60_000,
      ),
    );
    receives += 1;
    if (receives === 1) sandbox.control.setFaults({});
    const failed = new Set(answer.batchItemFailures.map((f) => f.itemIdentifier));
    waiting = waiting.filter((m) => !due.includes(m) || failed.has(m.id));
  }

  // Every late write is due by now: whatever the platform would still record is in the count.
  clock.time += lateMs;
  const perOrder = new Map<string, number>();
  for (const c of sandbox.control.conversions()) {
    perOrder.set(c.externalId, (perOrder.get(c.externalId) ?? 0) + 1);
  }
  return { perOrder, parked: queue.parked, adds: sandbox.control.calls()[ADD_ROUTE] };
}

describe('late platform writes against the sandbox (issue 12, item 4)', () => {
  it.each([7_000, 20_000, 60_000, 240_000])(
    'an add recorded %i ms late: exactly one conversion per order',
    async (lateMs) => {
      // Prepare + Act: the default verification window (10 minutes)
      const { perOrder, parked, adds } = await scenario(lateMs, 600_000);

      // Assess: one add per order, adopted once the platform shows it; nothing to the DLQ
      expect(parked).toEqual([]);
      expect(adds?.total).toBe(ORDERS);
      expect([...perOrder.keys()].sort()).toEqual(['1001', '1002', '1003', '1004']);
      expect([...perOrder.values()]).toEqual(Array(ORDERS).fill(1));
    },
  );

  it('without a verification window the same scenario doubles every order (the test can fail)', async () => {
    // Prepare + Act: the rule off, the add recorded 20 s late (the report)
    const { perOrder } = await scenario(20_000, 0);

    // Assess
    expect([...perOrder.values()]).toEqual(Array(ORDERS).fill(2));
  });
});

import type { SQSRecord } from 'aws-lambda';
import { describe, expect, it } from 'vitest';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import type { ConversionBackend, Ledger } from '../../shared/ports.ts';
import { type BatchDeps, processBatch, type RecordReport } from '../../shared/worker/batch.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { KillableLedger } from '../support/killable-ledger.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';
import { fifoRecord } from '../support/sqs-records.ts';
import { holdUpdates, KEY, NOW, PROGRAM, SOURCE, workersOf } from '../support/stale-send.ts';

/**
 * docs/exactly-once.md, rule 4: a mark of sends left unconfirmed names the delivery that wrote it and
 * holds for LEASE_MS (the worker's default, 120 s) after its write. A delivery of the same message
 * that comes while that hold lasts cannot tell a dead worker from one still sending: locally after a
 * crash (the queue's visibility timeout is 30 s, infra/local/emulators.ts), after a transient failure
 * given back for a short backoff and taken by another instance, or a batch the event source invoked
 * late. What matters is that once the queue is quiet the platform is at the ledger's amount and no
 * mark is left for ever on a live conversion (a later duplicate would send again, the accept job
 * would look the order up).
 */

const LEASE_MS = 120_000;
/** The local queue's visibility timeout (infra/local/emulators.ts). */
const LOCAL_VISIBILITY_MS = 30_000;
/** The deployed main queue's (infra/deploy-config.ts, 6 × the worker's 30 s). */
const DEPLOYED_VISIBILITY_MS = 180_000;

interface Clock {
  now: number;
}

/** One worker instance (`workerId`, its lease the default's) taking SQS batches; what it asked of SQS. */
function instance(ledger: Ledger, backend: ConversionBackend, workerId: string, clock: Clock) {
  const hidden = new Map<string, number>();
  const reports: RecordReport[] = [];
  const deps: BatchDeps = {
    ledger,
    sources: new Map([[SOURCE.id, SOURCE]]),
    backendFor: () => backend,
    now: () => clock.now,
    workerId,
    leaseMs: LEASE_MS,
    failures: {
      park: async () => {
        throw new Error('nothing is parked in these tests');
      },
      delay: async (receiptHandle, seconds) => {
        hidden.set(receiptHandle, seconds);
      },
    },
    sleep: async () => {},
    random: () => 0.5,
    observe: (report) => reports.push(report),
  };
  return {
    /** Hands `records` over as one batch; the report of each, and how long SQS is asked to hide it. */
    async take(...records: SQSRecord[]) {
      await processBatch(deps, records, clock.now + 27_000);
      return records.map((r) => ({
        report: reports.filter((x) => x.messageId === r.messageId).at(-1),
        hiddenMs: (hidden.get(r.receiptHandle) ?? 0) * 1000,
      }));
    },
  };
}

interface Queued {
  readonly messageId: string;
  readonly event: ConnectorEvent;
  receives: number;
  visibleAt: number;
}

/**
 * One FIFO message group, as SQS hands it out: its first message only, once visible; deleted when a
 * receive is done with it, else hidden for as long as the worker asked.
 */
class Group {
  readonly messages: Queued[] = [];

  add(messageId: string, event: ConnectorEvent, receives = 0, visibleAt = 0): void {
    this.messages.push({ messageId, event, receives, visibleAt });
  }

  /** Delivers the group's messages to `worker` while its first one is visible at `clock.now`. */
  async deliverVisible(worker: ReturnType<typeof instance>, clock: Clock): Promise<void> {
    for (let head = this.messages[0]; head && head.visibleAt <= clock.now; head = this.messages[0]) {
      await this.#deliver(head, worker, clock);
    }
  }

  /** Delivers until the group is empty, the clock moving on to each hidden message's return. */
  async drain(worker: ReturnType<typeof instance>, clock: Clock): Promise<void> {
    for (let n = 0; n < 20 && this.messages[0]; n++) {
      const head = this.messages[0];
      clock.now = Math.max(clock.now, head.visibleAt);
      await this.#deliver(head, worker, clock);
    }
    expect(this.messages.map((m) => m.messageId)).toEqual([]);
  }

  async #deliver(head: Queued, worker: ReturnType<typeof instance>, clock: Clock): Promise<void> {
    head.receives += 1;
    const record = fifoRecord(head.event, {
      messageId: head.messageId,
      program: PROGRAM,
      sentAt: NOW,
      receiveCount: head.receives,
    });
    const [taken] = await worker.take(record);
    if (taken?.report?.status === 'done') this.messages.shift();
    else head.visibleAt = clock.now + (taken?.hiddenMs ?? 0);
  }
}

/** `backend` whose Update conversion amount reaches the platform, then its worker dies (`dying`). */
function diesAfterUpdate(backend: ConversionBackend, dying: KillableLedger): ConversionBackend {
  return {
    add: (input, call) => backend.add(input, call),
    find: (program, externalId, call) => backend.find(program, externalId, call),
    refuse: (program, id, reason, call) => backend.refuse(program, id, reason, call),
    accept: (program, id, call) => backend.accept(program, id, call),
    async updateAmount(program, id, amount, reason, call) {
      await backend.updateAmount(program, id, amount, reason, call);
      dying.kill();
    },
  };
}

/** `backend` whose first Update conversion amount is held in flight until `land()`; the rest go at once. */
function holdFirstUpdate(backend: ConversionBackend) {
  const held = holdUpdates(backend);
  let first = true;
  return {
    sending: held.sending,
    land: held.land,
    backend: {
      ...held.backend,
      updateAmount: (...args: Parameters<ConversionBackend['updateAmount']>) => {
        if (!first) return backend.updateAmount(...args);
        first = false;
        return held.backend.updateAmount(...args);
      },
    } satisfies ConversionBackend,
  };
}

/** Order 1001 at 50.00, added by its own worker at `clock.now`. */
async function addedOrder(clock: Clock) {
  const ledger = new MemoryLedger(() => clock.now);
  const platform = new MemoryPlatform();
  const worker = workersOf(SOURCE, () => clock.now);
  expect((await processEvent(worker(ledger, platform, 'w-order'), trackedOrder('shop'))).result).toBe(
    'added',
  );
  return { ledger, platform };
}

describe("a refund's message delivered again while the dead worker's hold lasts", () => {
  it('leaves no mark once the queue is quiet, so a later duplicate of the refund sends nothing', async () => {
    // Prepare: refund r1 (20.00) of order 1001 (50.00) in a worker whose Update conversion amount
    // (30.00) reaches the platform, and which dies right after (a kill -9 of npm start)
    const clock = { now: NOW };
    const { ledger, platform } = await addedOrder(clock);
    const r1 = partialRefund('shop', 'r1', 2_000);
    const dying = new KillableLedger(ledger);
    const dies = workersOf(SOURCE, () => clock.now)(dying, diesAfterUpdate(platform, dying), 'w-dies');
    await expect(processEvent({ ...dies, leaseMs: LEASE_MS }, r1)).rejects.toThrow('worker killed');
    const group = new Group();
    group.add('m-r1', r1, 1, clock.now + LOCAL_VISIBILITY_MS);

    // Act: the restarted stack's worker takes the message once the local visibility timeout is over,
    // and again whenever it gives it back, until the queue is quiet
    await group.drain(instance(ledger, platform, 'w-restarted', clock), clock);
    const record = await ledger.get(KEY);
    platform.calls.length = 0;
    const duplicate = await processEvent(workersOf(SOURCE, () => clock.now)(ledger, platform, 'w-later'), r1);

    // Assess: the platform at the ledger's 30.00, no mark left, the duplicate sends nothing
    expect(record?.currentAmount).toBe(3_000);
    expect(platform.amountOf('1001')).toBe(3_000);
    expect(record?.refunds['r1']).toMatchObject({ status: 'applied' });
    expect(record?.refunds['r1']?.unconfirmedSend).toBeUndefined();
    expect(duplicate.result).toBe('refund_duplicate');
    expect(platform.calls).toEqual([]);
  });
});

describe('one message of a refund received twice side by side (a batch the event source invoked late)', () => {
  it("ends with the platform at the ledger's amount when the first receive's stale send lands last and its worker dies", async () => {
    // Prepare: order 1001 at 50.00; its group holds refund r2's message (7.00), then refund r1's
    // (10.00). The first receive of r2's message records it and sends 43.00, held in flight.
    const clock = { now: NOW };
    const { ledger, platform } = await addedOrder(clock);
    const r2 = partialRefund('shop', 'r2', 700);
    const group = new Group();
    group.add('m-r2', r2, 1, Number.POSITIVE_INFINITY);
    group.add('m-r1', partialRefund('shop', 'r1', 1_000));
    const dying = new KillableLedger(ledger);
    const held = holdUpdates(platform);
    const late = workersOf(SOURCE, () => clock.now)(dying, held.backend, 'w-late');
    const first = processEvent({ ...late, leaseMs: LEASE_MS }, r2);
    await held.sending;

    // Act: its visibility timeout runs out while that invocation still runs: SQS hands the message
    // out again, and the order's group on, as the worker answers; then the held 43.00 lands and the
    // late worker dies before it reads the record again; then the queue is drained
    clock.now += 1_000;
    const other = instance(ledger, platform, 'w-other', clock);
    group.messages[0]!.visibleAt = clock.now;
    await group.deliverVisible(other, clock);
    dying.kill();
    held.land();
    await expect(first).rejects.toThrow('worker killed');
    await group.drain(other, clock);

    // Assess: 50.00 − 7.00 − 10.00 on both sides, both refunds applied, no mark left
    const record = await ledger.get(KEY);
    expect(record?.currentAmount).toBe(3_300);
    expect(platform.amountOf('1001')).toBe(3_300);
    expect(
      Object.values(record?.refunds ?? {}).map((r) => [r.refundId, r.status, r.unconfirmedSend]),
    ).toEqual([
      ['r2', 'applied', undefined],
      ['r1', 'applied', undefined],
    ]);
  });
});

describe('two messages of one refund side by side in one batch, under one worker id', () => {
  it("end with the platform at the ledger's amount when the invocation dies after the first one's stale send landed", async () => {
    // Prepare: order 1001 at 50.00. One batch holds refund r2 (7.00) twice, in two message groups
    // (a replay of a message queued under a source's older grouping, and the shop's copy since), the
    // shop's copy followed by refund r1 (10.00); groups run side by side. The first copy's Update
    // conversion amount (43.00) is held in flight.
    const clock = { now: NOW };
    const { ledger, platform } = await addedOrder(clock);
    const r2 = partialRefund('shop', 'r2', 700);
    const r1 = partialRefund('shop', 'r1', 1_000);
    const oldCopy = fifoRecord(r2, { messageId: 'm-r2-old', program: PROGRAM, sentAt: NOW });
    const batch = [
      { ...oldCopy, attributes: { ...oldCopy.attributes, MessageGroupId: 'older-grouping' } },
      fifoRecord(r2, { messageId: 'm-r2', program: PROGRAM, sentAt: NOW }),
      fifoRecord(r1, { messageId: 'm-r1', program: PROGRAM, sentAt: NOW }),
    ];
    const dying = new KillableLedger(ledger);
    const held = holdFirstUpdate(platform);
    const invocation = instance(dying, held.backend, 'w-one', clock).take(...batch);
    await held.sending;

    // Act: the rest of the batch runs as far as it may (the ledger and platform here answer within
    // the microtasks one turn of the event loop runs); the held 43.00 lands and the invocation dies
    // (a Lambda timeout: nothing of the batch is deleted); after the visibility timeout SQS hands the
    // messages out again to another instance, each group in its order
    await new Promise((resolve) => setImmediate(resolve));
    dying.kill();
    held.land();
    await invocation;
    clock.now += DEPLOYED_VISIBILITY_MS;
    const olderGroup = new Group();
    olderGroup.add('m-r2-old', r2, 1, clock.now);
    const orderGroup = new Group();
    orderGroup.add('m-r2', r2, 1, clock.now);
    orderGroup.add('m-r1', r1, 1, clock.now);
    const two = instance(ledger, platform, 'w-two', clock);
    await olderGroup.drain(two, clock);
    await orderGroup.drain(two, clock);

    // Assess: 50.00 − 7.00 − 10.00 on both sides
    const after = await ledger.get(KEY);
    expect(after?.currentAmount).toBe(3_300);
    expect(platform.amountOf('1001')).toBe(3_300);
  });
});

import { describe, expect, it } from 'vitest';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { TransientError } from '../../shared/errors.ts';
import type { OrderRecord } from '../../shared/ledger.ts';
import type { Ledger } from '../../shared/ports.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';
import { NOW, SOURCE, workersOf } from '../support/stale-send.ts';

/**
 * What the marks of sends left unconfirmed (docs/exactly-once.md, rule 4) cost in DynamoDB calls on
 * the common paths: each DynamoDB write is billed, and the drain bench adds orders one ledger write
 * after another. The mark goes in the write that records the refund (or the adoption), and its
 * confirmation in the write that records it applied: no write of their own there.
 */

/** The ledger, counting each call by kind. */
class CountingLedger implements Ledger {
  readonly inner: Ledger;
  calls = { get: 0, create: 0, update: 0 };

  constructor(inner: Ledger) {
    this.inner = inner;
  }

  get(key: string): Promise<OrderRecord | undefined> {
    this.calls.get++;
    return this.inner.get(key);
  }

  create(record: OrderRecord): Promise<boolean> {
    this.calls.create++;
    return this.inner.create(record);
  }

  update(record: OrderRecord): Promise<boolean> {
    this.calls.update++;
    return this.inner.update(record);
  }

  list(program?: string): AsyncIterable<OrderRecord> {
    return this.inner.list(program);
  }

  /** The calls since the last `taken()`. */
  taken(): { get: number; create: number; update: number } {
    const calls = this.calls;
    this.calls = { get: 0, create: 0, update: 0 };
    return calls;
  }
}

const r1 = (): ConnectorEvent => partialRefund('shop', 'r1', 1_000);

function scene() {
  const clock = { now: NOW };
  const ledger = new CountingLedger(new MemoryLedger(() => clock.now));
  const platform = new MemoryPlatform();
  const worker = (id: string) => workersOf(SOURCE, () => clock.now)(ledger, platform, id);
  return { clock, ledger, platform, worker };
}

describe('ledger calls per message', () => {
  it('an order: one conditional create and the write that records its add', async () => {
    // Prepare
    const { ledger, worker } = scene();

    // Act
    const outcome = await processEvent(worker('w1'), trackedOrder('shop'));

    // Assess
    expect(outcome.result).toBe('added');
    expect(ledger.taken()).toEqual({ get: 0, create: 1, update: 1 });
  });

  it('a refund of an added order: one read and two writes (recorded with its mark, then applied)', async () => {
    // Prepare
    const { ledger, worker } = scene();
    await processEvent(worker('w1'), trackedOrder('shop'));
    ledger.taken();

    // Act
    const outcome = await processEvent(worker('w2'), r1());

    // Assess
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 4_000 });
    expect(ledger.taken()).toEqual({ get: 1, create: 0, update: 2 });
  });

  it('a duplicate of an applied refund: one read, no write', async () => {
    // Prepare
    const { ledger, worker } = scene();
    await processEvent(worker('w1'), trackedOrder('shop'));
    await processEvent(worker('w1'), r1());
    ledger.taken();

    // Act
    const outcome = await processEvent(worker('w2'), r1());

    // Assess
    expect(outcome.result).toBe('refund_duplicate');
    expect(ledger.taken()).toEqual({ get: 1, create: 0, update: 0 });
  });

  it('an order whose held refund its add carries: as before the marks, no write for them', async () => {
    // Prepare
    const { ledger, worker } = scene();
    await processEvent(worker('w1'), r1());
    ledger.taken();

    // Act
    const outcome = await processEvent(worker('w2'), trackedOrder('shop'));

    // Assess: the create that finds the record, its read, the lease, the add recorded
    expect(outcome).toMatchObject({ result: 'added' });
    expect(ledger.taken()).toEqual({ get: 1, create: 1, update: 2 });
  });

  it("an order adopting the pixel's conversion and applying its held refund: the mark rides in the adoption's write", async () => {
    // Prepare
    const { ledger, platform, worker } = scene();
    await processEvent(worker('w1'), r1());
    platform.has('1001', 5_000);
    ledger.taken();

    // Act
    const outcome = await processEvent(worker('w2'), trackedOrder('shop'));

    // Assess: the create that finds the record, its read, the lease, the adoption, the refund applied
    expect(outcome).toMatchObject({ amount: 4_000 });
    expect(ledger.taken()).toEqual({ get: 1, create: 1, update: 3 });
  });

  it("a refund given back after a 429 and taken by another instance: waits out the first one's hold, then one write more", async () => {
    // Prepare: r1's Update conversion amount is answered 429 in its first worker
    const { clock, ledger, platform, worker } = scene();
    await processEvent(worker('w1'), trackedOrder('shop'));
    ledger.taken();
    platform.updateFaults.push(new TransientError('conversions.update answered 429', { status: 429 }));
    await expect(processEvent(worker('w1'), r1())).rejects.toThrow(/429/);
    const first = ledger.taken();

    // Act: another instance takes it 10 s later, then once the first one's hold (60 s) is over
    clock.now += 10_000;
    const early = await processEvent(worker('w2'), r1()).catch((error: unknown) => error);
    const waiting = ledger.taken();
    clock.now += 50_000;
    const outcome = await processEvent(worker('w2'), r1());
    const last = ledger.taken();

    // Assess
    expect(first).toEqual({ get: 1, create: 0, update: 1 });
    expect(early).toMatchObject({ name: 'TransientError', retryAfterMs: 50_000 });
    expect(waiting).toEqual({ get: 1, create: 0, update: 0 });
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 4_000 });
    expect(last).toEqual({ get: 1, create: 0, update: 2 });
    expect(platform.calls.filter((c) => c.startsWith('update'))).toEqual(['update 4000', 'update 4000']);
  });
});

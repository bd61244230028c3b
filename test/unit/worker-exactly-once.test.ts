import { describe, expect, it } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEvent, ConnectorEventInput } from '../../shared/domain/events.ts';
import { PermanentError, TransientError } from '../../shared/errors.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import type {
  AddConversionInput,
  ConversionBackend,
  FailureQueue,
  PlatformConversion,
} from '../../shared/ports.ts';
import { type BatchDeps, processBatch } from '../../shared/worker/batch.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { trackedOrder, workerEvent } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { fifoRecord } from '../support/sqs-records.ts';

/**
 * The worker's promises of docs/exactly-once.md where a platform call fails or another worker acts on
 * the same ledger record: an unclear add is never sent twice within its verification window, held
 * refunds reach the conversion whichever way the order got one, an order replayed from the DLQ is
 * checked as a first delivery is, and refunds applied side by side leave the platform where the
 * ledger says it is.
 */

const PROGRAM = '5ad000000000000000000101';
const NOW = Date.parse('2026-05-01T10:00:00.000Z');
const VERIFY_MS = 600_000;
const KEY = ledgerKey(PROGRAM, '1001');

const shop = (extra: Record<string, unknown> = {}) =>
  SourceConfig.parse({
    id: 'shop',
    platform: 'generic',
    program: PROGRAM,
    rule: '5ad000000000000000000201',
    secretRef: 'SHOP_SECRET',
    ...extra,
  });

const order = (): ConnectorEvent => trackedOrder('shop');
const refund = (fields: Partial<ConnectorEventInput>): ConnectorEvent =>
  workerEvent('shop', { type: 'OrderRefunded', currency: 'EUR', ...fields });

const unavailable = (route: string) =>
  new TransientError(`${route} answered 503: Service Unavailable`, { status: 503 });
const rateLimited = (route: string) =>
  new TransientError(`${route} answered 429: rate limited`, { status: 429 });

interface StoredConversion {
  readonly id: string;
  readonly externalId: string;
  amount: number;
  status: PlatformConversion['status'];
}

/** The platform as the worker sees it, in memory, with faults queued per operation. */
class FakePlatform implements ConversionBackend {
  /** Every call, in order: `add 1001 3500`, `find 1001`, `update <id> 3500`, `refuse <id>`. */
  readonly calls: string[] = [];
  readonly reasons: string[] = [];
  readonly conversions = new Map<string, StoredConversion>();
  /** Errors the next calls of each operation throw instead of answering, first in, first out. */
  readonly faults: Record<'add' | 'find' | 'update', Error[]> = { add: [], find: [], update: [] };
  /** The add's answer carries no id (the platform does not document one; the sandbox's `bare`). */
  bareAdds = false;
  /** Conversion info does not show what an add recorded yet (a platform slow to index it). */
  hidesNewAdds = false;
  /** Runs before an Update conversion amount takes effect: a slow round trip. */
  beforeUpdate?: (amount: number) => Promise<void>;
  readonly #added = new Set<string>();

  /** A conversion recorded by another path (the shop's pixel, an earlier add). */
  has(externalId: string, amount: number): StoredConversion {
    const conversion = { id: this.#nextId(), externalId, amount, status: 'pending' as const };
    this.conversions.set(externalId, conversion);
    return conversion;
  }

  async add(input: AddConversionInput): Promise<{ id: string | undefined }> {
    this.calls.push(`add ${input.externalId} ${input.amount}`);
    const fault = this.faults.add.shift();
    if (fault) throw fault;
    const conversion = this.has(input.externalId, input.amount);
    this.#added.add(conversion.id);
    return { id: this.bareAdds ? undefined : conversion.id };
  }

  async find(_program: string, externalId: string): Promise<PlatformConversion | undefined> {
    this.calls.push(`find ${externalId}`);
    const fault = this.faults.find.shift();
    if (fault) throw fault;
    const conversion = this.conversions.get(externalId);
    if (!conversion || (this.hidesNewAdds && this.#added.has(conversion.id))) return undefined;
    return { ...conversion };
  }

  async updateAmount(_program: string, id: string, amount: number, reason: string): Promise<void> {
    this.calls.push(`update ${id} ${amount}`);
    this.reasons.push(reason);
    const fault = this.faults.update.shift();
    if (fault) throw fault;
    await this.beforeUpdate?.(amount);
    for (const c of this.conversions.values()) if (c.id === id) c.amount = amount;
  }

  async refuse(_program: string, id: string, reason: string): Promise<void> {
    this.calls.push(`refuse ${id}`);
    this.reasons.push(reason);
    for (const c of this.conversions.values()) if (c.id === id) c.status = 'refused';
  }

  async accept(): Promise<void> {}

  #nextId(): string {
    return `c${String(this.conversions.size + 1).padStart(23, '0')}`;
  }
}

/** A worker over `ledger` and `platform`, its clock read from `clock.now`. */
function worker(
  ledger: MemoryLedger,
  platform: ConversionBackend,
  source: SourceConfig,
  clock: { now: number } = { now: NOW },
  workerId = 'w1',
): WorkerDeps {
  return {
    ledger,
    sources: new Map([[source.id, source]]),
    backendFor: () => platform,
    now: () => clock.now,
    workerId,
    leaseMs: 60_000,
    verifyMs: VERIFY_MS,
  };
}

/** Runs `event` as the queue would hand it back after a transient failure: up to `times` times. */
async function untilDone(deps: WorkerDeps, event: ConnectorEvent, times = 3): Promise<string[]> {
  const results: string[] = [];
  for (let attempt = 0; attempt < times; attempt++) {
    try {
      results.push((await processEvent(deps, event)).result);
      return results;
    } catch (error) {
      results.push(`${(error as Error).name}: ${(error as Error).message}`);
      if (!(error instanceof TransientError)) return results;
    }
  }
  return results;
}

describe('taking over the add of a worker that died mid-call', () => {
  /** What a worker killed during its Conversion Add leaves: `adding`, its lease just run out. */
  const leftByDeadWorker = (source: SourceConfig): OrderRecord => ({
    key: KEY,
    program: PROGRAM,
    externalId: '1001',
    source: source.id,
    state: 'adding',
    version: 0,
    kind: 'tracking',
    originalAmount: 5_000,
    currentAmount: 5_000,
    currency: 'EUR',
    refunds: {},
    leaseOwner: 'worker-that-died',
    leaseUntil: NOW - 1_000,
    createdAt: new Date(NOW - 61_000).toISOString(),
    updatedAt: new Date(NOW - 61_000).toISOString(),
  });

  it('sends no second add within the verification window when its first Conversion info fails', async () => {
    // Prepare: the dead worker's add is not on the platform yet (it may be, minutes later), and the
    // takeover's first Conversion info is answered 503
    const source = shop();
    const ledger = new MemoryLedger(() => NOW);
    await ledger.create(leftByDeadWorker(source));
    const platform = new FakePlatform();
    platform.faults.find.push(unavailable('conversions.info'));
    const clock = { now: NOW };
    const deps = worker(ledger, platform, source, clock, 'w2');

    // Act: the failed lookup, then the batch's retry of it 200 ms later
    const first = processEvent(deps, order());
    await expect(first).rejects.toMatchObject({ failureClass: 'transient' });
    clock.now = NOW + 200;
    const retried = processEvent(deps, order());
    await expect(retried).rejects.toThrow(/verification window/);

    // Assess: no add inside the window; once it has passed with nothing shown, exactly one
    expect(platform.calls.filter((c) => c.startsWith('add'))).toEqual([]);
    clock.now = NOW - 1_000 + VERIFY_MS + 1;
    expect((await processEvent(deps, order())).result).toBe('added');
    expect(platform.calls.filter((c) => c.startsWith('add'))).toEqual(['add 1001 5000']);
  });
});

describe('refunds held before their order reach its conversion', () => {
  it('records a held refund applied with the add, without asking Conversion info', async () => {
    // Prepare: the refund comes first; the add's answer carries no id; Conversion info is rate limited
    const source = shop();
    const ledger = new MemoryLedger(() => NOW);
    const platform = new FakePlatform();
    const deps = worker(ledger, platform, source);
    expect((await processEvent(deps, refund({ refundId: 'r1', amount: 1_500 }))).result).toBe(
      'refund_waiting',
    );
    platform.bareAdds = true;
    platform.faults.find.push(rateLimited('conversions.info'));
    platform.calls.length = 0;

    // Act
    const outcome = await processEvent(deps, order());

    // Assess: one add at the net amount, nothing else; the refund is done, not pending for good
    const record = await ledger.get(KEY);
    expect(outcome.result).toBe('added');
    expect(platform.calls).toEqual(['add 1001 3500']);
    expect(record).toMatchObject({ state: 'added', currentAmount: 3_500 });
    expect(record?.refunds['r1']).toMatchObject({ status: 'applied', resultingAmount: 3_500 });
    expect(record?.awaitingSince).toBeUndefined();
  });

  it('does not park an added order when Conversion info does not show its new conversion yet', async () => {
    // Prepare
    const source = shop();
    const ledger = new MemoryLedger(() => NOW);
    const platform = new FakePlatform();
    const deps = worker(ledger, platform, source);
    await processEvent(deps, refund({ refundId: 'r1', amount: 1_500 }));
    platform.bareAdds = true;
    platform.hidesNewAdds = true;

    // Act
    const results = await untilDone(deps, order());

    // Assess
    expect(results).toEqual(['added']);
    expect((await ledger.get(KEY))?.refunds['r1']?.status).toBe('applied');
  });

  it("completes a held refund on the order's retry when the update after adopting its conversion failed", async () => {
    // Prepare: the platform has the order already (its pixel), at the full 50.00; the refund of 15.00
    // came first; the Update conversion amount after the adoption is answered 503 once
    const source = shop({ lookupBeforeAdd: true });
    const ledger = new MemoryLedger(() => NOW);
    const platform = new FakePlatform();
    const deps = worker(ledger, platform, source);
    await processEvent(deps, refund({ refundId: 'r1', amount: 1_500 }));
    const pixel = platform.has('1001', 5_000);
    platform.faults.update.push(unavailable('conversions.update-amount'));

    // Act: the order, retried as the queue does
    const results = await untilDone(deps, order());

    // Assess: the conversion is at 35.00 and the ledger says so, the refund applied
    const record = await ledger.get(KEY);
    expect(results[0]).toMatch(/503/);
    expect(platform.conversions.get('1001')?.amount).toBe(3_500);
    expect(record).toMatchObject({ state: 'added', conversionId: pixel.id, currentAmount: 3_500 });
    expect(record?.refunds['r1']?.status).toBe('applied');
  });

  it('applies a held refund to the conversion adopted when the add is answered 409', async () => {
    // Prepare: the refund of 15.00 comes first; the platform then records the order by its pixel at
    // 50.00, so the add is refused as a duplicate externalId
    const source = shop();
    const ledger = new MemoryLedger(() => NOW);
    const platform = new FakePlatform();
    const deps = worker(ledger, platform, source);
    await processEvent(deps, refund({ refundId: 'r1', amount: 1_500 }));
    const pixel = platform.has('1001', 5_000);
    platform.faults.add.push(
      new PermanentError('conversions.add answered 409: externalId 1001 exists', { status: 409 }),
    );

    // Act
    await processEvent(deps, order());

    // Assess: the adopted conversion is lowered to 35.00 and the ledger records it
    const record = await ledger.get(KEY);
    expect(platform.conversions.get('1001')?.amount).toBe(3_500);
    expect(record).toMatchObject({ state: 'added', conversionId: pixel.id, currentAmount: 3_500 });
    expect(record?.refunds['r1']).toMatchObject({ status: 'applied', resultingAmount: 3_500 });
  });
});

describe('an order replayed from the DLQ after refunds were held for it', () => {
  /** An order whose add failed for good (400): its record `failed`, the message in the DLQ. */
  async function parkedOrder() {
    const source = shop();
    const ledger = new MemoryLedger(() => NOW);
    const platform = new FakePlatform();
    const deps = worker(ledger, platform, source);
    platform.faults.add.push(
      new PermanentError('conversions.add answered 400: unknown click id', { status: 400 }),
    );
    await expect(processEvent(deps, order())).rejects.toMatchObject({ failureClass: 'permanent' });
    expect((await ledger.get(KEY))?.state).toBe('failed');
    platform.calls.length = 0;
    return { ledger, platform, deps };
  }

  it('is never added when its cancellation was held while it sat in the DLQ', async () => {
    // Prepare
    const { ledger, platform, deps } = await parkedOrder();
    const cancelled = workerEvent('shop', { type: 'OrderCancelled', reason: 'customer changed their mind' });
    expect((await processEvent(deps, cancelled)).result).toBe('refund_waiting');

    // Act: the operator fixes the cause and replays the order
    const outcome = await processEvent(deps, order());

    // Assess: skipped as a cancelled order arriving first is; nothing added, nothing refused
    expect(outcome.result).toBe('skipped');
    expect(platform.calls.filter((c) => !c.startsWith('find'))).toEqual([]);
    const record = await ledger.get(KEY);
    expect(record).toMatchObject({ state: 'skipped', skipReason: expect.stringMatching(/cancelled/) });
    expect(Object.values(record?.refunds ?? {}).map((r) => r.status)).toEqual(['applied']);
  });

  it('is added at its own amount when a refund held for it was in another currency', async () => {
    // Prepare
    const { ledger, platform, deps } = await parkedOrder();
    await processEvent(deps, refund({ refundId: 'r-usd', amount: 1_000, currency: 'USD' }));

    // Act
    const outcome = await processEvent(deps, order());

    // Assess: the EUR order is added at 50.00; the USD refund is rejected, with the reason
    expect(outcome.result).toBe('added');
    expect(platform.calls.filter((c) => c.startsWith('add'))).toEqual(['add 1001 5000']);
    expect((await ledger.get(KEY))?.refunds['r-usd']).toMatchObject({
      status: 'rejected',
      outcome: expect.stringMatching(/USD differs from the order's EUR/),
    });
  });

  it('settles its held refunds as skipped when the replay has no affiliate signal', async () => {
    // Prepare
    const { ledger, deps } = await parkedOrder();
    await processEvent(deps, refund({ refundId: 'r1', amount: 1_000 }));

    // Act: the corrected order carries no click id
    const unattributed = workerEvent('shop', { type: 'OrderPlaced', amount: 5_000, currency: 'EUR' });
    const outcome = await processEvent(deps, unattributed);

    // Assess: no refund waits for a conversion that will never exist
    expect(outcome.result).toBe('skipped');
    const record = await ledger.get(KEY);
    expect(record?.state).toBe('skipped');
    expect(record?.refunds['r1']?.status).toBe('skipped');
  });
});

describe('two refunds of one order applied side by side', () => {
  /** Resolves once a ledger write records both refunds applied. */
  class WatchingLedger extends MemoryLedger {
    #resolve!: () => void;
    readonly bothApplied = new Promise<void>((resolve) => {
      this.#resolve = resolve;
    });
    override async update(record: OrderRecord): Promise<boolean> {
      const ok = await super.update(record);
      const applied = Object.values(record.refunds).filter((r) => r.status === 'applied');
      if (ok && applied.length === 2) this.#resolve();
      return ok;
    }
  }

  it('leave the platform at the amount the ledger records', async () => {
    // Prepare: a prefixed source's order at 50.00; a finance refund (named by the platform's id
    // `shopB-1001`) and a shop refund (by the shop's `1001`) of it, in two message groups, so two
    // worker instances take them at once (one instance's batch would run them one after the other).
    // The first Update conversion amount to go out is answered last, after the other worker recorded
    // both refunds.
    const source = shop({ externalIdPrefix: 'shopB-' });
    const ledger = new WatchingLedger(() => NOW);
    const platform = new FakePlatform();
    const deps = worker(ledger, platform, source);
    expect((await processEvent(deps, order())).result).toBe('added');
    // The held update's own message cannot finish while it is held: the first report is the other's.
    let otherReported!: () => void;
    const otherDone = new Promise<void>((resolve) => {
      otherReported = resolve;
    });
    let slow = true;
    let released: 'both refunds recorded applied' | 'the other refund done without them' | undefined;
    platform.beforeUpdate = async () => {
      if (!slow) return;
      slow = false;
      released = await Promise.race([
        ledger.bothApplied.then(() => 'both refunds recorded applied' as const),
        otherDone.then(() => 'the other refund done without them' as const),
      ]);
    };
    const finance: ConnectorEventInput = {
      type: 'OrderRefunded',
      eventId: 'finance:fin-1',
      source: 'shop',
      platform: 'finance',
      externalId: 'shopB-1001',
      receivedAt: new Date(NOW).toISOString(),
      refundId: 'fin-1',
      amount: 2_000,
      currency: 'EUR',
      origin: 'finance',
    };
    const shopRefund: ConnectorEventInput = {
      type: 'OrderRefunded',
      eventId: 'shop-refund-1',
      source: 'shop',
      platform: 'generic',
      externalId: '1001',
      receivedAt: new Date(NOW).toISOString(),
      refundId: 'shop-1',
      amount: 1_000,
      currency: 'EUR',
    };
    const failures: FailureQueue = { park: async () => {}, delay: async () => {} };
    const batch: BatchDeps = {
      ...deps,
      failures,
      sleep: async () => {},
      random: () => 0,
      observe: () => otherReported(),
    };

    // Act
    const answers = await Promise.all([
      processBatch(
        { ...batch, workerId: 'w1' },
        [fifoRecord(finance, { messageId: 'm-finance', program: PROGRAM, sentAt: NOW })],
        NOW + 60_000,
      ),
      processBatch(
        { ...batch, workerId: 'w2' },
        [fifoRecord(shopRefund, { messageId: 'm-shop', program: PROGRAM, sentAt: NOW })],
        NOW + 60_000,
      ),
    ]);

    // Assess: the held update went out once both refunds were recorded, so the stale target landed
    // last; 50.00 - 20.00 - 10.00 = 20.00, on the platform as in the ledger
    expect(released).toBe('both refunds recorded applied');
    const record = await ledger.get(ledgerKey(PROGRAM, 'shopB-1001'));
    expect(answers.flatMap((a) => a.batchItemFailures)).toEqual([]);
    expect(record?.currentAmount).toBe(2_000);
    expect(Object.values(record?.refunds ?? {}).map((r) => r.status)).toEqual(['applied', 'applied']);
    expect(platform.conversions.get('shopB-1001')?.amount).toBe(2_000);
  });
});

describe('the reason sent with a refund', () => {
  // An emoji is two UTF-16 units: a cut at an odd or an even unit halves one, depending on the text before.
  it.each([
    ['a partial refund', '', { refundId: 'r1', amount: 1_000 }],
    ['a partial refund', 'x', { refundId: 'r1', amount: 1_000 }],
    ['a full refund', '', { refundId: 'r1', full: true }],
    ['a full refund', 'x', { refundId: 'r1', full: true }],
  ])(
    'is cut to 250 characters without halving an emoji the shop wrote (%s, pad "%s")',
    async (_kind, pad, fields) => {
      // Prepare
      const source = shop();
      const ledger = new MemoryLedger(() => NOW);
      const platform = new FakePlatform();
      const deps = worker(ledger, platform, source);
      await processEvent(deps, order());

      // Act
      await processEvent(deps, refund({ ...fields, reason: `${pad}${'😀'.repeat(240)}` }));

      // Assess
      expect(platform.reasons).toHaveLength(1);
      const [sent] = platform.reasons;
      expect(sent?.length).toBeLessThanOrEqual(250);
      expect(sent?.length).toBeGreaterThanOrEqual(249);
      expect(sent?.isWellFormed()).toBe(true);
    },
  );

  it.each([[''], ['x']])(
    'of a cancellation is cut without halving an emoji the shop wrote (pad "%s")',
    async (pad) => {
      // Prepare
      const source = shop();
      const ledger = new MemoryLedger(() => NOW);
      const platform = new FakePlatform();
      const deps = worker(ledger, platform, source);
      await processEvent(deps, order());

      // Act
      await processEvent(
        deps,
        workerEvent('shop', { type: 'OrderCancelled', reason: `${pad}${'😀'.repeat(240)}` }),
      );

      // Assess
      const [sent] = platform.reasons;
      expect(sent?.length).toBeLessThanOrEqual(250);
      expect(sent?.isWellFormed()).toBe(true);
    },
  );
});

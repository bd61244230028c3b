import { describe, expect, it } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEvent, ConnectorEventInput } from '../../shared/domain/events.ts';
import { PermanentError } from '../../shared/errors.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import type {
  AddConversionInput,
  ConversionBackend,
  FailureAttributes,
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
 * The worker adopts a conversion the platform already has for an order (an add answered 409, a
 * takeover's lookup after a worker died mid-add, `lookupBeforeAdd`) only when it is in the order's
 * currency: USD 49.90 is not EUR 49.90, and refunds computed from it would move the wrong money. One
 * in another currency parks the order in the DLQ with a reason an operator can act on, and leaves a
 * record a replay takes up again once the platform has been put right.
 */

const PROGRAM = '5ad000000000000000000101';
const NOW = Date.parse('2026-05-01T10:00:00.000Z');
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

/** Order 1001: EUR 50.00. */
const order = (): ConnectorEvent => trackedOrder('shop');
const refund = (fields: Partial<ConnectorEventInput>): ConnectorEvent =>
  workerEvent('shop', { type: 'OrderRefunded', currency: 'EUR', ...fields });

interface Stored {
  readonly id: string;
  readonly externalId: string;
  amount?: number;
  currency?: string;
  status: string;
}

/**
 * The platform as the worker sees it: one conversion per externalId, an add of one it has answered
 * 409 (as the sandbox's `duplicates: 'reject'`).
 */
class Platform implements ConversionBackend {
  /** Every call, in order: `add 1001 5000 EUR`, `find 1001`, `update <id> 3500`, `refuse <id>`. */
  readonly calls: string[] = [];
  readonly conversions = new Map<string, Stored>();

  /** A conversion recorded by another path: the shop's pixel, a hand-made one, another shop's. */
  has(externalId: string, amount: number | undefined, currency: string | undefined): Stored {
    const stored: Stored = {
      id: `c${String(this.conversions.size + 1).padStart(23, '0')}`,
      externalId,
      status: 'pending',
      ...(amount === undefined ? {} : { amount }),
      ...(currency === undefined ? {} : { currency }),
    };
    this.conversions.set(externalId, stored);
    return stored;
  }

  async add(input: AddConversionInput): Promise<{ id: string | undefined }> {
    this.calls.push(`add ${input.externalId} ${input.amount} ${input.currency}`);
    if (this.conversions.has(input.externalId)) {
      throw new PermanentError(
        `conversions.add answered 409: a conversion with externalId ${input.externalId} already exists`,
        { status: 409 },
      );
    }
    return { id: this.has(input.externalId, input.amount, input.currency).id };
  }

  async find(_program: string, externalId: string): Promise<PlatformConversion | undefined> {
    this.calls.push(`find ${externalId}`);
    const stored = this.conversions.get(externalId);
    return stored ? { ...stored } : undefined;
  }

  async updateAmount(_program: string, id: string, amount: number): Promise<void> {
    this.calls.push(`update ${id} ${amount}`);
    for (const c of this.conversions.values()) if (c.id === id) c.amount = amount;
  }

  async refuse(_program: string, id: string): Promise<void> {
    this.calls.push(`refuse ${id}`);
    for (const c of this.conversions.values()) if (c.id === id) c.status = 'refused';
  }

  async accept(): Promise<void> {}
}

/** The DLQ as the batch parks into it: each message with its failure attributes. */
class Dlq implements FailureQueue {
  readonly parked: { body: string; failure: FailureAttributes }[] = [];
  async park(message: { body: string }, failure: FailureAttributes): Promise<void> {
    this.parked.push({ body: message.body, failure });
  }
  async delay(): Promise<void> {}
}

function worker(ledger: MemoryLedger, platform: Platform, source: SourceConfig, workerId = 'w1'): WorkerDeps {
  return {
    ledger,
    sources: new Map([[source.id, source]]),
    backendFor: () => platform,
    now: () => NOW,
    workerId,
    leaseMs: 60_000,
    verifyMs: 600_000,
  };
}

/** One message through the batch, as the worker's Lambda runs it; answers what the DLQ got. */
async function runMessage(deps: WorkerDeps, event: ConnectorEvent, messageId = 'm1') {
  const dlq = new Dlq();
  const batch: BatchDeps = { ...deps, failures: dlq, sleep: async () => {}, random: () => 0 };
  const answer = await processBatch(
    batch,
    [fifoRecord(event, { messageId, program: PROGRAM, sentAt: NOW })],
    NOW + 60_000,
  );
  return { answer, parked: dlq.parked };
}

/** What a worker killed during its Conversion Add leaves: `adding`, its lease just run out. */
const leftByDeadWorker = (): OrderRecord => ({
  key: KEY,
  program: PROGRAM,
  externalId: '1001',
  source: 'shop',
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

const REASON =
  /the platform's conversion c0+1 for order 1001 is in USD \(USD 49\.90\), the order in EUR \(EUR 50\.00\): not adopted; check which is right and fix it on the platform, then replay/;

describe('a conversion already on the platform in another currency than the order', () => {
  it('parks the order when its add is answered 409, naming the order, both currencies and amounts', async () => {
    // Prepare: the pixel recorded order 1001 in the buyer's USD; the shop's order is EUR 50.00
    const source = shop();
    const ledger = new MemoryLedger(() => NOW);
    const platform = new Platform();
    const pixel = platform.has('1001', 4_990, 'USD');
    const deps = worker(ledger, platform, source);

    // Act
    const { answer, parked } = await runMessage(deps, order());

    // Assess: in the DLQ at once with the reason; the ledger neither adopted nor sent anything
    expect(answer.batchItemFailures).toEqual([]);
    expect(parked).toHaveLength(1);
    expect(parked[0]?.failure).toMatchObject({ failureClass: 'permanent', externalId: '1001' });
    expect(parked[0]?.failure.reason).toMatch(REASON);
    expect(platform.calls).toEqual(['add 1001 5000 EUR', 'find 1001']);
    expect(platform.conversions.get('1001')).toEqual(pixel);
    const record = await ledger.get(KEY);
    expect(record).toMatchObject({ state: 'failed', currentAmount: 5_000, currency: 'EUR' });
    expect(record?.lastError).toMatch(REASON);
    expect(record?.conversionId).toBeUndefined();
    expect(record?.leaseUntil).toBeUndefined();
  });

  it('applies no held refund to it: the refund stays held for the order', async () => {
    // Prepare: a refund of EUR 15.00 came before the order
    const source = shop();
    const ledger = new MemoryLedger(() => NOW);
    const platform = new Platform();
    const deps = worker(ledger, platform, source);
    expect((await processEvent(deps, refund({ refundId: 'r1', amount: 1_500 }))).result).toBe(
      'refund_waiting',
    );
    platform.has('1001', 4_990, 'USD');

    // Act
    const outcome = processEvent(deps, order());

    // Assess: the USD conversion is untouched, the refund still waits
    await expect(outcome).rejects.toThrow(/is in USD \(USD 49\.90\), the order in EUR \(EUR 50\.00\)/);
    await expect(outcome).rejects.toBeInstanceOf(PermanentError);
    expect(platform.calls.filter((c) => !c.startsWith('add') && !c.startsWith('find'))).toEqual([]);
    expect(platform.conversions.get('1001')?.amount).toBe(4_990);
    const record = await ledger.get(KEY);
    expect(record?.state).toBe('failed');
    expect(record?.refunds['r1']?.status).toBe('pending');
  });

  it('parks a takeover whose lookup finds it after a worker died mid-add, with no add sent', async () => {
    // Prepare
    const source = shop();
    const ledger = new MemoryLedger(() => NOW);
    await ledger.create(leftByDeadWorker());
    const platform = new Platform();
    platform.has('1001', 4_990, 'USD');
    const deps = worker(ledger, platform, source, 'w2');

    // Act
    const { parked } = await runMessage(deps, order());

    // Assess
    expect(parked.map((p) => p.failure.reason)).toEqual([expect.stringMatching(REASON)]);
    expect(platform.calls).toEqual(['find 1001']);
    const record = await ledger.get(KEY);
    expect(record).toMatchObject({ state: 'failed', currentAmount: 5_000 });
    expect(record?.conversionId).toBeUndefined();
  });

  it('parks the order a lookupBeforeAdd finds it for, with no add sent', async () => {
    // Prepare
    const source = shop({ lookupBeforeAdd: true });
    const ledger = new MemoryLedger(() => NOW);
    const platform = new Platform();
    platform.has('1001', 4_990, 'USD');
    const deps = worker(ledger, platform, source);

    // Act
    const { parked } = await runMessage(deps, order());

    // Assess
    expect(parked.map((p) => p.failure.reason)).toEqual([expect.stringMatching(REASON)]);
    expect(platform.calls).toEqual(['find 1001']);
    expect((await ledger.get(KEY))?.state).toBe('failed');
  });

  it('names a conversion the platform gives without an amount as such', async () => {
    // Prepare
    const source = shop({ lookupBeforeAdd: true });
    const ledger = new MemoryLedger(() => NOW);
    const platform = new Platform();
    platform.has('1001', undefined, 'USD');

    // Act
    const outcome = processEvent(worker(ledger, platform, source), order());

    // Assess
    await expect(outcome).rejects.toThrow(/is in USD \(no amount given\), the order in EUR \(EUR 50\.00\)/);
  });
});

describe('a conversion already on the platform that may be adopted, as before', () => {
  it.each([
    ['in the same currency written in lower case', 'eur'],
    ['without a currency', undefined],
  ])('is adopted %s, and the refunds held for the order applied to it', async (_case, currency) => {
    // Prepare: a refund of EUR 15.00 first; then the order, whose add is answered 409
    const source = shop();
    const ledger = new MemoryLedger(() => NOW);
    const platform = new Platform();
    const deps = worker(ledger, platform, source);
    await processEvent(deps, refund({ refundId: 'r1', amount: 1_500 }));
    const pixel = platform.has('1001', 5_000, currency);

    // Act
    const outcome = await processEvent(deps, order());

    // Assess
    expect(outcome).toMatchObject({ result: 'refund_applied', conversionId: pixel.id, amount: 3_500 });
    expect(platform.conversions.get('1001')?.amount).toBe(3_500);
    expect(await ledger.get(KEY)).toMatchObject({
      state: 'added',
      conversionId: pixel.id,
      currentAmount: 3_500,
    });
  });

  it('costs the same calls as before: a 409, one Conversion info, one ledger write', async () => {
    // Prepare
    const source = shop();
    const ledger = new MemoryLedger(() => NOW);
    const platform = new Platform();
    platform.has('1001', 4_990, 'EUR');

    // Act
    const outcome = await processEvent(worker(ledger, platform, source), order());

    // Assess: the platform's amount is the ledger's, in the same currency
    expect(outcome).toMatchObject({ result: 'reconciled', amount: 4_990 });
    expect(platform.calls).toEqual(['add 1001 5000 EUR', 'find 1001']);
    expect(await ledger.get(KEY)).toMatchObject({
      state: 'added',
      currentAmount: 4_990,
      currency: 'EUR',
      version: 2,
    });
  });
});

describe('an order parked for a conversion in another currency, replayed from the DLQ', () => {
  /** Parks order 1001 (EUR 50.00, a EUR 15.00 refund held for it) on the pixel's USD conversion. */
  async function parked() {
    const source = shop();
    const ledger = new MemoryLedger(() => NOW);
    const platform = new Platform();
    const deps = worker(ledger, platform, source);
    await processEvent(deps, refund({ refundId: 'r1', amount: 1_500 }));
    const pixel = platform.has('1001', 4_990, 'USD');
    await expect(processEvent(deps, order())).rejects.toBeInstanceOf(PermanentError);
    platform.calls.length = 0;
    return { ledger, platform, deps, pixel };
  }

  it('is parked again, with the same reason, while the platform still has the other currency', async () => {
    // Prepare
    const { ledger, platform, deps } = await parked();

    // Act
    const { parked: again } = await runMessage(deps, order(), 'm-replay');

    // Assess
    expect(again.map((p) => p.failure.reason)).toEqual([expect.stringMatching(/is in USD/)]);
    expect(platform.calls).toEqual(['find 1001']);
    expect((await ledger.get(KEY))?.refunds['r1']?.status).toBe('pending');
  });

  it('adopts the conversion once it is put right on the platform, and applies the held refund', async () => {
    // Prepare: the operator found the conversion was the order's, recorded in the wrong currency,
    // and had it corrected to EUR 50.00
    const { ledger, platform, deps, pixel } = await parked();
    Object.assign(platform.conversions.get('1001') ?? {}, { amount: 5_000, currency: 'EUR' });

    // Act
    const outcome = await processEvent(deps, order());

    // Assess
    expect(outcome).toMatchObject({ result: 'refund_applied', conversionId: pixel.id, amount: 3_500 });
    expect(platform.calls).toEqual(['find 1001', `update ${pixel.id} 3500`]);
    const record = await ledger.get(KEY);
    expect(record).toMatchObject({ state: 'added', conversionId: pixel.id, currentAmount: 3_500 });
    expect(record?.lastError).toBeUndefined();
    expect(record?.refunds['r1']?.status).toBe('applied');
  });

  it('adds the order once when the other conversion is gone from the platform', async () => {
    // Prepare: it was another shop's order with the same externalId, moved off this program
    const { ledger, platform, deps } = await parked();
    platform.conversions.delete('1001');

    // Act
    const outcome = await processEvent(deps, order());

    // Assess: the order at EUR 50.00 less the held EUR 15.00, in one add
    expect(outcome.result).toBe('added');
    expect(platform.calls).toEqual(['find 1001', 'add 1001 3500 EUR']);
    expect((await ledger.get(KEY))?.refunds['r1']?.status).toBe('applied');
  });
});

describe('a refund of a shadow-mode order once its source is live', () => {
  /** Order 1001 recorded in shadow mode, the source now live. */
  async function shadowed() {
    const ledger = new MemoryLedger(() => NOW);
    const platform = new Platform();
    expect((await processEvent(worker(ledger, platform, shop({ mode: 'shadow' })), order())).result).toBe(
      'shadowed',
    );
    return { ledger, platform, deps: worker(ledger, platform, shop()) };
  }

  it("does not adopt the pixel's conversion in another currency: the refund is held and parked with the reason", async () => {
    // Prepare
    const { ledger, platform, deps } = await shadowed();
    platform.has('1001', 4_990, 'USD');

    // Act
    const { parked } = await runMessage(deps, refund({ refundId: 'r1', amount: 1_500 }));

    // Assess: nothing changed on the platform; the ledger holds the refund for the order
    expect(parked.map((p) => p.failure.reason)).toEqual([expect.stringMatching(REASON)]);
    expect(platform.calls).toEqual(['find 1001']);
    const record = await ledger.get(KEY);
    expect(record?.state).toBe('shadowed');
    expect(record?.conversionId).toBeUndefined();
    expect(record?.refunds['r1']?.status).toBe('pending');
  });

  it('applies the refund when replayed once the conversion is put right', async () => {
    // Prepare
    const { ledger, platform, deps } = await shadowed();
    const pixel = platform.has('1001', 4_990, 'USD');
    const first = refund({ refundId: 'r1', amount: 1_500 });
    await expect(processEvent(deps, first)).rejects.toBeInstanceOf(PermanentError);
    Object.assign(platform.conversions.get('1001') ?? {}, { amount: 5_000, currency: 'EUR' });

    // Act
    const outcome = await processEvent(deps, first);

    // Assess
    expect(outcome).toMatchObject({ result: 'refund_applied', conversionId: pixel.id, amount: 3_500 });
    expect(platform.conversions.get('1001')?.amount).toBe(3_500);
    expect((await ledger.get(KEY))?.refunds['r1']?.status).toBe('applied');
  });
});

describe('an order placed before the connector, its conversion in a lower-case currency', () => {
  it('takes a refund in the same currency written in upper case', async () => {
    // Prepare: the platform names the conversion's currency `eur`; the shop's refund says EUR
    const ledger = new MemoryLedger(() => NOW);
    const platform = new Platform();
    const pixel = platform.has('1001', 5_000, 'eur');

    // Act
    const outcome = await processEvent(
      worker(ledger, platform, shop()),
      refund({ refundId: 'r1', amount: 1_500 }),
    );

    // Assess
    expect(outcome).toMatchObject({ result: 'refund_applied', conversionId: pixel.id, amount: 3_500 });
    expect(platform.conversions.get('1001')?.amount).toBe(3_500);
  });
});

import { describe, expect, it } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import { isConnectorError } from '../../shared/errors.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import type { AddConversionInput, ConversionBackend, PlatformConversion } from '../../shared/ports.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { trackedOrder, workerEvent } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * Issue 16 (where the worker's time goes): each ledger call is a DynamoDB round trip, signed and
 * parsed by the SDK, the largest share of a worker's CPU. A new order, the common case, is written
 * without being read first (the create's condition stands in for the read); an order already in the
 * ledger fails that condition and is read and decided as before, one add in every case.
 */

const PROGRAM = '5ad000000000000000000101';
const source = SourceConfig.parse({
  id: 'shop',
  platform: 'generic',
  program: PROGRAM,
  rule: '5ad000000000000000000201',
  secretRef: 'SHOP_SECRET',
});

/** MemoryLedger that writes down each call and what it returned. */
class CountingLedger extends MemoryLedger {
  readonly calls: string[] = [];
  override async get(key: string): Promise<OrderRecord | undefined> {
    const record = await super.get(key);
    this.calls.push(`get ${record ? record.state : 'none'}`);
    return record;
  }
  override async create(record: OrderRecord): Promise<boolean> {
    const ok = await super.create(record);
    this.calls.push(`create ${ok}`);
    return ok;
  }
  override async update(record: OrderRecord): Promise<boolean> {
    const ok = await super.update(record);
    this.calls.push(`update ${ok}`);
    return ok;
  }
}

class RecordingBackend implements ConversionBackend {
  readonly adds: string[] = [];
  async add(input: AddConversionInput): Promise<{ id: string | undefined }> {
    this.adds.push(`${input.externalId} ${input.amount}`);
    // Another worker's turn comes while this add is in flight.
    await new Promise((resolve) => setImmediate(resolve));
    return { id: 'c'.repeat(24) };
  }
  async find(): Promise<PlatformConversion | undefined> {
    return undefined;
  }
  async updateAmount(): Promise<void> {}
  async refuse(): Promise<void> {}
  async accept(): Promise<void> {}
}

function worker(ledger: MemoryLedger, backend: ConversionBackend, workerId = 'w1'): WorkerDeps {
  return {
    ledger,
    sources: new Map([[source.id, source]]),
    backendFor: () => backend,
    now: () => Date.parse('2026-05-01T10:00:00.000Z'),
    workerId,
    leaseMs: 60_000,
  };
}

const event = (fields: Parameters<typeof workerEvent>[1]) => workerEvent('shop', fields);
const order = trackedOrder('shop');

describe('ledger calls per order', () => {
  it('writes a new order without reading it first: one create, one update, one add', async () => {
    const ledger = new CountingLedger();
    const backend = new RecordingBackend();
    const outcome = await processEvent(worker(ledger, backend), order);
    expect(outcome.result).toBe('added');
    expect(ledger.calls).toEqual(['create true', 'update true']);
    expect(backend.adds).toEqual(['1001 5000']);
    expect((await ledger.get(ledgerKey(PROGRAM, '1001')))?.state).toBe('added');
  });

  it('reads an order already in the ledger once its create fails: a second delivery adds nothing', async () => {
    const ledger = new CountingLedger();
    const backend = new RecordingBackend();
    await processEvent(worker(ledger, backend), order);
    ledger.calls.length = 0;
    const again = await processEvent(worker(ledger, backend), { ...order, eventId: 'e-redelivered' });
    expect(again.result).toBe('duplicate');
    expect(ledger.calls).toEqual(['create false', 'get added']);
    expect(backend.adds).toEqual(['1001 5000']);
  });

  it('nets a refund that came before its order, found by the failed create', async () => {
    const ledger = new CountingLedger();
    const backend = new RecordingBackend();
    const refund = event({ type: 'OrderRefunded', refundId: 'r1', amount: 1_500, currency: 'EUR' });
    await processEvent(worker(ledger, backend), refund);
    ledger.calls.length = 0;
    const outcome = await processEvent(worker(ledger, backend), order);
    expect(outcome.result).toBe('added');
    expect(ledger.calls[0]).toBe('create false');
    expect(ledger.calls[1]).toBe('get awaiting');
    expect(backend.adds).toEqual(['1001 3500']);
  });

  it('adds once when two workers take the same new order at once', async () => {
    const ledger = new CountingLedger();
    const backend = new RecordingBackend();
    const results = await Promise.allSettled([
      processEvent(worker(ledger, backend, 'w1'), order),
      processEvent(worker(ledger, backend, 'w2'), { ...order, eventId: 'e-twin' }),
    ]);
    expect(backend.adds).toEqual(['1001 5000']);
    const added = results.filter((r) => r.status === 'fulfilled' && r.value.result === 'added');
    const waiting = results.filter(
      (r) => r.status === 'rejected' && isConnectorError(r.reason) && r.reason.failureClass === 'transient',
    );
    expect(added).toHaveLength(1);
    expect(waiting).toHaveLength(1);
  });
});

import { describe, expect, it } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { AddConversionInput, ConversionBackend, PlatformConversion } from '../../shared/ports.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { trackedOrder, workerEvent } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/** Issue 17, part 1: a shadow source's events never reach the platform, whatever their order. */

const PROGRAM = '5ad000000000000000000101';
const config = (mode: 'live' | 'shadow') =>
  SourceConfig.parse({
    id: 'pilot',
    platform: 'generic',
    program: PROGRAM,
    rule: '5ad000000000000000000201',
    secretRef: 'PILOT_SECRET',
    mode,
  });

/** Counts every call; the platform has no conversion. */
class CountingBackend implements ConversionBackend {
  readonly calls: string[] = [];
  async add(input: AddConversionInput): Promise<{ id: string | undefined }> {
    this.calls.push(`add ${input.externalId} ${input.amount}`);
    return { id: 'c'.repeat(24) };
  }
  async find(): Promise<PlatformConversion | undefined> {
    this.calls.push('find');
    return undefined;
  }
  async updateAmount(_program: string, _id: string, amount: number): Promise<void> {
    this.calls.push(`update ${amount}`);
  }
  async refuse(): Promise<void> {
    this.calls.push('refuse');
  }
  async accept(): Promise<void> {
    this.calls.push('accept');
  }
}

function worker(mode: 'live' | 'shadow', ledger: MemoryLedger, backend: ConversionBackend): WorkerDeps {
  const source = config(mode);
  return {
    ledger,
    sources: new Map([[source.id, source]]),
    backendFor: () => backend,
    now: () => Date.parse('2026-05-01T10:00:00.000Z'),
    workerId: 'w',
    leaseMs: 60_000,
  };
}
const event = (fields: Parameters<typeof workerEvent>[1]) => workerEvent('pilot', fields);
const order = trackedOrder('pilot');

describe('shadow mode', () => {
  it('defaults to live', () => {
    expect(config('live').mode).toBe('live');
    expect(SourceConfig.parse({ ...config('live'), mode: undefined }).mode).toBe('live');
  });

  it('calls the platform for nothing: a refund before its order, the order, a second delivery, a refund, a cancellation', async () => {
    // Prepare
    const ledger = new MemoryLedger();
    const backend = new CountingBackend();
    const shadow = worker('shadow', ledger, backend);
    // Act
    const outcomes = [
      await processEvent(
        shadow,
        event({ type: 'OrderRefunded', refundId: 'r0', amount: 500, currency: 'EUR' }),
      ),
      await processEvent(shadow, order),
      await processEvent(shadow, order),
      await processEvent(shadow, event({ type: 'OrderRefunded', refundId: 'r1', amount: 1_000 })),
      await processEvent(shadow, event({ type: 'OrderCancelled' })),
    ];
    // Assess
    expect(backend.calls).toEqual([]);
    expect(outcomes.map((o) => o.result)).toEqual([
      'refund_waiting',
      'shadowed',
      'duplicate',
      'refund_shadowed',
      'refund_shadowed',
    ]);
    expect(outcomes[1]?.amount).toBe(4_500);
    expect(await ledger.get(ledgerKey(PROGRAM, '1001'))).toMatchObject({
      state: 'shadowed',
      shadow: true,
      originalAmount: 5_000,
      currentAmount: 0,
    });
  });

  it('adds nothing, once live, for an order cancelled while in shadow mode', async () => {
    // Prepare
    const ledger = new MemoryLedger();
    const backend = new CountingBackend();
    await processEvent(worker('shadow', ledger, new CountingBackend()), order);
    await processEvent(worker('shadow', ledger, new CountingBackend()), event({ type: 'OrderCancelled' }));
    // Act
    const replayed = await processEvent(worker('live', ledger, backend), order);
    // Assess: looked up, not found, and never added.
    expect(replayed.result).toBe('skipped');
    expect(backend.calls).toEqual(['find']);
    expect(await ledger.get(ledgerKey(PROGRAM, '1001'))).toMatchObject({
      state: 'skipped',
      currentAmount: 0,
    });
  });

  it('adds once live, net of the refunds recorded in shadow mode, what the platform does not have', async () => {
    // Prepare
    const ledger = new MemoryLedger();
    await processEvent(worker('shadow', ledger, new CountingBackend()), order);
    await processEvent(
      worker('shadow', ledger, new CountingBackend()),
      event({ type: 'OrderRefunded', refundId: 'r1', amount: 1_000 }),
    );
    const backend = new CountingBackend();
    // Act
    const replayed = await processEvent(worker('live', ledger, backend), order);
    // Assess
    expect(replayed.result).toBe('added');
    expect(backend.calls).toEqual(['find', 'add 1001 4000']);
    const record = await ledger.get(ledgerKey(PROGRAM, '1001'));
    expect(record).toMatchObject({ state: 'added', currentAmount: 4_000 });
    expect(record?.shadow).toBeUndefined();
    expect(record?.refunds['r1']?.status).toBe('applied');
  });

  it('records a refund netted from the order’s lines, as the live flow would send it (issue 19)', async () => {
    // Prepare: a tax-inclusive order, line A 3 × 10.00 net and line B 50.00 net, 5.00 shipping.
    const ledger = new MemoryLedger();
    const shadow = worker('shadow', ledger, new CountingBackend());
    const basis = {
      taxesIncluded: true,
      net: 8_000,
      tax: 1_520,
      shipping: 500,
      lines: [
        { id: 'A', net: 3_000, tax: 570, quantity: 3 },
        { id: 'B', net: 5_000, tax: 950, quantity: 1 },
      ],
      truncated: false,
    };
    await processEvent(shadow, event({ ...order, type: 'OrderPlaced', amount: 8_000, basis }));
    // Act: two of line A and the shipping paid back in one transaction (the adapter's gross guess).
    const outcome = await processEvent(
      shadow,
      event({ type: 'OrderRefunded', refundId: 'r1', amount: 2_880, lines: [{ id: 'A', quantity: 2 }] }),
    );
    // Assess: the net of two A units, not the transaction.
    expect(outcome).toMatchObject({ result: 'refund_shadowed', amount: 6_000 });
    const record = await ledger.get(ledgerKey(PROGRAM, '1001'));
    expect(record?.refunds['r1']).toMatchObject({ amount: 2_000, status: 'pending' });
  });
});

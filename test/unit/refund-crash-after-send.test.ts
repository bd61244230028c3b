import { describe, expect, it } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type {
  AddConversionInput,
  ConversionBackend,
  Ledger,
  PlatformConversion,
} from '../../shared/ports.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { trackedOrder, workerEvent } from '../support/events.ts';
import { KillableLedger } from '../support/killable-ledger.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * docs/exactly-once.md, rule 4: two refunds of one order applied side by side each send the target
 * their copy of the record implies, and one ledger write wins. The loser's stale target may reach
 * the platform after the winner's. A loser that dies right after that send (a Lambda timeout, a
 * crash) never reads the record again; SQS hands its message back after the visibility timeout, and
 * that delivery (or the order's next refund) must bring the platform to the ledger's target.
 */

const PROGRAM = '5ad000000000000000000101';
const NOW = Date.parse('2026-05-01T10:00:00.000Z');
const KEY = ledgerKey(PROGRAM, '1001');

const SOURCE = SourceConfig.parse({
  id: 'shop',
  platform: 'generic',
  program: PROGRAM,
  rule: '5ad000000000000000000201',
  secretRef: 'SHOP_SECRET',
});

/** A refund of order 1001 (50.00 EUR); the same event object is what SQS delivers again. */
const refund = (refundId: string, amount: number): ConnectorEvent =>
  workerEvent('shop', {
    type: 'OrderRefunded',
    eventId: `refund-${refundId}`,
    refundId,
    amount,
    currency: 'EUR',
  });

/** One conversion per externalId, set by absolute amounts as Update conversion amount does. */
class Platform implements ConversionBackend {
  /** Every call, in order: `add 1001 5000`, `find 1001`, `update 3000`, `refuse`. */
  readonly calls: string[] = [];
  readonly conversions = new Map<string, PlatformConversion>();
  /** Runs once, inside the next Update conversion amount, before it takes effect. */
  beforeNextUpdate?: () => Promise<void>;

  async add(input: AddConversionInput): Promise<{ id: string }> {
    this.calls.push(`add ${input.externalId} ${input.amount}`);
    const id = `c${String(this.conversions.size + 1).padStart(23, '0')}`;
    this.conversions.set(input.externalId, {
      id,
      externalId: input.externalId,
      amount: input.amount,
      currency: input.currency,
      status: 'pending',
    });
    return { id };
  }

  async find(_program: string, externalId: string): Promise<PlatformConversion | undefined> {
    this.calls.push(`find ${externalId}`);
    const found = this.conversions.get(externalId);
    return found ? { ...found } : undefined;
  }

  async updateAmount(_program: string, id: string, amount: number): Promise<void> {
    this.calls.push(`update ${amount}`);
    const hook = this.beforeNextUpdate;
    this.beforeNextUpdate = undefined;
    await hook?.();
    for (const [externalId, c] of this.conversions) {
      if (c.id === id) this.conversions.set(externalId, { ...c, amount });
    }
  }

  async refuse(_program: string, id: string): Promise<void> {
    this.calls.push('refuse');
    for (const [externalId, c] of this.conversions) {
      if (c.id === id) this.conversions.set(externalId, { ...c, status: 'refused' });
    }
  }

  async accept(): Promise<void> {}

  amountOf(externalId: string): number | undefined {
    return this.conversions.get(externalId)?.amount;
  }
}

function worker(ledger: Ledger, platform: ConversionBackend, workerId: string): WorkerDeps {
  return {
    ledger,
    sources: new Map([[SOURCE.id, SOURCE]]),
    backendFor: () => platform,
    now: () => NOW,
    workerId,
    leaseMs: 60_000,
  };
}

/**
 * Order 1001 added at 50.00; then refund r1 (20.00) in a worker that dies right after its Update
 * conversion amount reached the platform, while refund r2 (10.00) ran beside it from start to end:
 * r2's worker read r1 pending, sent 20.00 and recorded both applied, and r1's stale 30.00 landed
 * after it. Answers the ledger, the platform and r1's message, which SQS will deliver again.
 */
async function staleSendThenCrash() {
  const ledger = new MemoryLedger(() => NOW);
  const platform = new Platform();
  const live = worker(ledger, platform, 'w-live');
  expect((await processEvent(live, trackedOrder('shop'))).result).toBe('added');

  const dying = new KillableLedger(ledger);
  const sending = Promise.withResolvers<void>();
  const land = Promise.withResolvers<void>();
  platform.beforeNextUpdate = async () => {
    sending.resolve();
    await land.promise;
  };
  const r1 = refund('r1', 2_000);
  const first = processEvent(worker(dying, platform, 'w-dies'), r1);
  await sending.promise;

  expect(await processEvent(worker(ledger, platform, 'w-beside'), refund('r2', 1_000))).toMatchObject({
    result: 'refund_applied',
    amount: 2_000,
  });
  dying.kill();
  land.resolve();
  await expect(first).rejects.toThrow('worker killed');
  return { ledger, platform, live, r1 };
}

describe('a refund whose worker died after a stale Update conversion amount', () => {
  it('is left by the crash with the platform off the ledger (the state the next steps start from)', async () => {
    // Prepare, Act
    const { ledger, platform } = await staleSendThenCrash();

    // Assess: the ledger says 50.00 − 20.00 − 10.00, the platform holds r1's stale 30.00
    const record = await ledger.get(KEY);
    expect(record?.currentAmount).toBe(2_000);
    expect(Object.values(record?.refunds ?? {}).map((r) => [r.refundId, r.status])).toEqual([
      ['r1', 'applied'],
      ['r2', 'applied'],
    ]);
    expect(platform.amountOf('1001')).toBe(3_000);
  });

  it("brings the platform to the ledger's target when SQS delivers its message again", async () => {
    // Prepare
    const { ledger, platform, live, r1 } = await staleSendThenCrash();
    platform.calls.length = 0;

    // Act: the visibility timeout passed; the same message again
    const outcome = await processEvent(live, r1);

    // Assess: one absolute update to the ledger's 20.00, nothing subtracted twice
    const record = await ledger.get(KEY);
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 2_000 });
    expect(platform.calls).toEqual(['update 2000']);
    expect(platform.amountOf('1001')).toBe(2_000);
    expect(record?.currentAmount).toBe(2_000);
    expect(Object.values(record?.refunds ?? {}).map((r) => r.resultingAmount)).toEqual([2_000, 2_000]);
  });

  it('stays right when the order’s next refund comes before the redelivery, and the redelivery after it', async () => {
    // Prepare
    const { ledger, platform, live, r1 } = await staleSendThenCrash();

    // Act: refund r3 (5.00), then r1's message again
    const next = await processEvent(live, refund('r3', 500));
    const again = await processEvent(live, r1);

    // Assess: 50.00 − 20.00 − 10.00 − 5.00 on both sides
    const record = await ledger.get(KEY);
    expect(next).toMatchObject({ result: 'refund_applied', amount: 1_500 });
    expect(again).toMatchObject({ amount: 1_500 });
    expect(record?.currentAmount).toBe(1_500);
    expect(platform.amountOf('1001')).toBe(1_500);
  });

  it('is settled by the redelivery: a later duplicate of the refund sends nothing', async () => {
    // Prepare
    const { platform, live, r1 } = await staleSendThenCrash();
    await processEvent(live, r1);
    platform.calls.length = 0;

    // Act
    const duplicate = await processEvent(live, r1);

    // Assess
    expect(duplicate.result).toBe('refund_duplicate');
    expect(platform.calls).toEqual([]);
    expect(platform.amountOf('1001')).toBe(2_000);
  });
});

describe('a refund applied without a crash', () => {
  it('costs no platform call when its message is delivered again', async () => {
    // Prepare: order 1001 at 50.00 and refund r1 applied by one worker
    const ledger = new MemoryLedger(() => NOW);
    const platform = new Platform();
    const live = worker(ledger, platform, 'w-live');
    await processEvent(live, trackedOrder('shop'));
    const r1 = refund('r1', 2_000);
    expect((await processEvent(live, r1)).result).toBe('refund_applied');
    platform.calls.length = 0;

    // Act
    const duplicate = await processEvent(live, r1);

    // Assess
    expect(duplicate.result).toBe('refund_duplicate');
    expect(platform.calls).toEqual([]);
    expect(platform.amountOf('1001')).toBe(3_000);
  });

  it('confirms its own send when a worker beside it recorded it applied, so a duplicate sends nothing', async () => {
    // Prepare: r1's Update conversion amount is held until r2's worker has recorded both applied
    const ledger = new MemoryLedger(() => NOW);
    const platform = new Platform();
    const live = worker(ledger, platform, 'w-live');
    await processEvent(live, trackedOrder('shop'));
    const sending = Promise.withResolvers<void>();
    const land = Promise.withResolvers<void>();
    platform.beforeNextUpdate = async () => {
      sending.resolve();
      await land.promise;
    };
    const r1 = refund('r1', 2_000);
    const first = processEvent(worker(ledger, platform, 'w-slow'), r1);
    await sending.promise;
    await processEvent(worker(ledger, platform, 'w-beside'), refund('r2', 1_000));
    land.resolve();

    // Act: r1's worker lives on, reads the record again and sends the ledger's target
    const outcome = await first;
    platform.calls.length = 0;
    const duplicate = await processEvent(live, r1);

    // Assess
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 2_000 });
    expect(platform.amountOf('1001')).toBe(2_000);
    expect(duplicate.result).toBe('refund_duplicate');
    expect(platform.calls).toEqual([]);
  });
});

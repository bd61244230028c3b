import { describe, expect, it } from 'vitest';
import { compareOrder } from '../../cli/compare.ts';
import {
  type DiscardedMessage,
  type DiscardPorts,
  planDiscard,
  settleByHand,
  settleHeldByHand,
} from '../../cli/dlq-discard.ts';
import { CliError } from '../../cli/io.ts';
import { runAccept } from '../../shared/accept/job.ts';
import { PermanentError } from '../../shared/errors.ts';
import {
  countedRefunds,
  ledgerKey,
  type OrderRecord,
  type RefundRecord,
  recordRefund,
} from '../../shared/ledger.ts';
import { LEGACY_NO_AMOUNT_UPDATE } from '../../shared/legacy/backend.ts';
import type { Ledger } from '../../shared/ports.ts';
import { messageGroupId } from '../../shared/queueing.ts';
import { CANCELLATION_REFUND_ID } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { acceptDeps, acceptingShop } from '../support/accept-deps.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';
import { workersOf } from '../support/stale-send.ts';

/**
 * `connector dlq discard`: which parked messages settle a refund in the ledger, and the settling
 * write, conditional on the version read, against a worker writing the same record.
 */

const PROGRAM = '0123456789abcdef01234567';
const OTHER_PROGRAM = '89abcdef0123456789abcdef';
const AT = new Date('2026-05-01T12:00:00.000Z');

function refund(refundId: string, overrides: Partial<RefundRecord> = {}): RefundRecord {
  return {
    refundId,
    amount: 1_000,
    full: false,
    origin: 'shop',
    source: 'shop',
    receivedAt: '2026-05-01T10:00:00.000Z',
    status: 'pending',
    ...overrides,
  };
}

function record(externalId: string, overrides: Partial<OrderRecord> = {}): OrderRecord {
  const out: OrderRecord = {
    key: ledgerKey(PROGRAM, externalId),
    program: PROGRAM,
    externalId,
    source: 'shop',
    state: 'added',
    version: 0,
    conversionId: 'c-1',
    originalAmount: 10_000,
    currentAmount: 10_000,
    currency: 'EUR',
    refunds: {},
    createdAt: '2026-05-01T09:00:00.000Z',
    updatedAt: '2026-05-01T10:00:00.000Z',
    ...overrides,
  };
  return out;
}

async function ledgerWith(...records: OrderRecord[]): Promise<MemoryLedger> {
  const ledger = new MemoryLedger(() => AT.getTime());
  for (const r of records) expect(await ledger.create(r)).toBe(true);
  return ledger;
}

function ports(ledger: Pick<Ledger, 'get'>, programs: readonly string[]): DiscardPorts {
  return { ledger: () => ledger, programs: () => programs };
}

function refundMessage(externalId: string, refundId: string, program = PROGRAM): DiscardedMessage {
  return {
    groupId: messageGroupId(program, externalId),
    externalId,
    eventType: 'OrderRefunded',
    body: JSON.stringify({ type: 'OrderRefunded', externalId, refundId, source: 'shop' }),
  };
}

describe('planDiscard', () => {
  it('settles a refund the ledger holds pending on an added conversion', async () => {
    // Prepare
    const r = record('7001');
    recordRefund(r, refund('r-1'));
    const ledger = await ledgerWith(r);
    // Act
    const plan = await planDiscard(ports(ledger, [PROGRAM]), refundMessage('7001', 'r-1'));
    // Assess
    expect(plan).toMatchObject({
      kind: 'settle',
      program: PROGRAM,
      key: r.key,
      externalId: '7001',
      refundId: 'r-1',
    });
  });

  it("finds the order's program by the message's group when several are configured", async () => {
    // Prepare
    const r = record('7002', { key: ledgerKey(OTHER_PROGRAM, '7002'), program: OTHER_PROGRAM });
    recordRefund(r, refund('r-1'));
    const ledger = await ledgerWith(r);
    // Act
    const plan = await planDiscard(
      ports(ledger, [PROGRAM, OTHER_PROGRAM]),
      refundMessage('7002', 'r-1', OTHER_PROGRAM),
    );
    const unknown = await planDiscard(
      ports(ledger, [PROGRAM]),
      refundMessage('7002', 'r-1', OTHER_PROGRAM),
    ).catch((e: unknown) => e);
    // Assess
    expect(plan).toMatchObject({ kind: 'settle', program: OTHER_PROGRAM });
    expect(unknown).toBeInstanceOf(CliError);
    expect((unknown as CliError).exitCode).toBe(2);
    expect((unknown as CliError).message).toMatch(/--program/);
  });

  it("settles the refund of a source with an externalIdPrefix under the order's ledger id", async () => {
    // Prepare: source shopB puts "shopB-" before its order ids; the parked message carries the
    // shop's id (1001), its group and ledger record the prefixed one
    const ledger = await ledgerWith(
      record('shopB-1001', { source: 'shopB', refunds: { 'r-1': refund('r-1', { source: 'shopB' }) } }),
    );
    const message: DiscardedMessage = {
      groupId: messageGroupId(PROGRAM, 'shopB-1001'),
      externalId: '1001',
      source: 'shopB',
      eventType: 'OrderRefunded',
      body: JSON.stringify({ type: 'OrderRefunded', externalId: '1001', refundId: 'r-1', source: 'shopB' }),
    };
    const withSources: DiscardPorts = {
      ...ports(ledger, [PROGRAM]),
      source: (id) => (id === 'shopB' ? { program: PROGRAM, externalIdPrefix: 'shopB-' } : undefined),
    };

    // Act
    const plan = await planDiscard(withSources, message);

    // Assess
    expect(plan).toMatchObject({ kind: 'settle', key: ledgerKey(PROGRAM, 'shopB-1001'), refundId: 'r-1' });
  });

  it('settles a parked cancellation under its ledger id', async () => {
    // Prepare
    const r = record('7003');
    recordRefund(r, refund(CANCELLATION_REFUND_ID, { full: true, amount: 0 }));
    const ledger = await ledgerWith(r);
    const message: DiscardedMessage = {
      groupId: messageGroupId(PROGRAM, '7003'),
      externalId: '7003',
      eventType: 'OrderCancelled',
      body: JSON.stringify({ type: 'OrderCancelled', externalId: '7003', source: 'shop' }),
    };
    // Act
    const plan = await planDiscard(ports(ledger, [PROGRAM]), message);
    // Assess
    expect(plan).toMatchObject({ kind: 'settle', refundId: CANCELLATION_REFUND_ID });
  });

  it('only deletes when the refund is not pending, waits for its order, or the ledger has no record', async () => {
    // Prepare
    const applied = record('7004');
    recordRefund(applied, refund('r-1', { status: 'applied' }));
    const rejected = record('7005', { amountUnknown: true, imported: true, originalAmount: 0 });
    recordRefund(
      rejected,
      refund('r-1', { status: 'rejected', outcome: "the platform's conversion has no amount" }),
    );
    const awaiting = record('7006', { state: 'awaiting', originalAmount: 0, currentAmount: 0 });
    recordRefund(awaiting, refund('r-1'));
    const ledger = await ledgerWith(applied, rejected, awaiting);
    // Act
    const plans = await Promise.all([
      planDiscard(ports(ledger, [PROGRAM]), refundMessage('7004', 'r-1')),
      planDiscard(ports(ledger, [PROGRAM]), refundMessage('7005', 'r-1')),
      planDiscard(ports(ledger, [PROGRAM]), refundMessage('7006', 'r-1')),
      planDiscard(ports(ledger, [PROGRAM]), refundMessage('7007', 'r-1')),
      planDiscard(ports(ledger, [PROGRAM]), refundMessage('7004', 'r-other')),
    ]);
    // Assess
    expect(plans.map((p) => p.kind)).toEqual(['delete', 'delete', 'delete', 'delete', 'delete']);
    const why = plans.map((p) => (p.kind === 'delete' ? p.why : ''));
    expect(why[0]).toMatch(/refund r-1 of order 7004 is already applied in the ledger/);
    expect(why[1]).toMatch(/already rejected/);
    expect(why[2]).toMatch(/held until order 7006 is added/);
    expect(why[3]).toMatch(/no record of order 7007/);
    expect(why[4]).toMatch(/no refund r-other/);
  });

  it('needs neither the ledger nor a program for an accept message', async () => {
    // Prepare
    const untouchable: DiscardPorts = {
      ledger: () => {
        throw new Error('the ledger was asked for');
      },
      programs: () => {
        throw new Error('the programs were asked for (no sources configured)');
      },
    };
    const accept: DiscardedMessage = {
      groupId: messageGroupId(PROGRAM, '7008'),
      externalId: '7008',
      eventType: 'ConversionAccept',
      body: '{}',
    };
    // Act
    const plan = await planDiscard(untouchable, accept);
    // Assess
    expect(plan).toEqual({
      kind: 'delete',
      why: 'ConversionAccept is no order, refund or cancellation: the ledger has nothing to settle',
    });
  });
});

describe('settleByHand', () => {
  it('records the refund settled by hand: not pending, still counted, the amount the connector set kept', async () => {
    // Prepare
    const r = record('7101');
    // Parked after a call that failed: the worker never confirmed a send.
    recordRefund(r, refund('r-1', { unconfirmedSend: true }));
    recordRefund(r, refund('r-2', { status: 'applied', resultingAmount: 9_000 }));
    const ledger = await ledgerWith(r);
    // Act
    const result = await settleByHand(ledger, { key: r.key, refundId: 'r-1' }, AT);
    // Assess
    expect(result.kind).toBe('settled');
    const stored = await ledger.get(r.key);
    expect(stored?.refunds['r-1']).toMatchObject({
      status: 'manual',
      appliedAt: AT.toISOString(),
      outcome: `settled by hand by an operator (connector dlq discard, ${AT.toISOString()})`,
    });
    expect(stored?.refunds['r-1']?.resultingAmount).toBeUndefined();
    // Settled on the platform by the operator: no send of the worker is left to confirm.
    expect(stored?.refunds['r-1']?.unconfirmedSend).toBeUndefined();
    expect(stored?.refunds['r-2']).toMatchObject({ status: 'applied', resultingAmount: 9_000 });
    expect(stored?.currentAmount).toBe(10_000);
    expect(stored?.version).toBe(2);
    expect(
      countedRefunds(stored as OrderRecord)
        .map((x) => x.refundId)
        .sort(),
    ).toEqual(['r-1', 'r-2']);
  });

  it('reads again when a worker wrote the record meanwhile, and leaves a refund it applied as applied', async () => {
    // Prepare: between the read and the write, a worker applies r-1 (a replay beside the discard).
    const r = record('7102');
    recordRefund(r, refund('r-1'));
    const ledger = await ledgerWith(r);
    let raced = false;
    const racing: Pick<Ledger, 'get' | 'update'> = {
      get: async (key) => {
        const read = await ledger.get(key);
        if (!raced) {
          raced = true;
          const worker = await ledger.get(key);
          if (worker?.refunds['r-1']) worker.refunds['r-1'].status = 'applied';
          await ledger.update(worker as OrderRecord);
        }
        return read;
      },
      update: (record) => ledger.update(record),
    };
    // Act
    const result = await settleByHand(racing, { key: r.key, refundId: 'r-1' }, AT);
    // Assess
    expect(result).toEqual({
      kind: 'unchanged',
      why: 'refund r-1 of order 7102 is already applied in the ledger: nothing waits for it',
    });
    expect((await ledger.get(r.key))?.refunds['r-1']?.status).toBe('applied');
  });

  it('keeps what another writer wrote when it settles on the record read again', async () => {
    // Prepare: the accept job writes its lease between the read and the write.
    const r = record('7103');
    recordRefund(r, refund('r-1'));
    const ledger = await ledgerWith(r);
    let raced = false;
    const racing: Pick<Ledger, 'get' | 'update'> = {
      get: async (key) => {
        const read = await ledger.get(key);
        if (!raced) {
          raced = true;
          const other = await ledger.get(key);
          if (other) other.lastError = 'written by another writer';
          await ledger.update(other as OrderRecord);
        }
        return read;
      },
      update: (record) => ledger.update(record),
    };
    // Act
    const result = await settleByHand(racing, { key: r.key, refundId: 'r-1' }, AT);
    // Assess
    expect(result.kind).toBe('settled');
    expect(await ledger.get(r.key)).toMatchObject({
      lastError: 'written by another writer',
      refunds: { 'r-1': { status: 'manual' } },
    });
  });

  it('gives up without writing when the record keeps changing', async () => {
    // Prepare
    const r = record('7104');
    recordRefund(r, refund('r-1'));
    const ledger = await ledgerWith(r);
    const busy: Pick<Ledger, 'get' | 'update'> = {
      get: (key) => ledger.get(key),
      update: async () => false,
    };
    // Act
    const result = await settleByHand(busy, { key: r.key, refundId: 'r-1' }, AT);
    // Assess
    expect(result).toEqual({ kind: 'conflict' });
    expect((await ledger.get(r.key))?.refunds['r-1']?.status).toBe('pending');
  });
});

describe('compareOrder after a refund settled by hand', () => {
  it('says why the platform may differ from the ledger: the operator changed the amount there', async () => {
    // Prepare: the ledger keeps 100.00 (what the connector last set); the operator set 90.00 by hand.
    const r = record('7201');
    recordRefund(r, refund('r-1', { status: 'manual', outcome: 'settled by hand by an operator' }));
    // Act
    const differences = compareOrder(PROGRAM, '7201', r, [
      { id: 'c-1', externalId: '7201', amount: 9_000, currency: 'EUR', status: 'pending' },
    ]);
    // Assess
    expect(differences).toEqual([
      expect.objectContaining({
        kind: 'amount_mismatch',
        detail: expect.stringContaining('a refund was settled by hand'),
      }),
    ]);
  });
});

describe('dlq discard of an order message parked applying the refunds held for it', () => {
  // The legacy interface's answer to any amount update: the order's own message is parked with it.
  const noUpdate = () => new PermanentError(`${LEGACY_NO_AMOUNT_UPDATE} (conversion c-1; partial refund r1)`);
  const HELD_NOW = Date.parse('2026-11-23T12:00:00.000Z');
  const DAY = 86_400_000;
  const SHOP = acceptingShop(PROGRAM);
  const KEY = ledgerKey(PROGRAM, '1001');
  const orderMessage: DiscardedMessage = {
    groupId: messageGroupId(PROGRAM, '1001'),
    externalId: '1001',
    source: 'shop',
    eventType: 'OrderPlaced',
    body: JSON.stringify({ type: 'OrderPlaced', externalId: '1001', source: 'shop' }),
  };

  /**
   * Refund r1 (10.00) of order 1001 came before its order and was held (its message done). The
   * platform already had the order's conversion (the shop's pixel, 50.00), so the order adopted it
   * and its own message applied r1: the update was refused for good, the message parked.
   */
  async function heldRefundParkedWithItsOrder() {
    let now = HELD_NOW - 40 * DAY;
    const ledger = new MemoryLedger(() => now);
    const platform = new MemoryPlatform();
    const worker = workersOf(SHOP, () => now)(ledger, platform, 'w-1');
    expect((await processEvent(worker, partialRefund('shop', 'r1', 1_000))).result).toBe('refund_waiting');
    platform.has('1001', 5_000);
    platform.updateFaults.push(noUpdate());
    await expect(processEvent(worker, trackedOrder('shop'))).rejects.toThrow(LEGACY_NO_AMOUNT_UPDATE);
    const parked = await ledger.get(KEY);
    expect(parked).toMatchObject({ state: 'added', refunds: { r1: { status: 'pending' } } });
    expect(parked?.refunds['r1']?.unconfirmedSend).toBeUndefined();
    const later = (ms: number) => {
      now = ms;
    };
    return { ledger, platform, worker, later };
  }

  it('records the refunds held for the order settled by hand: the accept job accepts, a new delivery of the order sends nothing', async () => {
    // Prepare: the operator adjusted the commission on the platform by hand.
    const { ledger, platform, worker, later } = await heldRefundParkedWithItsOrder();

    // Act
    const plan = await planDiscard(ports(ledger, [PROGRAM]), orderMessage);
    expect(plan).toMatchObject({ kind: 'settleHeld', key: KEY, externalId: '1001', refundIds: ['r1'] });
    const settled = await settleHeldByHand(
      ledger,
      { key: KEY, refundIds: plan.kind === 'settleHeld' ? plan.refundIds : [] },
      AT,
    );

    // Assess
    expect(settled).toMatchObject({ kind: 'settled', refunds: [{ refundId: 'r1', status: 'manual' }] });
    const stored = await ledger.get(KEY);
    expect(stored?.refunds['r1']).toMatchObject({
      status: 'manual',
      appliedAt: AT.toISOString(),
      outcome: `settled by hand by an operator (connector dlq discard, ${AT.toISOString()})`,
    });
    // The order's own message sent nothing the platform confirmed: its mark goes with the settling.
    expect(stored?.unconfirmedSend).toBeUndefined();
    expect(stored?.currentAmount).toBe(5_000);
    platform.calls.length = 0;
    // A shop's resend or a backfill of the order: nothing to apply any more.
    expect(await processEvent(worker, trackedOrder('shop'))).toMatchObject({ result: 'duplicate' });
    expect(platform.calls).toEqual([]);
    later(HELD_NOW);
    const { deps } = acceptDeps(ledger, platform, SHOP, () => HELD_NOW);
    expect(await runAccept(deps, { limit: 10 })).toMatchObject({ accepted: 1, held: 0 });
  });

  it('leaves pending a refund whose own message applies it (still marked), and says so', async () => {
    // Prepare: then refund r2 (5.00) came, recorded with its own mark, and was parked as well.
    const { ledger, platform, worker } = await heldRefundParkedWithItsOrder();
    platform.updateFaults.push(noUpdate());
    await expect(processEvent(worker, partialRefund('shop', 'r2', 500))).rejects.toThrow(
      LEGACY_NO_AMOUNT_UPDATE,
    );
    expect((await ledger.get(KEY))?.refunds['r2']).toMatchObject({
      status: 'pending',
      unconfirmedSend: true,
    });

    // Act
    const plan = await planDiscard(ports(ledger, [PROGRAM]), orderMessage);
    const settled = await settleHeldByHand(
      ledger,
      { key: KEY, refundIds: plan.kind === 'settleHeld' ? plan.refundIds : [] },
      AT,
    );

    // Assess
    expect(plan).toMatchObject({ kind: 'settleHeld', refundIds: ['r1'], stayPending: ['r2'] });
    expect(settled.kind).toBe('settled');
    const stored = await ledger.get(KEY);
    expect(stored?.refunds['r1']?.status).toBe('manual');
    expect(stored?.refunds['r2']).toMatchObject({ status: 'pending', unconfirmedSend: true });
    // r2's own message, discarded in its turn, settles it as before.
    expect(await planDiscard(ports(ledger, [PROGRAM]), refundMessage('1001', 'r2'))).toMatchObject({
      kind: 'settle',
      refundId: 'r2',
    });
  });

  it('only deletes when nothing pending is held for the added order, or the order is not added', async () => {
    // Prepare
    const ownMessage = record('1001');
    recordRefund(ownMessage, refund('r-own', { unconfirmedSend: true }));
    const nothingPending = record('1002');
    recordRefund(nothingPending, refund('r-1', { status: 'applied' }));
    const failed = record('1003', { state: 'failed', conversionId: undefined });
    recordRefund(failed, refund('r-held'));
    const ledger = await ledgerWith(ownMessage, nothingPending, failed);
    const order = (externalId: string): DiscardedMessage => ({
      ...orderMessage,
      groupId: messageGroupId(PROGRAM, externalId),
      externalId,
    });

    // Act
    const plans = await Promise.all(
      ['1001', '1002', '1003', '1004'].map((id) => planDiscard(ports(ledger, [PROGRAM]), order(id))),
    );

    // Assess
    expect(plans.map((p) => p.kind)).toEqual(['delete', 'delete', 'delete', 'delete']);
    const why = plans.map((p) => (p.kind === 'delete' ? p.why : ''));
    expect(why[0]).toMatch(/refund r-own of order 1001 stays pending: its own message/);
    expect(why[1]).toMatch(/order 1002 has no refund pending/);
    expect(why[2]).toMatch(/refund r-held stays held until order 1003 is added \(ledger state failed\)/);
    expect(why[3]).toMatch(/no record of order 1004/);
  });

  it('reads again when a worker wrote meanwhile: a held refund it applied stays applied', async () => {
    // Prepare: two refunds held; between the read and the write a resend of r1 applies both.
    const r = record('1005', { unconfirmedSend: true });
    recordRefund(r, refund('r1'));
    recordRefund(r, refund('r2', { receivedAt: '2026-05-01T10:05:00.000Z' }));
    const ledger = await ledgerWith(r);
    let raced = false;
    const racing: Pick<Ledger, 'get' | 'update'> = {
      get: async (key) => {
        const read = await ledger.get(key);
        if (!raced) {
          raced = true;
          const worker = await ledger.get(key);
          for (const x of Object.values(worker?.refunds ?? {})) x.status = 'applied';
          await ledger.update(worker as OrderRecord);
        }
        return read;
      },
      update: (written) => ledger.update(written),
    };

    // Act
    const result = await settleHeldByHand(racing, { key: r.key, refundIds: ['r1', 'r2'] }, AT);

    // Assess
    expect(result).toEqual({
      kind: 'unchanged',
      why: 'order 1005 has no refund held for it pending in the ledger any more: nothing waits for it',
    });
    const stored = await ledger.get(r.key);
    expect(stored?.refunds['r1']?.status).toBe('applied');
    expect(stored?.refunds['r2']?.status).toBe('applied');
  });

  it('gives up without writing when the record keeps changing', async () => {
    // Prepare
    const r = record('1006');
    recordRefund(r, refund('r1'));
    const ledger = await ledgerWith(r);

    // Act
    const result = await settleHeldByHand(
      { get: (key) => ledger.get(key), update: async () => false },
      { key: r.key, refundIds: ['r1'] },
      AT,
    );

    // Assess
    expect(result).toEqual({ kind: 'conflict' });
    expect((await ledger.get(r.key))?.refunds['r1']?.status).toBe('pending');
  });
});

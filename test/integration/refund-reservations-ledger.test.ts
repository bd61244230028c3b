import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Emulators, startEmulators } from '../../infra/local/emulators.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import { ledgerKey, type OrderRecord, type RefundReservations } from '../../shared/ledger.ts';
import type { Ledger, ReservationLedger } from '../../shared/ports.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * The finance door's refund reservations, on DynamoLedger over dynalite and on the memory ledger the
 * unit tests use: the same optimistic concurrency as records, and kept apart from them, so that a
 * reservation never changes the version a worker's write is conditional on, nor shows in `list`.
 */

const PROGRAM = 'abcdefabcdefabcdefabcdef';

let emulators: Emulators;
beforeAll(async () => {
  emulators = await startEmulators();
});
afterAll(async () => {
  await emulators?.close();
});

function order(externalId: string): OrderRecord {
  return {
    key: ledgerKey(PROGRAM, externalId),
    program: PROGRAM,
    externalId,
    source: 'shop',
    state: 'added',
    version: 0,
    originalAmount: 5_000,
    currentAmount: 5_000,
    currency: 'EUR',
    refunds: {},
    createdAt: '2026-06-01T09:00:00.000Z',
    updatedAt: '2026-06-01T09:00:00.000Z',
  };
}

const reservation = (refundId: string, amount: number) => ({
  refundId,
  amount,
  reservedAt: '2026-06-01T10:00:00.000Z',
});

describe.each([
  ['DynamoLedger on dynalite', () => new DynamoLedger(emulators.dynamo, emulators.tableName)],
  ['MemoryLedger', () => new MemoryLedger()],
])('refund reservations in %s', (_name, make: () => Ledger & ReservationLedger) => {
  it('are written once from version 0, then only over the version read', async () => {
    // Prepare
    const ledger = make();
    const key = ledgerKey(PROGRAM, 'v-1');
    const first: RefundReservations = { key, version: 0, refunds: [reservation('RF-1', 3_000)] };
    const rival: RefundReservations = { key, version: 0, refunds: [reservation('RF-2', 3_000)] };
    // Act
    const before = await ledger.reservationsOf(key);
    const created = await ledger.saveReservations(first);
    const rivalCreated = await ledger.saveReservations(rival);
    const read = await ledger.reservationsOf(key);
    const stale = { ...first, version: 1, refunds: [] };
    const updated = read ? await ledger.saveReservations({ ...read, refunds: [] }) : false;
    const staleUpdated = await ledger.saveReservations(stale);
    // Assess
    expect(before).toBeUndefined();
    expect([created, rivalCreated, updated, staleUpdated]).toEqual([true, false, true, false]);
    expect(first.version).toBe(1);
    expect(read).toEqual({ key, version: 1, refunds: [reservation('RF-1', 3_000)] });
    expect(await ledger.reservationsOf(key)).toEqual({ key, version: 2, refunds: [] });
  });

  it('leave the order’s record, its version and the records listed as they are', async () => {
    // Prepare
    const ledger = make();
    const record = order('r-1');
    expect(await ledger.create(record)).toBe(true);
    // Act
    const saved = await ledger.saveReservations({
      key: record.key,
      version: 0,
      refunds: [reservation('RF-1', 1_000)],
    });
    const listed = [];
    for await (const r of ledger.list()) listed.push(r.key);
    const listedOfProgram = [];
    for await (const r of ledger.list(PROGRAM)) listedOfProgram.push(r.key);
    // Assess: a worker's write over the version it read still succeeds
    expect(saved).toBe(true);
    expect((await ledger.get(record.key))?.version).toBe(1);
    expect(await ledger.update(record)).toBe(true);
    expect(listed).toContain(record.key);
    expect(listed.every((key) => key.startsWith(`${PROGRAM}#`))).toBe(true);
    expect(listedOfProgram).toContain(record.key);
    expect(listedOfProgram.every((key) => key.startsWith(`${PROGRAM}#`))).toBe(true);
  });
});

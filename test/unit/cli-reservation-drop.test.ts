import { describe, expect, it } from 'vitest';
import { DROP_AFTER_MS, dropReservation } from '../../cli/reservations.ts';
import { ledgerKey, type RefundReservations } from '../../shared/ledger.ts';
import type { Ledger, ReservationLedger } from '../../shared/ports.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * Dropping a reservation rewrites the order's reservations item, which `POST /refunds` writes too: a
 * refund of the order requested between the drop's read and its write must not be lost, and the
 * operator must look again (that request may be the very refund, sent again and now queued).
 */

const PROGRAM = '0123456789abcdef01234567';
const KEY = ledgerKey(PROGRAM, '7001');
const RESERVED_AT = '2026-05-01T10:00:00.000Z';
const LATER = new Date('2026-05-01T12:00:00.000Z');

async function seeded(): Promise<MemoryLedger> {
  const ledger = new MemoryLedger();
  const reservations: RefundReservations = {
    key: KEY,
    version: 0,
    refunds: [{ refundId: 'RF-lost', amount: 2_000, reservedAt: RESERVED_AT }],
  };
  expect(await ledger.saveReservations(reservations)).toBe(true);
  return ledger;
}

const nothingParked = async () => ({});
/** The main queue's floor as deployed by default: the 30 minutes the reservations are past. */
const defaultFloor = async () => ({ ms: DROP_AFTER_MS, why: 'maxReceiveCount 6' });

describe('dropReservation', () => {
  it('drops nothing and says so (exit 1) when a refund of the order is reserved between its read and its write', async () => {
    // Prepare: finance's request for RF-other lands right after the drop has read the item
    const ledger = await seeded();
    const racing: Pick<Ledger, 'get'> & ReservationLedger = {
      get: (key) => ledger.get(key),
      reservationsOf: async (key) => {
        const read = await ledger.reservationsOf(key);
        const other = await ledger.reservationsOf(key);
        if (other) {
          await ledger.saveReservations({
            ...other,
            refunds: [
              ...other.refunds,
              { refundId: 'RF-other', amount: 500, reservedAt: LATER.toISOString() },
            ],
          });
        }
        return read;
      },
      saveReservations: (reservations) => ledger.saveReservations(reservations),
    };
    // Act
    const result = await dropReservation(
      { ledger: racing, floor: defaultFloor, parked: nothingParked },
      { program: PROGRAM, externalId: '7001', refundId: 'RF-lost', confirmed: true, now: LATER },
    );
    // Assess
    expect(result).toMatchObject({ kind: 'refused', exitCode: 1 });
    expect(result.kind === 'refused' ? result.message : '').toMatch(/changed/);
    expect((await ledger.reservationsOf(KEY))?.refunds.map((r) => r.refundId)).toEqual([
      'RF-lost',
      'RF-other',
    ]);
  });

  it('drops only the refund named, keeping the others reserved', async () => {
    // Prepare
    const ledger = await seeded();
    const stored = await ledger.reservationsOf(KEY);
    if (!stored) throw new Error('seeded');
    await ledger.saveReservations({
      ...stored,
      refunds: [...stored.refunds, { refundId: 'RF-kept', amount: 700, reservedAt: RESERVED_AT }],
    });
    // Act
    const result = await dropReservation(
      { ledger, floor: defaultFloor, parked: nothingParked },
      { program: PROGRAM, externalId: '7001', refundId: 'RF-lost', confirmed: true, now: LATER },
    );
    // Assess
    expect(result).toMatchObject({ kind: 'dropped', reservation: { refundId: 'RF-lost', amount: 2_000 } });
    expect((await ledger.reservationsOf(KEY))?.refunds).toEqual([
      { refundId: 'RF-kept', amount: 700, reservedAt: RESERVED_AT },
    ]);
  });
});

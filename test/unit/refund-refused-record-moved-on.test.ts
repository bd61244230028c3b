import { describe, expect, it } from 'vitest';
import { PermanentError } from '../../shared/errors.ts';
import type { ConversionBackend, Ledger } from '../../shared/ports.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { MemoryPlatform } from '../support/memory-platform.ts';
import { KEY, NOW, SOURCE, workersOf } from '../support/stale-send.ts';

/**
 * A send the platform refused for good is read again against the record (`movedOn` in
 * shared/worker/refunds.ts): a newer version means a worker beside this one may have refused the
 * conversion, and the delivery goes on from what the record says. A record that changed for another
 * reason (here the accept job recording its accept) costs one more send, then the refusal is judged
 * as ever; and however often it changes, a delivery makes at most four sends before it gives the
 * message back (transient), never parked on the way.
 */

const worker = workersOf(SOURCE, () => NOW);

/** The platform's answer to an Update conversion amount of an accepted conversion. */
const accepted422 = () =>
  new PermanentError('conversions.update answered 422: conversion is accepted', { status: 422 });

/**
 * `platform` whose Update conversion amount, before it is refused for good, has `meanwhile` change
 * the record in the ledger; `updates` counts the sends.
 */
function refusing(platform: MemoryPlatform, meanwhile: (n: number) => Promise<void>) {
  const counted = { updates: 0 };
  const backend: ConversionBackend = {
    add: (input) => platform.add(input),
    find: (program, externalId) => platform.find(program, externalId),
    refuse: (program, id) => platform.refuse(program, id),
    accept: (program, id) => platform.accept(program, id),
    async updateAmount() {
      counted.updates += 1;
      await meanwhile(counted.updates);
      throw accepted422();
    },
  };
  return { backend, counted };
}

/** Order 1001 at 50.00, added; `touch` writes its record unchanged but for `acceptedAt` (a new version). */
async function addedOrder() {
  const ledger = new MemoryLedger(() => NOW);
  const platform = new MemoryPlatform();
  expect((await processEvent(worker(ledger, platform, 'w-order'), trackedOrder('shop'))).result).toBe(
    'added',
  );
  const touch = async (store: Ledger) => {
    const record = await store.get(KEY);
    if (!record) throw new Error('order 1001 is recorded');
    record.acceptedAt = new Date(NOW).toISOString();
    expect(await store.update(record)).toBe(true);
  };
  return { ledger, platform, touch };
}

describe('a partial refund the platform refuses for good while the record changes for another reason', () => {
  it('is recorded late after one more send when the accept job records its accept meanwhile', async () => {
    // Prepare: the accept job accepts conversion 1001 on the platform while refund r1's update is in
    // flight, and records it in the ledger before the update's 422 comes back
    const { ledger, platform, touch } = await addedOrder();
    const { backend, counted } = refusing(platform, async (n) => {
      if (n > 1) return;
      await platform.accept(SOURCE.program, platform.conversions.get('1001')?.id ?? '');
      await touch(ledger);
    });

    // Act
    const outcome = processEvent(worker(ledger, backend, 'w-refund'), partialRefund('shop', 'r1', 1_000));

    // Assess: a late refund for finance, not a message parked for an operator
    await expect(outcome).rejects.toMatchObject({ name: 'LateRefundError' });
    expect(counted.updates).toBe(2);
    const record = await ledger.get(KEY);
    expect(record?.refunds['r1']).toMatchObject({ status: 'late', late: { because: 'accepted' } });
    expect(record?.acceptedAt).toBeDefined();
  });

  it('makes at most four sends in one delivery, then gives the message back, when the record changes before every reading', async () => {
    // Prepare: the conversion is accepted; another writer changes the record during every send
    const { ledger, platform, touch } = await addedOrder();
    await platform.accept(SOURCE.program, platform.conversions.get('1001')?.id ?? '');
    const { backend, counted } = refusing(platform, () => touch(ledger));

    // Act
    const outcome = processEvent(worker(ledger, backend, 'w-refund'), partialRefund('shop', 'r1', 1_000));

    // Assess: bounded, and retried (transient) rather than parked as permanent
    await expect(outcome).rejects.toMatchObject({ name: 'TransientError' });
    expect(counted.updates).toBe(4);
    expect((await ledger.get(KEY))?.refunds['r1']?.status).toBe('pending');
  });
});

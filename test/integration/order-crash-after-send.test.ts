import { describe, expect, it } from 'vitest';
import { DEFAULT_SEED } from '../../sandbox/server.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { CLICK, partialRefund, trackedOrder } from '../support/events.ts';
import { staleSendThenCrash, workersOf } from '../support/stale-send.ts';
import { workerWorld } from '../support/worker-world.ts';

/**
 * docs/exactly-once.md, rule 4, for the order's own message, on DynamoLedger over dynalite and the
 * platform sandbox: an order that adopted the conversion the sandbox already had and applied the
 * refund held for it, whose Update conversion amount reached the sandbox after the one of a refund's
 * worker beside it, and which died before reading the record again, leaves the sandbox off the
 * ledger; SQS's delivery of the order again brings the sandbox to the ledger's amount, and a later
 * duplicate sends nothing.
 */

const PROGRAM = DEFAULT_SEED.programs[0]!;
const RULE = DEFAULT_SEED.rules[0]!;
const SOURCE = SourceConfig.parse({
  id: 'shop',
  platform: 'generic',
  program: PROGRAM,
  rule: RULE,
  secretRef: 'SHOP_SECRET',
});
const UPDATE_ROUTE = '/advertiser/conversions.update';

// The platform refuses a second add of an externalId (the sandbox's default creates a second one).
const world = workerWorld({ duplicates: 'reject' });
const { sandbox } = world;
const worker = workersOf(SOURCE, Date.now);

const refund = (refundId: string, amount: number): ConnectorEvent => partialRefund('shop', refundId, amount);

const sandboxAmount = () => sandbox.control.conversions().find((c) => c.externalId === '1001')?.amount;
const updates = () => sandbox.control.calls()[UPDATE_ROUTE]?.total ?? 0;

describe("an order's message that died after a stale send applying a held refund, against the sandbox", () => {
  it("is brought to the ledger's amount by SQS's delivery of the order again", async () => {
    // Prepare: refund r1 (20.00) of order 1001 comes first and is held; the sandbox then records the
    // order at 50.00 by another path (the shop's pixel), so the order's add is answered 409
    const ledger = new DynamoLedger(world.emulators.dynamo, world.emulators.tableName);
    const live = worker(ledger, world.platform, 'w-live');
    expect((await processEvent(live, refund('r1', 2_000))).result).toBe('refund_waiting');
    await world.platform.add({
      program: PROGRAM,
      rule: RULE,
      externalId: '1001',
      kind: 'tracking',
      amount: 5_000,
      currency: 'EUR',
      cids: [CLICK],
      ip: '198.51.100.4',
    });

    // The order in a worker whose Update conversion amount (30.00) is held until the worker beside
    // it has applied refund r2 (10.00), then reaches the sandbox; the worker dies right after.
    const order = trackedOrder('shop');
    await staleSendThenCrash({ ledger, platform: world.platform, worker }, order);
    const stale = sandboxAmount();

    // Act: the visibility timeout (3 minutes) passed; the same message again, then a duplicate of it
    const later = workersOf(SOURCE, () => Date.now() + 180_000)(ledger, world.platform, 'w-live');
    const again = await processEvent(later, order);
    const updatesBefore = updates();
    const duplicate = await processEvent(later, order);

    // Assess: the crash left the order's 30.00 on the sandbox; the delivery again set the ledger's 20.00
    const record = await ledger.get(ledgerKey(PROGRAM, '1001'));
    expect(stale).toBe(3_000);
    expect(again).toMatchObject({ amount: 2_000 });
    expect(record).toMatchObject({ state: 'added', currentAmount: 2_000 });
    expect(sandboxAmount()).toBe(2_000);
    expect(duplicate.result).toBe('duplicate');
    expect(updates()).toBe(updatesBefore);
  });
});

import { describe, expect, it } from 'vitest';
import { DEFAULT_SEED } from '../../sandbox/server.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund, trackedOrder } from '../support/events.ts';
import { staleSendThenCrash, workersOf } from '../support/stale-send.ts';
import { workerWorld } from '../support/worker-world.ts';

/**
 * docs/exactly-once.md, rule 4, on DynamoLedger over dynalite and the platform sandbox: a refund's
 * worker whose Update conversion amount reached the platform after the one of a worker beside it,
 * and which died before reading the record again, leaves the sandbox off the ledger; SQS's delivery
 * of its message again brings the sandbox to the ledger's amount, and a later duplicate sends nothing.
 */

const PROGRAM = DEFAULT_SEED.programs[0]!;
const SOURCE = SourceConfig.parse({
  id: 'shop',
  platform: 'generic',
  program: PROGRAM,
  rule: DEFAULT_SEED.rules[0]!,
  secretRef: 'SHOP_SECRET',
});
const UPDATE_ROUTE = '/advertiser/conversions.update';

const world = workerWorld();
const { sandbox } = world;
const worker = workersOf(SOURCE, Date.now);

const refund = (refundId: string, amount: number): ConnectorEvent => partialRefund('shop', refundId, amount);

const sandboxAmount = () => sandbox.control.conversions().find((c) => c.externalId === '1001')?.amount;
const updates = () => sandbox.control.calls()[UPDATE_ROUTE]?.total ?? 0;

describe('a refund whose worker died after a stale Update conversion amount, against the sandbox', () => {
  it("is brought to the ledger's amount by SQS's delivery of its message again", async () => {
    // Prepare: order 1001 at 50.00 on the sandbox
    const ledger = new DynamoLedger(world.emulators.dynamo, world.emulators.tableName);
    const live = worker(ledger, world.platform, 'w-live');
    expect((await processEvent(live, trackedOrder('shop'))).result).toBe('added');

    // Refund r1 (20.00) in a worker whose Update conversion amount is held until the worker beside
    // it has applied refund r2 (10.00), then reaches the sandbox; the worker dies right after.
    const r1 = refund('r1', 2_000);
    await staleSendThenCrash({ ledger, platform: world.platform, worker }, r1);
    const stale = sandboxAmount();

    // Act: the visibility timeout (3 minutes) passed; the same message again, then a duplicate of it
    const later = workersOf(SOURCE, () => Date.now() + 180_000)(ledger, world.platform, 'w-live');
    const again = await processEvent(later, r1);
    const updatesBefore = updates();
    const duplicate = await processEvent(later, r1);

    // Assess: the crash left r1's 30.00 on the sandbox; the delivery again set the ledger's 20.00
    const record = await ledger.get(ledgerKey(PROGRAM, '1001'));
    expect(stale).toBe(3_000);
    expect(again).toMatchObject({ result: 'refund_applied', amount: 2_000 });
    expect(record?.currentAmount).toBe(2_000);
    expect(sandboxAmount()).toBe(2_000);
    expect(duplicate.result).toBe('refund_duplicate');
    expect(updates()).toBe(updatesBefore);
  });
});

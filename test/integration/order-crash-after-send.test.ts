import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Emulators, startEmulators } from '../../infra/local/emulators.ts';
import { DEFAULT_SEED, type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import { CurrentApiBackend } from '../../shared/affiliate/backend.ts';
import { AffiliateClient } from '../../shared/affiliate/client.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { ConversionBackend, Ledger } from '../../shared/ports.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { CLICK, trackedOrder, workerEvent } from '../support/events.ts';
import { KillableLedger } from '../support/killable-ledger.ts';

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

let emulators: Emulators;
let sandbox: RunningSandbox;
let platform: ConversionBackend;
beforeAll(async () => {
  emulators = await startEmulators();
  sandbox = await startSandbox({ port: 0 });
  // The platform refuses a second add of an externalId (the sandbox's default creates a second one).
  sandbox.control.setOptions({ duplicates: 'reject' });
  platform = new CurrentApiBackend(
    new AffiliateClient({ baseUrl: sandbox.url, token: sandbox.token, timeoutMs: 5_000 }),
  );
});
afterAll(async () => {
  await sandbox?.close();
  await emulators?.close();
});

function worker(ledger: Ledger, backend: ConversionBackend, workerId: string): WorkerDeps {
  return {
    ledger,
    sources: new Map([[SOURCE.id, SOURCE]]),
    backendFor: () => backend,
    now: Date.now,
    workerId,
    leaseMs: 60_000,
  };
}

const refund = (refundId: string, amount: number): ConnectorEvent =>
  workerEvent('shop', {
    type: 'OrderRefunded',
    eventId: `refund-${refundId}`,
    refundId,
    amount,
    currency: 'EUR',
  });

const sandboxAmount = () => sandbox.control.conversions().find((c) => c.externalId === '1001')?.amount;
const updates = () => sandbox.control.calls()[UPDATE_ROUTE]?.total ?? 0;

describe("an order's message that died after a stale send applying a held refund, against the sandbox", () => {
  it("is brought to the ledger's amount by SQS's delivery of the order again", async () => {
    // Prepare: refund r1 (20.00) of order 1001 comes first and is held; the sandbox then records the
    // order at 50.00 by another path (the shop's pixel), so the order's add is answered 409
    const ledger = new DynamoLedger(emulators.dynamo, emulators.tableName);
    const live = worker(ledger, platform, 'w-live');
    expect((await processEvent(live, refund('r1', 2_000))).result).toBe('refund_waiting');
    await platform.add({
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
    const sending = Promise.withResolvers<void>();
    const land = Promise.withResolvers<void>();
    const slow: ConversionBackend = {
      add: (input, call) => platform.add(input, call),
      find: (program, externalId, call) => platform.find(program, externalId, call),
      refuse: (program, id, reason, call) => platform.refuse(program, id, reason, call),
      accept: (program, id, call) => platform.accept(program, id, call),
      async updateAmount(program, id, amount, reason, call) {
        sending.resolve();
        await land.promise;
        await platform.updateAmount(program, id, amount, reason, call);
      },
    };
    const dying = new KillableLedger(ledger);
    const order = trackedOrder('shop');
    const first = processEvent(worker(dying, slow, 'w-dies'), order);
    await sending.promise;
    expect(await processEvent(worker(ledger, platform, 'w-beside'), refund('r2', 1_000))).toMatchObject({
      result: 'refund_applied',
      amount: 2_000,
    });
    dying.kill();
    land.resolve();
    await expect(first).rejects.toThrow('worker killed');
    const stale = sandboxAmount();

    // Act: the visibility timeout passed; the same message again, then a duplicate of it
    const again = await processEvent(live, order);
    const updatesBefore = updates();
    const duplicate = await processEvent(live, order);

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

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
import { trackedOrder, workerEvent } from '../support/events.ts';
import { KillableLedger } from '../support/killable-ledger.ts';

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

let emulators: Emulators;
let sandbox: RunningSandbox;
let platform: ConversionBackend;
beforeAll(async () => {
  emulators = await startEmulators();
  sandbox = await startSandbox({ port: 0 });
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

describe('a refund whose worker died after a stale Update conversion amount, against the sandbox', () => {
  it("is brought to the ledger's amount by SQS's delivery of its message again", async () => {
    // Prepare: order 1001 at 50.00 on the sandbox
    const ledger = new DynamoLedger(emulators.dynamo, emulators.tableName);
    const live = worker(ledger, platform, 'w-live');
    expect((await processEvent(live, trackedOrder('shop'))).result).toBe('added');

    // Refund r1 (20.00) in a worker whose Update conversion amount is held until the worker beside
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
    const r1 = refund('r1', 2_000);
    const first = processEvent(worker(dying, slow, 'w-dies'), r1);
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
    const again = await processEvent(live, r1);
    const updatesBefore = updates();
    const duplicate = await processEvent(live, r1);

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

import { expect } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { ConversionBackend, Ledger } from '../../shared/ports.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { partialRefund } from './events.ts';
import { KillableLedger } from './killable-ledger.ts';

/**
 * The race's unit tests, on the memory ledger and platform: the generic source `shop` of `PROGRAM`,
 * the ledger key of its order 1001, and the fixed time their workers and ledger read. (The
 * integration tests play the race in the sandbox's seeded program.)
 */
export const PROGRAM = '5ad000000000000000000101';
export const NOW = Date.parse('2026-05-01T10:00:00.000Z');
export const KEY = ledgerKey(PROGRAM, '1001');
export const SOURCE = SourceConfig.parse({
  id: 'shop',
  platform: 'generic',
  program: PROGRAM,
  rule: '5ad000000000000000000201',
  secretRef: 'SHOP_SECRET',
});

/** One worker's dependencies on a ledger and a platform; `workerId` names it in the leases it takes. */
export type WorkerOf = (ledger: Ledger, backend: ConversionBackend, workerId: string) => WorkerDeps;

/** Workers of `source` alone, reading the time from `now`, with a 60 s lease. */
export function workersOf(source: SourceConfig, now: () => number): WorkerOf {
  return (ledger, backend, workerId) => ({
    ledger,
    sources: new Map([[source.id, source]]),
    backendFor: () => backend,
    now,
    workerId,
    leaseMs: 60_000,
  });
}

/** A backend whose Update conversion amount is held in flight until the test lets it land. */
export interface HeldUpdates {
  readonly backend: ConversionBackend;
  /** Resolves once an Update conversion amount has been sent and is held. */
  readonly sending: Promise<void>;
  /** Lets every held Update conversion amount reach the platform. */
  land(): void;
}

/** `backend` with its Update conversion amount held as a slow round trip holds it; the rest as is. */
export function holdUpdates(backend: ConversionBackend): HeldUpdates {
  const sending = Promise.withResolvers<void>();
  const land = Promise.withResolvers<void>();
  return {
    backend: {
      add: (input, call) => backend.add(input, call),
      find: (program, externalId, call) => backend.find(program, externalId, call),
      refuse: (program, id, reason, call) => backend.refuse(program, id, reason, call),
      accept: (program, id, call) => backend.accept(program, id, call),
      async updateAmount(program, id, amount, reason, call) {
        sending.resolve();
        await land.promise;
        await backend.updateAmount(program, id, amount, reason, call);
      },
    },
    sending: sending.promise,
    land: () => land.resolve(),
  };
}

/**
 * docs/exactly-once.md, rule 4, on order 1001 of source `shop` at 50.00 with refund r1 (20.00) in
 * play: runs `event` in a worker (`w-dies`) whose Update conversion amount is held until refund r2
 * (10.00) has run beside it (`w-beside`) from start to end (read r1 pending, sent 20.00, recorded both
 * applied); the stale send then reaches `platform` and its worker dies before any other ledger call.
 */
export async function staleSendThenCrash(
  scene: { readonly ledger: Ledger; readonly platform: ConversionBackend; readonly worker: WorkerOf },
  event: ConnectorEvent,
): Promise<void> {
  const { ledger, platform, worker } = scene;
  const dying = new KillableLedger(ledger);
  const held = holdUpdates(platform);
  const first = processEvent(worker(dying, held.backend, 'w-dies'), event);
  await held.sending;

  expect(
    await processEvent(worker(ledger, platform, 'w-beside'), partialRefund('shop', 'r2', 1_000)),
  ).toMatchObject({
    result: 'refund_applied',
    amount: 2_000,
  });
  dying.kill();
  held.land();
  await expect(first).rejects.toThrow('worker killed');
}

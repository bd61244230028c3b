import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { backendFor } from '../../functions/worker.ts';
import { type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import { parseSources, type SourceConfig } from '../../shared/config/sources.ts';
import {
  type ConnectorEvent,
  type ConnectorEventInput,
  ConnectorEvent as ConnectorEventSchema,
} from '../../shared/domain/events.ts';
import { LegacyClient } from '../../shared/legacy/client.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * A legacy source's `legacyCommission` reaches the platform: the worker's add, wired as deployed
 * (`backendFor`), sends the commission the source states, and the legacy conversion detail (what an
 * operator reads after the first order) reports it. The sandbox keeps a legacy add's commission as
 * given, as the document's plain field suggests the platform does.
 */

let sandbox: RunningSandbox;
let program: string;
let rule: string;
let trackingId: number;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
  program = sandbox.seed.programs[0] ?? '';
  rule = sandbox.seed.rules[0] ?? '';
  trackingId = sandbox.seed.trackingIds[0] ?? 0;
});
afterAll(async () => {
  await sandbox?.close();
});
beforeEach(() => {
  sandbox.control.reset();
});

function legacyClient(): LegacyClient {
  return new LegacyClient({
    baseUrl: sandbox.url,
    userCode: sandbox.legacy.userCode,
    apiKey: sandbox.legacy.apiKey,
    maxAttempts: 2,
    baseDelayMs: 1,
  });
}

const refuseCurrent = () => Promise.reject(new Error('current backend used for a legacy source'));

function depsFor(extra: Record<string, unknown>): WorkerDeps {
  const [source] = parseSources(
    JSON.stringify([
      {
        id: 'old-shop',
        platform: 'generic',
        program,
        rule,
        secretRef: 'OLD_SHOP_SECRET',
        backend: 'legacy',
        ...extra,
      },
    ]),
    'test sources',
  ) as [SourceConfig];
  return {
    ledger: new MemoryLedger(),
    sources: new Map([[source.id, source]]),
    backendFor: backendFor({
      current: {
        add: refuseCurrent,
        find: refuseCurrent,
        updateAmount: refuseCurrent,
        accept: refuseCurrent,
        refuse: refuseCurrent,
      },
      legacy: legacyClient(),
    }),
    now: Date.now,
    workerId: 'legacy-commission-test',
    leaseMs: 60_000,
  };
}

let seq = 0;
function placed(externalId: string, amount: number): ConnectorEvent {
  return ConnectorEventSchema.parse({
    eventId: `evt-${++seq}`,
    source: 'old-shop',
    platform: 'generic',
    receivedAt: new Date().toISOString(),
    type: 'OrderPlaced',
    externalId,
    amount,
    currency: 'EUR',
    affiliateTrackingId: trackingId,
  } as ConnectorEventInput);
}

/** The commission the legacy conversion detail reports for the order, as the platform's float. */
async function detailCommission(externalId: string): Promise<number | undefined> {
  const client = legacyClient();
  const [listed] = await client.listConversions(program, { identifier: externalId });
  expect(listed).toBeDefined();
  const detail = await client.conversionDetail(program, listed?.id ?? '');
  return detail?.commissions[0]?.commission;
}

describe('the commission a legacy source sends with its add', () => {
  it('is the percentage the source states of the amount, which the conversion detail reports', async () => {
    const deps = depsFor({ legacyCommission: { percent: '8.5' } });

    const outcome = await processEvent(deps, placed('LC-1', 4990));

    expect(outcome).toMatchObject({ result: 'added', amount: 4990 });
    // 8.5 % of EUR 49.90 is 4.2415: EUR 4.24.
    expect(await detailCommission('LC-1')).toBe(4.24);
    expect(sandbox.control.conversions()[0]).toMatchObject({ externalId: 'LC-1', commission: 424 });
  });

  it('is 0 without the setting (the program rule is left to compute it, if the platform does)', async () => {
    const deps = depsFor({});

    await processEvent(deps, placed('LC-2', 4990));

    expect(await detailCommission('LC-2')).toBe(0);
  });
});

import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { backendFor } from '../../functions/worker.ts';
import { type Emulators, startEmulators } from '../../infra/local/emulators.ts';
import { type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import {
  type ConnectorEvent,
  type ConnectorEventInput,
  ConnectorEvent as ConnectorEventSchema,
} from '../../shared/domain/events.ts';
import { ConfigurationError, PermanentError } from '../../shared/errors.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { LEGACY_NO_AMOUNT_UPDATE, LEGACY_NO_TRACKING_MODE } from '../../shared/legacy/backend.ts';
import { LegacyActionError, LegacyClient } from '../../shared/legacy/client.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';

let sandbox: RunningSandbox;
let emulators: Emulators;
let program: string;
let rule: string;
let partnership: string;
let trackingId: number;

beforeAll(async () => {
  [sandbox, emulators] = await Promise.all([startSandbox({ port: 0 }), startEmulators()]);
  program = sandbox.seed.programs[0] ?? '';
  rule = sandbox.seed.rules[0] ?? '';
  partnership = sandbox.seed.partnerships[0] ?? '';
  trackingId = sandbox.seed.trackingIds[0] ?? 0;
});
afterAll(async () => {
  await Promise.all([sandbox?.close(), emulators?.close()]);
});
beforeEach(() => {
  sandbox.control.reset();
});

function legacyClient(overrides: { apiKey?: string } = {}): LegacyClient {
  return new LegacyClient({
    baseUrl: sandbox.url,
    userCode: sandbox.legacy.userCode,
    apiKey: overrides.apiKey ?? sandbox.legacy.apiKey,
    maxAttempts: 2,
    baseDelayMs: 1,
  });
}

async function add(client: LegacyClient, identifier: string, amount = 19.99) {
  return client.addConversion(program, {
    identifier,
    partnership_id: partnership,
    amount,
    commission: 0,
    rule_id: rule,
  });
}

async function idOf(client: LegacyClient, identifier: string): Promise<string> {
  const [found] = await client.listConversions(program, { identifier });
  expect(found).toBeDefined();
  return found?.id ?? '';
}

const calls = (path: string) => sandbox.control.calls()[path]?.byStatus ?? {};

describe('legacy routes of the sandbox, through LegacyClient', () => {
  it('answers 401 to wrong Basic credentials (ConfigurationError) and with a Bearer token', async () => {
    const wrong = await legacyClient({ apiKey: 'wrong-key' })
      .listConversions(program)
      .catch((e: unknown) => e);
    const bearer = await fetch(`${sandbox.url}/2.0/advertiser/${program}/conversions`, {
      headers: { authorization: `Bearer ${sandbox.token}` },
    });

    expect(wrong).toBeInstanceOf(ConfigurationError);
    expect((wrong as Error).message).not.toContain('wrong-key');
    expect(bearer.status).toBe(401);
    expect(bearer.headers.get('www-authenticate')).toMatch(/^Basic/);
  });

  it('stores a legacy add in the shared store: identifier = externalId, the float amount as minor units', async () => {
    const client = legacyClient();

    const result = await add(client, 'legacy-1', 1234.56);

    expect(result.status).toBe('done');
    const [stored] = sandbox.control.conversions();
    expect(stored).toMatchObject({
      externalId: 'legacy-1',
      amount: 123456,
      currency: 'EUR',
      kind: 'manual',
      partnership,
      affiliateTrackingId: trackingId,
      status: 'pending',
    });
    const [listed] = await client.listConversions(program, { identifier: 'legacy-1' });
    expect(listed).toMatchObject({
      identifier: 'legacy-1',
      amount: 1234.56,
      is_pending: 1,
      refused_at: null,
    });
    const detail = await client.conversionDetail(program, listed?.id ?? '');
    expect(detail).toMatchObject({ id: listed?.id, rule: { id: rule } });
  });

  it('validates the list limit (0..100) and partnership weights (0..12)', async () => {
    const raw = await fetch(`${sandbox.url}/2.0/advertiser/${program}/conversions?limit=101`, {
      headers: { authorization: `Basic ${Buffer.from('sandbox-user:sandbox-key').toString('base64')}` },
    });
    const partnerships = await legacyClient().listPartnerships(program, { trackingId });

    expect(raw.status).toBe(400);
    expect(((await raw.json()) as { message: string }).message).toMatch(/^limit: must be at most 100/);
    expect(partnerships).toHaveLength(1);
    expect(partnerships[0]).toMatchObject({ id: partnership, tracking_id: trackingId });
    expect(partnerships[0]?.weight).toBeGreaterThanOrEqual(0);
    expect(partnerships[0]?.weight).toBeLessThanOrEqual(12);
  });

  it('answers failed for an unknown partnership or rule and a duplicate: PermanentError with its code', async () => {
    const client = legacyClient();
    sandbox.control.setOptions({ duplicates: 'reject' });
    await add(client, 'dup-1');

    const unknownPartnership = await client
      .addConversion(program, {
        identifier: 'x',
        partnership_id: 'ffffffffffffffffffffffff',
        amount: 1,
        commission: 0,
        rule_id: rule,
      })
      .catch((e: unknown) => e);
    const unknownRule = await client
      .addConversion(program, {
        identifier: 'x',
        partnership_id: partnership,
        amount: 1,
        commission: 0,
        rule_id: 'eeeeeeeeeeeeeeeeeeeeeeee',
      })
      .catch((e: unknown) => e);
    const duplicate = await add(client, 'dup-1').catch((e: unknown) => e);

    for (const error of [unknownPartnership, unknownRule, duplicate]) {
      expect(error).toBeInstanceOf(LegacyActionError);
      expect(error).toBeInstanceOf(PermanentError);
      expect(error).toMatchObject({ actionStatus: 'failed', status: 200 });
    }
    expect(unknownPartnership).toMatchObject({ code: 400 });
    expect((unknownPartnership as Error).message).toContain('partnership_id');
    expect(unknownRule).toMatchObject({ code: 400 });
    expect(duplicate).toMatchObject({ code: 409 });
    expect(sandbox.control.conversions()).toHaveLength(1);
  });

  it('refuses an amount with more decimals than the currency has', async () => {
    const error = await add(legacyClient(), 'cents', 1.005).catch((e: unknown) => e);

    expect(error).toMatchObject({ actionStatus: 'failed', code: 400 });
    expect(sandbox.control.conversions()).toHaveLength(0);
  });

  it('keeps the preconditions of accept (pending, not locked, not refused) and refuse (not locked, not refused)', async () => {
    const client = legacyClient();
    await add(client, 'p-accept');
    await add(client, 'p-locked');
    const accepted = await idOf(client, 'p-accept');
    const locked = await idOf(client, 'p-locked');

    const firstAccept = await client.acceptConversion(program, accepted);
    const secondAccept = await client.acceptConversion(program, accepted).catch((e: unknown) => e);
    const refuseAccepted = await client.refuseConversion(program, accepted, { refuse_reason: 'returned' });
    const refuseAgain = await client
      .refuseConversion(program, accepted, { refuse_reason: 'again' })
      .catch((e: unknown) => e);
    const acceptRefused = await client.acceptConversion(program, accepted).catch((e: unknown) => e);
    sandbox.control.lock(locked);
    const refuseLocked = await client
      .refuseConversion(program, locked, { refuse_reason: 'too late' })
      .catch((e: unknown) => e);

    expect(firstAccept.status).toBe('done');
    expect(refuseAccepted.status).toBe('done');
    for (const error of [secondAccept, refuseAgain, acceptRefused, refuseLocked]) {
      expect(error).toBeInstanceOf(LegacyActionError);
      expect(error).toMatchObject({ actionStatus: 'aborted', code: 422 });
    }
    expect((refuseLocked as Error).message).toContain('locked');
    const byId = new Map(sandbox.control.conversions().map((c) => [c.id, c]));
    expect(byId.get(accepted)).toMatchObject({ status: 'refused', refuseReason: 'returned' });
    expect(byId.get(locked)).toMatchObject({ status: 'accepted', isLocked: true });
  });

  it('answers failed for an unknown conversion and undefined for its detail', async () => {
    const client = legacyClient();

    const refuse = await client
      .refuseConversion(program, 'ffffffffffffffffffffffff', { refuse_reason: 'x' })
      .catch((e: unknown) => e);

    expect(refuse).toMatchObject({ actionStatus: 'failed', code: 404 });
    await expect(client.conversionDetail(program, 'ffffffffffffffffffffffff')).resolves.toBeUndefined();
  });
});

describe('order, refund and cancellation of a legacy source through the worker', () => {
  let deps: WorkerDeps;
  let source: SourceConfig;
  let seq = 0;

  beforeEach(() => {
    source = SourceConfig.parse({
      id: 'legacy-shop',
      platform: 'generic',
      program,
      rule,
      secretRef: 'LEGACY_SHOP_SECRET',
      backend: 'legacy',
    });
    deps = {
      ledger: new DynamoLedger(emulators.dynamo, emulators.tableName),
      sources: new Map([[source.id, source]]),
      backendFor: backendFor({
        current: {
          add: () => Promise.reject(new Error('current backend used for a legacy source')),
          find: () => Promise.reject(new Error('current backend used for a legacy source')),
          updateAmount: () => Promise.reject(new Error('current backend used for a legacy source')),
          accept: () => Promise.reject(new Error('current backend used for a legacy source')),
          refuse: () => Promise.reject(new Error('current backend used for a legacy source')),
        },
        legacy: legacyClient(),
      }),
      now: Date.now,
      workerId: 'legacy-test',
      leaseMs: 60_000,
    };
  });

  /** A unique order id per test: the ledger table outlives the sandbox resets. */
  const orderId = () => `L-${Date.now()}-${++seq}`;

  function event(input: Record<string, unknown>): ConnectorEvent {
    return ConnectorEventSchema.parse({
      eventId: `evt-${++seq}`,
      source: 'legacy-shop',
      platform: 'generic',
      receivedAt: new Date().toISOString(),
      ...input,
    } as ConnectorEventInput);
  }

  const placed = (externalId: string, extra: Record<string, unknown> = {}) =>
    event({
      type: 'OrderPlaced',
      externalId,
      amount: 4990,
      currency: 'EUR',
      affiliateTrackingId: trackingId,
      ...extra,
    });

  const conversionsOf = (externalId: string) =>
    sandbox.control.conversions().filter((c) => c.externalId === externalId);

  it('adds an order once when it is delivered twice', async () => {
    const id = orderId();

    const first = await processEvent(deps, placed(id));
    const second = await processEvent(deps, placed(id));

    expect(first).toMatchObject({ result: 'added', amount: 4990 });
    expect(second.result).toBe('duplicate');
    const stored = conversionsOf(id);
    expect(stored).toHaveLength(1);
    expect(stored[0]).toMatchObject({ amount: 4990, partnership, status: 'pending' });
    // The legacy add answers no id, and nothing needs it yet: a refund or the accept job looks it up.
    expect(first.conversionId).toBeUndefined();
    const record = await deps.ledger.get(ledgerKey(program, id));
    expect(record).toMatchObject({ state: 'added' });
    expect(record?.conversionId).toBeUndefined();
  });

  it('refuses once on a full refund delivered twice', async () => {
    const id = orderId();
    await processEvent(deps, placed(id));
    const refund = () =>
      event({ type: 'OrderRefunded', externalId: id, refundId: 'r1', full: true, reason: 'returned' });

    const first = await processEvent(deps, refund());
    const second = await processEvent(deps, refund());

    expect(first.result).toBe('refused');
    expect(second.result).toBe('refund_duplicate');
    expect(conversionsOf(id)[0]).toMatchObject({ status: 'refused' });
    expect(calls('/2.0/advertiser/{programId}/conversions/{conversionId}/refuse')).toEqual({ 200: 1 });
  });

  it('refuses on a cancellation', async () => {
    const id = orderId();
    await processEvent(deps, placed(id));

    const outcome = await processEvent(
      deps,
      event({ type: 'OrderCancelled', externalId: id, reason: 'fraud' }),
    );

    expect(outcome.result).toBe('refused');
    expect(conversionsOf(id)[0]).toMatchObject({ status: 'refused', refuseReason: 'order cancelled: fraud' });
  });

  it('parks a partial refund with the documented reason and leaves the amount alone', async () => {
    const id = orderId();
    await processEvent(deps, placed(id));

    const error = await processEvent(
      deps,
      event({ type: 'OrderRefunded', externalId: id, refundId: 'p1', amount: 1000, currency: 'EUR' }),
    ).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PermanentError);
    expect((error as Error).message).toContain(LEGACY_NO_AMOUNT_UPDATE);
    expect(conversionsOf(id)[0]).toMatchObject({ amount: 4990, status: 'pending' });
  });

  it('parks a tracking-only order with the reason and adds nothing', async () => {
    const id = orderId();

    const error = await processEvent(
      deps,
      placed(id, {
        affiliateTrackingId: undefined,
        clickIds: ['a1b2c3d4e5f60718293a4b5c'],
        buyerIp: '203.0.113.7',
      }),
    ).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(PermanentError);
    expect((error as Error).message).toBe(LEGACY_NO_TRACKING_MODE);
    expect(conversionsOf(id)).toHaveLength(0);
    expect(await deps.ledger.get(ledgerKey(program, id))).toMatchObject({ state: 'failed' });
  });
});

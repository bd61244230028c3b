import { describe, expect, it } from 'vitest';
import { type AcceptDeps, runAccept } from '../../shared/accept/job.ts';
import { PermanentError, TransientError } from '../../shared/errors.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { acceptDeps, acceptingShop } from '../support/accept-deps.ts';
import { dueRecord } from '../support/due-record.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { ScriptedPlatform } from '../support/scripted-accept-platform.ts';

/**
 * The accept job's decisions, on the memory ledger (DynamoLedger's contract) and a scripted
 * platform: leases, transient and permanent failures, the run's bound. The sandbox and dynalite
 * run in test/integration/accept.test.ts.
 */
const PROGRAM = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const NOW = Date.parse('2026-11-23T12:00:00.000Z');
const SOURCE = acceptingShop(PROGRAM);

function due(externalId: string, days = 40, extra: Partial<OrderRecord> = {}): OrderRecord {
  return dueRecord(PROGRAM, externalId, NOW, days, extra);
}

function setup(platform: ScriptedPlatform, records: OrderRecord[]) {
  let now = NOW;
  const ledger = new MemoryLedger(() => now);
  const { deps, parked } = acceptDeps(ledger, platform, SOURCE, () => now);
  return {
    deps,
    ledger,
    parked,
    advance: (ms: number) => {
      now += ms;
    },
    async seed() {
      for (const r of records) await ledger.create(structuredClone(r));
    },
  };
}

describe('runAccept', () => {
  it('accepts each due conversion once and counts none left; a second run calls nothing', async () => {
    const platform = new ScriptedPlatform();
    const h = setup(platform, [due('1'), due('2'), due('not-due', 10)]);
    await h.seed();

    const first = await runAccept(h.deps, { limit: 10 });
    const second = await runAccept(h.deps, { limit: 10 });

    expect(first).toMatchObject({ accepted: 2, failed: 0, held: 0, dueLeft: 0 });
    expect(platform.accepts.sort()).toEqual(['conv-1', 'conv-2']);
    expect(second.items).toEqual([]);
    expect((await h.ledger.get(ledgerKey(PROGRAM, '1')))?.acceptedAt).toBe(new Date(NOW).toISOString());
    expect((await h.ledger.get(ledgerKey(PROGRAM, 'not-due')))?.acceptedAt).toBeUndefined();
  });

  it('stops at the run’s limit and counts the rest as due left, which the next run takes', async () => {
    const platform = new ScriptedPlatform();
    const h = setup(platform, [due('1', 43), due('2', 42), due('3', 41)]);
    await h.seed();

    const first = await runAccept(h.deps, { limit: 2 });
    const second = await runAccept(h.deps, { limit: 2 });

    expect(first).toMatchObject({ accepted: 2, dueLeft: 1 });
    expect(platform.accepts).toEqual(['conv-1', 'conv-2', 'conv-3']);
    expect(second).toMatchObject({ accepted: 1, dueLeft: 0 });
  });

  describe('over more than one page of the due-date index (100 keys a page)', () => {
    // DynamoDB pages a Query by the last key read (`ExclusiveStartKey`), so orders accepted earlier
    // in the run, which leave the sparse index, cannot shift the next page past due ones.
    const many = Array.from({ length: 250 }, (_, i) => due(`o-${String(i).padStart(3, '0')}`, 40 + (i % 3)));
    const conversions = many.map((r) => r.conversionId).sort();

    it('accepts every due order in one run, skipping none', async () => {
      const platform = new ScriptedPlatform();
      const h = setup(platform, many);
      await h.seed();

      const run = await runAccept(h.deps, { limit: 1000 });

      expect(run).toMatchObject({ accepted: 250, failed: 0, held: 0, dueLeft: 0 });
      expect([...platform.accepts].sort()).toEqual(conversions);
      expect((await runAccept(h.deps, { limit: 1000 })).items).toEqual([]);
    });

    it('past the run’s bound counts every due order left, and the next run takes them all', async () => {
      const platform = new ScriptedPlatform();
      const h = setup(platform, many);
      await h.seed();

      const first = await runAccept(h.deps, { limit: 120 });
      const second = await runAccept(h.deps, { limit: 1000 });

      expect(first).toMatchObject({ accepted: 120, dueLeft: 130 });
      expect(second).toMatchObject({ accepted: 130, dueLeft: 0 });
      expect([...platform.accepts].sort()).toEqual(conversions);
    });
  });

  it('leaves a transient failure for the next run, with the lease released', async () => {
    const platform = new ScriptedPlatform((_id, attempt) =>
      attempt === 1 ? new TransientError('platform answered 503') : undefined,
    );
    const h = setup(platform, [due('1')]);
    await h.seed();

    const first = await runAccept(h.deps, { limit: 10 });
    const second = await runAccept(h.deps, { limit: 10 });

    expect(first.items).toMatchObject([{ result: 'retry', detail: expect.stringMatching(/503/) }]);
    expect(first).toMatchObject({ accepted: 0, failed: 1, dueLeft: 1 });
    expect(h.parked).toEqual([]);
    expect(second).toMatchObject({ accepted: 1 });
  });

  it('counts a conversion the platform refuses to accept again as accepted when the platform shows it accepted (a run that died after its call)', async () => {
    const platform = new ScriptedPlatform((id, attempt) =>
      attempt === 1
        ? undefined
        : new PermanentError(`conversion ${id} is accepted: only a pending one can be accepted`),
    );
    const h = setup(platform, [due('1')]);
    await h.seed();
    // The first accept went through but its run died before writing the ledger.
    await platform.accept(PROGRAM, 'conv-1');

    const run = await runAccept(h.deps, { limit: 10 });

    expect(run.items).toMatchObject([{ result: 'accepted', detail: 'already accepted on the platform' }]);
    expect(h.parked).toEqual([]);
    expect((await h.ledger.get(ledgerKey(PROGRAM, '1')))?.acceptedAt).toBeDefined();
  });

  it('does not park a conversion refused a second accept while the lookup that would show it accepted fails transiently: the next run settles it', async () => {
    const platform = new ScriptedPlatform(
      (id, attempt) =>
        attempt === 1
          ? undefined
          : new PermanentError(`conversion ${id} is accepted: only a pending one can be accepted`),
      (_externalId, attempt) => (attempt === 1 ? new TransientError('platform answered 503') : undefined),
    );
    const h = setup(platform, [due('1')]);
    await h.seed();
    // The first accept went through but its run died before writing the ledger.
    await platform.accept(PROGRAM, 'conv-1');

    const first = await runAccept(h.deps, { limit: 10 });
    const second = await runAccept(h.deps, { limit: 10 });

    expect(first.items).toMatchObject([{ result: 'retry', detail: expect.stringMatching(/503/) }]);
    expect(h.parked).toEqual([]);
    expect(second.items).toMatchObject([{ result: 'accepted', detail: 'already accepted on the platform' }]);
    const record = await h.ledger.get(ledgerKey(PROGRAM, '1'));
    expect(record?.acceptedAt).toBeDefined();
    expect(record?.acceptError).toBeUndefined();
  });

  it('skips an order whose accept is in flight in another run until its lease ends', async () => {
    const platform = new ScriptedPlatform();
    const h = setup(platform, [due('1', 40, { acceptLeaseUntil: NOW + 30_000 })]);
    await h.seed();

    const during = await runAccept(h.deps, { limit: 10 });
    h.advance(30_000);
    const after = await runAccept(h.deps, { limit: 10 });

    expect(during.items).toMatchObject([{ result: 'held', detail: expect.stringMatching(/in flight/) }]);
    expect(after).toMatchObject({ accepted: 1 });
  });

  it('holds an order whose record a worker changed after the job read it (a refund recorded)', async () => {
    const platform = new ScriptedPlatform();
    const h = setup(platform, [due('1')]);
    await h.seed();
    const ledger = h.ledger;
    const racing: AcceptDeps = {
      ...h.deps,
      ledger: {
        dueForAccept: (s, d, p) => ledger.dueForAccept(s, d, p),
        update: (r) => ledger.update(r),
        async get(key) {
          const read = await ledger.get(key);
          // The worker records a refund between the job's read and its lease.
          const worker = await ledger.get(key);
          if (worker) {
            worker.refunds['r1'] = {
              refundId: 'r1',
              amount: 100,
              full: false,
              origin: 'shop',
              receivedAt: new Date(NOW).toISOString(),
              status: 'pending',
            };
            await ledger.update(worker);
          }
          return read;
        },
      },
    };

    const run = await runAccept(racing, { limit: 10 });

    expect(run.items).toMatchObject([{ result: 'held', detail: expect.stringMatching(/changed/) }]);
    expect(platform.accepts).toEqual([]);
  });

  it('looks up the id of a conversion added without one (the add’s answer carries none), accepts it and keeps the id', async () => {
    const platform = new ScriptedPlatform();
    const h = setup(platform, [due('1', 40, { conversionId: undefined }), due('2')]);
    await h.seed();

    const first = await runAccept(h.deps, { limit: 10 });
    const second = await runAccept(h.deps, { limit: 10 });

    expect(first).toMatchObject({ accepted: 2, failed: 0, dueLeft: 0 });
    expect(first.items.find((i) => i.externalId === '1')).toMatchObject({
      result: 'accepted',
      conversionId: 'conv-1',
    });
    expect(platform.accepts.sort()).toEqual(['conv-1', 'conv-2']);
    // Only the order without an id was looked up.
    expect(platform.finds).toEqual(['1']);
    expect(await h.ledger.get(ledgerKey(PROGRAM, '1'))).toMatchObject({
      conversionId: 'conv-1',
      acceptedAt: new Date(NOW).toISOString(),
    });
    expect(second.items).toEqual([]);
  });

  it('leaves an order whose id lookup fails transiently for the next run, with the lease released', async () => {
    const platform = new ScriptedPlatform(undefined, (_externalId, attempt) =>
      attempt === 1 ? new TransientError('platform answered 503') : undefined,
    );
    const h = setup(platform, [due('1', 40, { conversionId: undefined })]);
    await h.seed();

    const first = await runAccept(h.deps, { limit: 10 });
    const second = await runAccept(h.deps, { limit: 10 });

    expect(first.items).toMatchObject([{ result: 'retry', detail: expect.stringMatching(/503/) }]);
    expect(h.parked).toEqual([]);
    expect(second).toMatchObject({ accepted: 1 });
    expect(platform.accepts).toEqual(['conv-1']);
  });

  it('parks an order the ledger holds as added whose conversion the platform does not have, with the reason', async () => {
    const platform = new ScriptedPlatform(undefined, () => 'none');
    const h = setup(platform, [due('1', 40, { conversionId: undefined })]);
    await h.seed();

    const first = await runAccept(h.deps, { limit: 10 });
    const second = await runAccept(h.deps, { limit: 10 });

    expect(first.items).toMatchObject([{ result: 'failed', detail: expect.stringMatching(/no conversion/) }]);
    expect(platform.accepts).toEqual([]);
    expect(h.parked).toHaveLength(1);
    expect(h.parked[0]).toMatchObject({ failureClass: 'permanent', externalId: '1' });
    expect(h.parked[0]?.reason).toMatch(/no conversion with externalId 1/);
    expect(second.items).toEqual([]);
  });

  it('with olderThanMs takes orders older than that instead of the source’s window', async () => {
    const platform = new ScriptedPlatform();
    const h = setup(platform, [due('old', 40), due('recent', 12)]);
    await h.seed();

    const run = await runAccept(h.deps, { limit: 10, olderThanMs: 10 * 86_400_000, dryRun: true });

    expect(run.items.map((i) => [i.externalId, i.result])).toEqual([
      ['old', 'would_accept'],
      ['recent', 'would_accept'],
    ]);
    expect(platform.accepts).toEqual([]);
  });
});

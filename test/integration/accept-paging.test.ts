import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Emulators, startEmulators } from '../../infra/local/emulators.ts';
import { type AcceptDeps, type AcceptSummary, runAccept } from '../../shared/accept/job.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import type { OrderRecord } from '../../shared/ledger.ts';
import type { Ledger } from '../../shared/ports.ts';
import { acceptDeps, acceptingShop } from '../support/accept-deps.ts';
import { dueRecord } from '../support/due-record.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { ScriptedPlatform } from '../support/scripted-accept-platform.ts';

/**
 * The memory ledger is the accept job's ledger in the unit tests (test/unit/accept-job.test.ts): here
 * the same runs over more than one page of the due-date index (100 keys a page) go through it and
 * through DynamoLedger on dynalite's GSI, and must take the due dates in the same order and accept
 * the same orders. Among orders due at the same instant DynamoDB promises no order (dynalite's is
 * not the key's), so which of those a bounded run takes may differ.
 */
const PROGRAM = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const NOW = Date.parse('2026-11-23T12:00:00.000Z');
const DAY = 86_400_000;
const SOURCE = acceptingShop(PROGRAM);

/** 250 due orders on three due dates, so that pages end inside runs of equal dates. */
function dueOrders(): OrderRecord[] {
  return Array.from({ length: 250 }, (_, i) =>
    dueRecord(PROGRAM, `o-${String(i).padStart(3, '0')}`, NOW, 40, {
      acceptDueAt: new Date(NOW - (10 + (i % 3)) * DAY).toISOString(),
    }),
  );
}

interface Runs {
  readonly summaries: readonly Omit<AcceptSummary, 'items'>[];
  /** The due date of each order accepted, in the order of the calls. */
  readonly dueDates: readonly string[];
  readonly accepted: readonly string[];
}

/** A run bounded at 120 calls, then one that takes the rest. */
async function twoRuns(ledger: Ledger & AcceptDeps['ledger']): Promise<Runs> {
  for (const record of dueOrders()) expect(await ledger.create(record)).toBe(true);
  const platform = new ScriptedPlatform();
  const { deps } = acceptDeps(ledger, platform, SOURCE, () => NOW);
  const summaries = [];
  for (const limit of [120, 1000]) {
    const { items: _items, ...summary } = await runAccept(deps, { limit });
    summaries.push(summary);
  }
  const dueAt = new Map(dueOrders().map((r) => [r.conversionId, r.acceptDueAt]));
  return {
    summaries,
    dueDates: platform.accepts.map((id) => dueAt.get(id) ?? `unknown ${id}`),
    accepted: [...platform.accepts].sort(),
  };
}

let emulators: Emulators;
beforeAll(async () => {
  emulators = await startEmulators();
});
afterAll(async () => {
  await emulators?.close();
});

describe('the accept job over more than one page of due orders', () => {
  it('takes the due orders in the same order on the memory ledger as on DynamoDB (dynalite), skipping none', async () => {
    // Act
    const onDynamo = await twoRuns(new DynamoLedger(emulators.dynamo, emulators.tableName));
    const inMemory = await twoRuns(new MemoryLedger(() => NOW));

    // Assess
    expect(onDynamo.summaries).toEqual([
      { accepted: 120, failed: 0, held: 0, dueLeft: 130 },
      { accepted: 130, failed: 0, held: 0, dueLeft: 0 },
    ]);
    expect(onDynamo.accepted).toEqual(dueOrders().map((r) => r.conversionId));
    expect(onDynamo.dueDates).toEqual(
      dueOrders()
        .map((r) => r.acceptDueAt)
        .sort(),
    );
    expect(inMemory).toEqual(onDynamo);
  });
});

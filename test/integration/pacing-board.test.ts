import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Emulators, startEmulators } from '../../infra/local/emulators.ts';
import { LOCAL_AWS } from '../../local/defaults.ts';
import { DynamoPacingBoard } from '../../shared/adapters/dynamo-pacing-board.ts';
import { claimShare } from '../../shared/affiliate/rate-limiter.ts';

let emulators: Emulators;

/**
 * The board gives each share 1 s (the record is advice). Instances that claim at once queue behind
 * dynalite's lock on the one item, on cores other test files share: on a loaded machine the last of
 * forty waited past that second and its claim threw AbortError, which says nothing of the claim
 * protocol tested here. These tests give a share as long as the test itself.
 */
const UNHURRIED_MS = 60_000;

beforeAll(async () => {
  emulators = await startEmulators();
});
afterAll(async () => {
  await emulators?.close();
});

describe('DynamoPacingBoard on dynalite (the pacing table)', () => {
  it("returns every busy instance's pace per route, its own included, and drops the ones gone quiet", async () => {
    // Prepare: three instances on one clock
    let now = 1_000_000;
    const board = () =>
      new DynamoPacingBoard({ client: emulators.dynamo, table: emulators.pacingTableName, now: () => now });
    const [a, b, c] = [board(), board(), board()];

    // Act: all three share on the add route, one on another route; then c goes quiet for 3 s
    await a.share('/advertiser/conversions.add', 40);
    await b.share('/advertiser/conversions.add', 25);
    await c.share('/advertiser/conversions.add', 10);
    const other = await a.share('/advertiser/conversions.info', 70);
    const all = await a.share('/advertiser/conversions.add', 41);
    now += 3000;
    await b.share('/advertiser/conversions.add', 26);
    const after = await a.share('/advertiser/conversions.add', 42);

    // Assess
    expect([...all].sort((x, y) => x - y)).toEqual([10, 25, 41]);
    expect(other).toEqual([70]);
    expect([...after].sort((x, y) => x - y)).toEqual([26, 42]);
  });

  it('removes what went stale from the item, so it stays small', async () => {
    // Prepare
    let now = 2_000_000;
    const board = () =>
      new DynamoPacingBoard({ client: emulators.dynamo, table: emulators.pacingTableName, now: () => now });
    const gone = Array.from({ length: 5 }, board);
    const stays = board();
    for (const instance of gone) await instance.share('r', 5);

    // Act: the five go quiet; the one left shares twice (sees them stale, then removes them)
    now += 5000;
    await stays.share('r', 50);
    await stays.share('r', 50);
    const item = await emulators.dynamo.send(
      new GetItemCommand({ TableName: emulators.pacingTableName, Key: { pk: { S: 'pace#r' } } }),
    );

    // Assess: pk and the instance left
    expect(Object.keys(item.Item ?? {})).toHaveLength(2);
  });

  it('counts no entry written from the future (a garbled record, a clock far ahead), and removes it', async () => {
    // Prepare: an instance whose clock runs an hour ahead shares a pace, then one on time shares
    let now = 3_000_000;
    let ahead = now + 3_600_000;
    const onTime = new DynamoPacingBoard({
      client: emulators.dynamo,
      table: emulators.pacingTableName,
      now: () => now,
    });
    const fromTheFuture = new DynamoPacingBoard({
      client: emulators.dynamo,
      table: emulators.pacingTableName,
      now: () => ahead,
    });
    await fromTheFuture.share('future', 60);

    // Act: the one on time shares twice (sees the entry as not fresh, then removes it)
    const first = await onTime.share('future', 30);
    now += 100;
    ahead += 100;
    await onTime.share('future', 30);
    const item = await emulators.dynamo.send(
      new GetItemCommand({ TableName: emulators.pacingTableName, Key: { pk: { S: 'pace#future' } } }),
    );

    // Assess: its own pace only, and the item holds pk and itself
    expect(first).toEqual([30]);
    expect(Object.keys(item.Item ?? {})).toHaveLength(2);
  });

  it('keeps the entry of an instance that came back after another saw it stale', async () => {
    // Prepare: two instances busy on one clock; a goes quiet for 3 s and b sees its entry stale
    let now = 4_000_000;
    const board = () =>
      new DynamoPacingBoard({ client: emulators.dynamo, table: emulators.pacingTableName, now: () => now });
    const [a, b] = [board(), board()];
    await a.share('back', 40);
    await b.share('back', 25);
    now += 3000;
    await b.share('back', 25);

    // Act: a comes back and shares, then b shares again (the share that removes what it saw stale)
    await a.share('back', 41);
    now += 100;
    const seenByB = await b.share('back', 25);
    const item = await emulators.dynamo.send(
      new GetItemCommand({ TableName: emulators.pacingTableName, Key: { pk: { S: 'pace#back' } } }),
    );

    // Assess: b counts a's fresh pace, and the item still holds pk, a and b
    expect([...seenByB].sort((x, y) => x - y)).toEqual([25, 41]);
    expect(Object.keys(item.Item ?? {})).toHaveLength(3);
  });

  it('still removes the entry that stayed stale when one removed alongside it came back', async () => {
    // Prepare: three instances busy; all but c go quiet, and c sees a and b stale
    let now = 5_000_000;
    const board = () =>
      new DynamoPacingBoard({ client: emulators.dynamo, table: emulators.pacingTableName, now: () => now });
    const [a, b, c] = [board(), board(), board()];
    await a.share('some-back', 40);
    await b.share('some-back', 30);
    await c.share('some-back', 20);
    now += 3000;
    await c.share('some-back', 20);

    // Act: a comes back; c shares (its removal of a and b meets a's fresh entry), then once more
    await a.share('some-back', 41);
    now += 100;
    const seen = await c.share('some-back', 20);
    await c.share('some-back', 20);
    const item = await emulators.dynamo.send(
      new GetItemCommand({ TableName: emulators.pacingTableName, Key: { pk: { S: 'pace#some-back' } } }),
    );

    // Assess: c's pace written and a's counted; b, still stale, gone by the second share
    expect([...seen].sort((x, y) => x - y)).toEqual([20, 41]);
    expect(Object.keys(item.Item ?? {})).toHaveLength(3);
  });

  it('lets a starting instance claim what the busy others leave', async () => {
    // Prepare: two instances busy on the route
    const board = () => new DynamoPacingBoard({ client: emulators.dynamo, table: emulators.pacingTableName });
    const [a, b, starting] = [board(), board(), board()];
    await a.share('claim-one', 50);
    await b.share('claim-one', 20);
    let seen: readonly number[] = [];

    // Act
    const claimed = await starting.claim('claim-one', 8, (others) => {
      seen = others;
      return 92 - others.reduce((x, y) => x + y, 0);
    });

    // Assess: it saw the others, not itself, and its claim is what they see next
    expect([...seen].sort((x, y) => x - y)).toEqual([20, 50]);
    expect(claimed).toBe(22);
    expect([...(await a.share('claim-one', 50))].sort((x, y) => x - y)).toEqual([20, 22, 50]);
  });

  it('gives each of forty instances starting at the same moment its claim, the route split among them', async () => {
    // Prepare: twice the stack's default maxConcurrency of instances at their start pace of 2, every
    // one deciding as the limiter does (`claimShare`: an equal share of 98, no more than the settled
    // others leave free, split among the instances still claiming); their writes counted. Their
    // clock stands at the moment they start: however long the machine takes over the 160-odd
    // UpdateItems, every entry stays within the 2 s an entry counts for
    const moment = 6_000_000;
    const client = new DynamoDBClient({ ...LOCAL_AWS, endpoint: emulators.dynamoEndpoint });
    let writes = 0;
    client.middlewareStack.add(
      (next) => (args) => {
        writes += 1;
        return next(args);
      },
      { step: 'initialize' },
    );
    const board = () =>
      new DynamoPacingBoard({
        client,
        table: emulators.pacingTableName,
        now: () => moment,
        timeoutMs: UNHURRIED_MS,
      });
    const fleet = Array.from({ length: 40 }, board);
    const decide = (others: readonly number[], claiming: number) =>
      Math.max(2, claimShare(98, others, claiming));

    // Act
    const claims = await Promise.all(fleet.map((instance) => instance.claim('claim-forty', 2, decide)));
    const claimWrites = writes;
    const paces = await fleet[0]?.share('claim-forty', claims[0] ?? 2);
    client.destroy();

    // Assess: none gave up, in about two reads each (a read and a write per turn: a claim that let
    // one instance through per read made about sixteen writes each, and about half ran out of their
    // ten), and the route is split, not taken twice
    expect(claims.filter((c) => c === undefined)).toHaveLength(0);
    expect(claimWrites / fleet.length).toBeLessThanOrEqual(6);
    const total = (paces ?? []).reduce((x, y) => x + y, 0);
    expect(paces).toHaveLength(40);
    expect(total).toBeLessThanOrEqual(98 + 1);
    expect(total).toBeGreaterThanOrEqual(98 * 0.9);
  });

  it('splits what the busy instances leave free among ten instances claiming at the same moment', async () => {
    // Prepare: two instances busy at 50 and 20 of 92; ten starting at their start pace of 1, each
    // deciding its part of what the busy ones leave (no equal share of the route to cap it); one
    // clock, standing, as for the forty
    const moment = 7_000_000;
    const board = () =>
      new DynamoPacingBoard({
        client: emulators.dynamo,
        table: emulators.pacingTableName,
        now: () => moment,
        timeoutMs: UNHURRIED_MS,
      });
    const [a, b] = [board(), board()];
    await a.share('claim-ten', 50);
    await b.share('claim-ten', 20);
    const fleet = Array.from({ length: 10 }, board);
    const seen: number[] = [];

    // Act
    const claims = await Promise.all(
      fleet.map((instance) =>
        instance.claim('claim-ten', 1, (others, claiming) => {
          seen.push(others.length + claiming);
          return Math.max(1, (92 - others.reduce((x, y) => x + y, 0)) / (claiming + 1));
        }),
      ),
    );
    const paces = await a.share('claim-ten', 50);

    // Assess: every claim counted the eleven others, and the recorded paces add up to the 92 (each
    // claim at least 1), however the claims interleaved: had a claimer not seen the others
    // claiming, it would have taken the whole 22 left
    expect(claims.filter((c) => c === undefined)).toHaveLength(0);
    expect(seen.at(-1)).toBe(11);
    const total = (paces ?? []).reduce((x, y) => x + y, 0);
    expect(paces).toHaveLength(12);
    expect(total).toBeLessThanOrEqual(92 + 10);
    expect(total).toBeGreaterThanOrEqual(92 - 1);
  });
});

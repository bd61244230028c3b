import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Emulators, startEmulators } from '../../infra/local/emulators.ts';
import { DynamoPacingBoard } from '../../shared/adapters/dynamo-pacing-board.ts';

let emulators: Emulators;
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

  it('never gives the free budget to two of ten instances starting at the same moment', async () => {
    // Prepare: ten instances at their start pace of 8
    const board = () => new DynamoPacingBoard({ client: emulators.dynamo, table: emulators.pacingTableName });
    const fleet = Array.from({ length: 10 }, board);

    // Act: all claim at once what the others leave of 92
    const claims = await Promise.all(
      fleet.map((instance) =>
        instance.claim('claim-ten', 8, (others) => Math.max(1, 92 - others.reduce((x, y) => x + y, 0))),
      ),
    );
    const paces = await fleet[0]?.share('claim-ten', claims[0] ?? 8);

    // Assess: the recorded paces add up to the 92 (each at least 1), however the claims interleaved:
    // without the condition on the write, several read the others at their start pace and take
    // most of the route each
    const total = (paces ?? []).reduce((x, y) => x + y, 0);
    expect(paces).toHaveLength(10);
    expect(total).toBeLessThanOrEqual(92 + 10);
    expect(total).toBeGreaterThanOrEqual(92);
  });
});

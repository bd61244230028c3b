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
});

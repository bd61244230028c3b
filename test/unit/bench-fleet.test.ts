import { describe, expect, it } from 'vitest';
import { fleetShape } from '../bench/fleet.ts';

/**
 * The bench's multi-instance rows stand for the deployed worker fleet: the event source holds at most
 * maxConcurrency batches of batchSize messages at once, each container starting at its share of 80%
 * of the limit.
 */
describe('fleetShape', () => {
  it('splits the deployed fleet’s batches among the instances, so each holds about a second of its work', () => {
    // Prepare: the deployed settings (maxConcurrency 20, batches of 5, limit 100/s)
    const deployed = { maxConcurrency: 20, batchSize: 5, limitPerSecond: 100 };

    // Act
    const shapes = [1, 2, 5, 10].map((instances) => fleetShape({ ...deployed, instances }));

    // Assess: 20 batches in flight at every N, and the fleet starts at 80/s as twenty containers do
    expect(shapes.map((s) => s.pollers)).toEqual([20, 10, 4, 2]);
    expect(shapes.map((s) => s.initialRatePerSecond)).toEqual([80, 40, 16, 8]);
    expect(shapes.map((s) => s.batchSize)).toEqual([5, 5, 5, 5]);
    for (const [i, n] of [1, 2, 5, 10].entries()) {
      const shape = shapes[i];
      if (!shape) throw new Error('no shape');
      expect(n * shape.pollers).toBe(20);
      // messages held per instance ÷ its share of the fleet's pace at the limit: 1 s at every N
      expect((shape.pollers * shape.batchSize) / (100 / n)).toBe(1);
    }
  });

  it('gives an instance at least one batch, and an uneven split rounds up', () => {
    expect(fleetShape({ maxConcurrency: 20, batchSize: 5, limitPerSecond: 100, instances: 30 })).toEqual({
      pollers: 1,
      batchSize: 5,
      initialRatePerSecond: 4,
    });
    expect(fleetShape({ maxConcurrency: 20, batchSize: 5, limitPerSecond: 100, instances: 3 })).toEqual({
      pollers: 7,
      batchSize: 5,
      initialRatePerSecond: 28,
    });
  });

  it('reproduces the earlier rounds’ shapes with --batch-size 10, and --multi-pollers 10 --max-concurrency 100', () => {
    // Until 2026-11-27 the event source took batches of ten: each instance held two seconds of its work
    expect(
      [1, 2, 5, 10].map((instances) =>
        fleetShape({ maxConcurrency: 20, batchSize: 10, limitPerSecond: 100, instances }),
      ),
    ).toEqual(
      [20, 10, 4, 2].map((pollers) => ({
        pollers,
        batchSize: 10,
        initialRatePerSecond: (80 * pollers) / 20,
      })),
    );
    // Before 2026-11-26 19:00 UTC, every instance held ten batches of ten whatever N and started at 80% ÷ 10 = 8/s
    for (const instances of [1, 2, 5, 10])
      expect(
        fleetShape({ maxConcurrency: 100, batchSize: 10, limitPerSecond: 100, instances, pollers: 10 }),
      ).toEqual({
        pollers: 10,
        batchSize: 10,
        initialRatePerSecond: 8,
      });
  });

  it('never starts an instance above the limit or below one request per second', () => {
    expect(
      fleetShape({ maxConcurrency: 2, batchSize: 5, limitPerSecond: 100, instances: 1 }).initialRatePerSecond,
    ).toBe(80);
    expect(
      fleetShape({ maxConcurrency: 20, batchSize: 5, limitPerSecond: 100, instances: 1, pollers: 40 })
        .initialRatePerSecond,
    ).toBe(100);
    expect(
      fleetShape({ maxConcurrency: 1000, batchSize: 5, limitPerSecond: 100, instances: 1000 })
        .initialRatePerSecond,
    ).toBe(1);
  });
});

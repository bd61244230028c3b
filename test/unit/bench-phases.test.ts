import { describe, expect, it } from 'vitest';
import { callsByPhase, callsLine, drainPhases, phasesLine } from '../bench/phases.ts';

/** The bench's multi-instance rows: where a drain's time goes against the route's limit. */

/** `count` add times from `from` ms, `every` ms apart. */
const spaced = (from: number, count: number, every: number) =>
  Array.from({ length: count }, (_, i) => from + i * every);

describe('drainPhases', () => {
  it('splits a drain at the last instance to start and the first to run dry', () => {
    // Prepare: instance a adds every 20 ms from 0 to 2,000 ms; b starts at 500 ms and runs dry at
    // 1,500 ms (both at 50/s: 100/s together while both add)
    const a = spaced(0, 101, 20);
    const b = spaced(500, 51, 20);

    // Act
    const phases = drainPhases([a, b], 100);

    // Assess: up to 500 ms one instance (26 adds after the drain's first, b's first among them:
    // 0.24 s lost at 100/s); to 1,500 ms both (100 adds, none lost); to 2,000 ms one again (25)
    expect(phases.map((p) => p.name)).toEqual(['start', 'all adding', 'tail']);
    expect(phases.map((p) => p.seconds)).toEqual([0.5, 1, 0.5]);
    expect(phases.map((p) => p.adds)).toEqual([26, 100, 25]);
    expect(phases.map((p) => p.lostSeconds)).toEqual([0.24, 0, 0.25]);
    // every add but the first (the drain's zero) is in one phase
    expect(phases.reduce((n, p) => n + p.adds, 0)).toBe(a.length + b.length - 1);
  });

  it('gives one instance alone the whole drain as the middle', () => {
    const phases = drainPhases([spaced(1000, 11, 100)], 100);

    expect(phases).toEqual([
      { name: 'start', seconds: 0, adds: 0, lostSeconds: 0 },
      { name: 'all adding', seconds: 1, adds: 10, lostSeconds: 0.9 },
      { name: 'tail', seconds: 0, adds: 0, lostSeconds: 0 },
    ]);
  });

  it('starts the tail no sooner than the start ends when an instance runs dry before another starts', () => {
    // Prepare: a adds from 0 to 400 ms, b from 600 to 1,000 ms
    const phases = drainPhases([spaced(0, 5, 100), spaced(600, 5, 100)], 100);

    expect(phases.map((p) => p.seconds)).toEqual([0.6, 0, 0.4]);
    expect(phases.map((p) => p.adds)).toEqual([5, 0, 4]);
  });

  it('leaves out instances that made no add, and a drain with none has no phases', () => {
    expect(drainPhases([spaced(0, 3, 100), []], 100).map((p) => p.seconds)).toEqual([0, 0.2, 0]);
    expect(drainPhases([[], []], 100)).toEqual([]);
  });
});

describe('phasesLine', () => {
  it('names each phase with its length, its adds and the seconds it lost, and the total', () => {
    const line = phasesLine(drainPhases([spaced(0, 101, 20), spaced(500, 51, 20)], 100));

    expect(line).toBe(
      'start 0.50 s, 26 adds (0.24 s lost); all adding 1.00 s, 100 adds (0.00 s lost); tail 0.50 s, 25 adds (0.25 s lost); 0.49 s lost in all',
    );
  });

  it('writes a phase that ran over the limit as a negative loss', () => {
    // Prepare: one instance at 120/s for a second (a route whose limit is 100/s)
    const line = phasesLine(drainPhases([spaced(0, 121, 1000 / 120)], 100));

    expect(line).toContain('all adding 1.00 s, 120 adds (−0.20 s lost)');
    expect(line).toContain('−0.20 s lost in all');
  });
});

describe('callsByPhase', () => {
  it("counts each AWS call in the phase it began in, with the mean of its answers' times", () => {
    // Prepare: the drain of the first test (start to 500 ms, tail from 1,500 ms); calls that began
    // before the first add (-300), in the start (0 and 499: slow, the emulator under the start's
    // load), in the middle (800), in the tail and after the last add (1,600 and 2,100)
    const adds = [spaced(1000, 101, 20), spaced(1500, 51, 20)];
    const calls: [number, number][] = [
      [700, 900],
      [1000, 600],
      [1499, 400],
      [1800, 20],
      [2600, 10],
      [3100, 30],
    ];

    // Act
    const phases = callsByPhase(adds, calls);

    // Assess
    expect(phases).toEqual([
      { name: 'before the first add', calls: 1, meanMs: 900 },
      { name: 'start', calls: 2, meanMs: 500 },
      { name: 'all adding', calls: 1, meanMs: 20 },
      { name: 'tail', calls: 2, meanMs: 20 },
    ]);
  });

  it('gives a phase without calls a mean of 0, and a drain without adds no phases', () => {
    expect(callsByPhase([spaced(0, 11, 100)], [[500, 12]]).map((p) => [p.calls, p.meanMs])).toEqual([
      [0, 0],
      [0, 0],
      [1, 12],
      [0, 0],
    ]);
    expect(callsByPhase([[]], [[0, 5]])).toEqual([]);
  });

  it('prints the phases with calls, their mean times and counts', () => {
    const line = callsLine(
      callsByPhase(
        [spaced(1000, 101, 20), spaced(1500, 51, 20)],
        [
          [700, 900.4],
          [1000, 600],
          [1499, 400],
          [1800, 20],
        ],
      ),
    );

    expect(line).toBe('before the first add 900 ms (1); start 500 ms (2); all adding 20 ms (1)');
  });
});

import { describe, expect, it } from 'vitest';
import {
  bundleOwner,
  busyByOwner,
  type CpuProfile,
  fileOwner,
  moduleStarts,
  ownerOf,
  shares,
} from '../bench/profile.ts';

/** The bench's `--profile`: a worker's busy time by package, from its V8 CPU profile and bundle. */

const BUNDLE = [
  '// node_modules/@smithy/core/dist-es/client.js',
  'function send() {}',
  '// ../../elsewhere/node_modules/zod/v4/core/parse.js',
  'function parse() {}',
  '// shared/worker/orders.ts',
  'async function placeOrder() {}',
].join('\n');
const URL = 'file:///tmp/bench-instance-x/instance.mjs';
const frame = (functionName: string, url: string, lineNumber = 0) => ({ functionName, url, lineNumber });

const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)', ''), children: [2, 3, 4, 8] },
    { id: 2, callFrame: frame('(idle)', '') },
    { id: 3, callFrame: frame('(program)', '') },
    { id: 4, callFrame: frame('placeOrder', URL, 5), children: [6, 7] },
    { id: 5, callFrame: frame('createHash', 'node:internal/crypto/hash') },
    { id: 6, callFrame: frame('send', URL, 1), children: [5] },
    { id: 7, callFrame: frame('parse', URL, 3) },
    { id: 8, callFrame: frame('(garbage collector)', '') },
  ],
  samples: [2, 5, 5, 7, 8, 4, 3],
  timeDeltas: [100, 10, 10, 20, 5, 1, 4],
};

describe('bench profile', () => {
  it('names the package of a module path, or the project file', () => {
    expect(ownerOf('node_modules/@smithy/core/dist-es/a.js')).toBe('@smithy/core');
    expect(ownerOf('../../main/node_modules/zod/v4/b.js')).toBe('zod');
    expect(ownerOf('../../shared/worker/orders.ts')).toBe('shared/worker/orders.ts');
  });

  it("gives each busy sample to the nearest bundle frame up its stack, Node's own code to its caller", () => {
    const busy = busyByOwner(
      profile,
      bundleOwner((url) => url === URL, moduleStarts(BUNDLE)),
    );
    expect(Object.fromEntries(busy)).toEqual({
      '@smithy/core': 20,
      zod: 20,
      'shared/worker/orders.ts': 1,
      '(garbage collector)': 5,
      '(program)': 4,
    });
    const top = shares(busy);
    expect(top[0]?.[1]).toBeCloseTo(20 / 50);
    expect(top.reduce((a, [, s]) => a + s, 0)).toBeCloseTo(1);
  });

  it("gives the parent's samples to the package or project file of their source (the sandbox and the emulators)", () => {
    const root = '/srv/connector';
    const parent: CpuProfile = {
      nodes: [
        { id: 1, callFrame: frame('(root)', ''), children: [2, 3, 6, 7] },
        { id: 2, callFrame: frame('handle', 'file:///srv/connector/sandbox/http.ts'), children: [4] },
        {
          id: 3,
          callFrame: frame('put', 'file:///srv/connector/node_modules/dynalite/db/index.js'),
          children: [5],
        },
        { id: 4, callFrame: frame('writev', 'node:internal/stream_base_commons') },
        {
          id: 5,
          callFrame: frame('encode', 'file:///srv/connector/node_modules/@smithy/core/dist-cjs/index.js'),
        },
        { id: 6, callFrame: frame('elsewhere', 'file:///tmp/other/thing.js') },
        { id: 7, callFrame: frame('(idle)', '') },
      ],
      samples: [2, 4, 3, 5, 6, 7],
      timeDeltas: [3, 4, 5, 6, 7, 100],
    };
    // The first sample's delta (3) is the time before it, not its own: left out.
    expect(Object.fromEntries(busyByOwner(parent, fileOwner(root)))).toEqual({
      'sandbox/http.ts': 4,
      dynalite: 5,
      '@smithy/core': 6,
      '(elsewhere)': 7,
    });
  });

  it('leaves out the time before the first sample: the profiler starting, no stack of the program', () => {
    // The bench starts the parent's profiler in process, just before the drain: V8 logs every
    // function it has compiled, and the first sample's delta (from the profile's start) held that,
    // 134 ms in one run, a seventh of the parent's busy time, under the bench's own file.
    const started: CpuProfile = {
      nodes: [
        { id: 1, callFrame: frame('(root)', ''), children: [2, 3] },
        { id: 2, callFrame: frame('startProfiler', 'file:///srv/connector/test/bench/multi-drain.ts') },
        { id: 3, callFrame: frame('handle', 'file:///srv/connector/sandbox/http.ts') },
      ],
      samples: [2, 3, 3],
      timeDeltas: [134_206, 750, 1_000],
    };
    expect(Object.fromEntries(busyByOwner(started, fileOwner('/srv/connector')))).toEqual({
      'sandbox/http.ts': 1_750,
    });
  });
});

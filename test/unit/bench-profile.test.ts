import { describe, expect, it } from 'vitest';
import { busyByOwner, type CpuProfile, moduleStarts, ownerOf, shares } from '../bench/profile.ts';

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
    const busy = busyByOwner(profile, (url) => url === URL, moduleStarts(BUNDLE));
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
});

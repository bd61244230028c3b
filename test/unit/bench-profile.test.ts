import { SourceMap } from 'node:module';
import { describe, expect, it } from 'vitest';
import {
  bundleOwner,
  busyByOwner,
  type CpuProfile,
  fileOwner,
  importPhases,
  ingestParts,
  mappedBundleOwner,
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
const frame = (functionName: string, url: string, lineNumber = 0, columnNumber = 0) => ({
  functionName,
  url,
  lineNumber,
  columnNumber,
});

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

  it("tells an import's phases apart: V8 compiling the bundle, its source map, Node's built-ins, its evaluation by package", () => {
    // Prepare: the stacks a cold start's import shows, leaf last (as V8 nests them)
    const BUNDLE_URL = 'file:///tmp/bench-bundles-x/worker/index.mjs';
    const load = [
      frame('loadAndTranslate', 'node:internal/modules/esm/loader'),
      frame('#translate', 'node:internal/modules/esm/loader'),
    ];
    const compile = [
      ...load,
      frame('moduleStrategy', 'node:internal/modules/esm/translators'),
      frame('compileSourceTextModule', 'node:internal/modules/esm/utils'),
    ];
    const builtin = [
      ...load,
      frame('builtinStrategy', 'node:internal/modules/esm/translators'),
      frame('loadBuiltinModule', 'node:internal/modules/helpers'),
      frame('compileForPublicLoader', 'node:internal/bootstrap/realm'),
    ];
    const stacks: (readonly ReturnType<typeof frame>[])[] = [
      [frame('(idle)', '')],
      compile,
      compile,
      [
        ...compile,
        frame('maybeCacheSourceMap', 'node:internal/source_map/source_map_cache'),
        frame('lineLengths', 'node:internal/source_map/source_map_cache'),
      ],
      [
        ...builtin,
        frame('', 'node:https'),
        frame('compileForInternalLoader', 'node:internal/bootstrap/realm'),
        frame('requireBuiltin', 'node:internal/bootstrap/realm'),
        frame('', 'node:tls'),
      ],
      [...builtin, frame('', 'node:crypto')],
      // `import { ReadStream } from 'node:fs'`: the facade reads fs's lazy exports, which load its streams
      [
        ...load,
        frame('builtinStrategy', 'node:internal/modules/esm/translators'),
        frame('getESMFacade', 'node:internal/bootstrap/realm'),
        frame('syncExports', 'node:internal/bootstrap/realm'),
        frame('get ReadStream', 'node:fs'),
        frame('lazyLoadStreams', 'node:fs'),
        frame('compileForInternalLoader', 'node:internal/bootstrap/realm'),
        frame('', 'node:internal/fs/streams'),
      ],
      [
        ...load,
        frame('getSource', 'node:internal/modules/esm/load'),
        frame('readFile', 'node:internal/fs/promises'),
      ],
      [frame('', BUNDLE_URL), frame('object', BUNDLE_URL, 4, 30), frame('$constructor', BUNDLE_URL, 4, 3)],
      [
        frame('', BUNDLE_URL),
        frame('makeClient', BUNDLE_URL, 4, 60),
        frame('createHash', 'node:internal/crypto/hash'),
      ],
      // A package that requires a built-in as it runs: the built-in's cost, not the package's
      [
        frame('', BUNDLE_URL),
        frame('makeClient', BUNDLE_URL, 4, 60),
        frame('require', 'node:internal/modules/helpers'),
        frame('compileForInternalLoader', 'node:internal/bootstrap/realm'),
        frame('', 'node:zlib'),
      ],
      [frame('', BUNDLE_URL)],
      [frame('(garbage collector)', '')],
      [frame('(program)', '')],
      // The same for a CommonJS bundle: Node's CJS loader compiles it in `wrapSafe`, reads it in `loadSource`
      [
        frame('require', 'node:internal/modules/helpers'),
        frame('', 'node:internal/modules/cjs/loader'),
        frame('wrapSafe', 'node:internal/modules/cjs/loader'),
      ],
      [
        frame('require', 'node:internal/modules/helpers'),
        frame('', 'node:internal/modules/cjs/loader'),
        frame('wrapSafe', 'node:internal/modules/cjs/loader'),
        frame('maybeCacheSourceMap', 'node:internal/source_map/source_map_cache'),
      ],
      [
        frame('require', 'node:internal/modules/helpers'),
        frame('loadSource', 'node:internal/modules/cjs/loader'),
        frame('readFileSync', 'node:fs'),
      ],
    ];
    const profile = profileOf(stacks, [500, 10, 10, 4, 3, 2, 9, 1, 7, 5, 6, 2, 8, 1, 30, 3, 2]);
    // The bundle as esbuild maps it: line 4 from column 0 is zod, from column 50 the SQS client
    const map = new SourceMap({
      version: 3,
      file: 'index.mjs',
      sourceRoot: '',
      sourcesContent: [],
      sources: [
        '../../node_modules/zod/v4/core/core.js',
        '../../node_modules/@aws-sdk/client-sqs/dist-es/index.js',
      ],
      names: [],
      mappings: ';;;;AAAA,kDCAA',
    });

    // Act
    const phases = importPhases(
      profile,
      mappedBundleOwner((url) => url === BUNDLE_URL, map),
    );

    // Assess: idle and the time before the first sample left out, every other sample counted once
    expect(
      Object.fromEntries([...phases].map(([phase, parts]) => [phase, Object.fromEntries(parts)])),
    ).toEqual({
      compile: { '': 50 },
      'source map': { '': 7 },
      'built-in': { https: 3, crypto: 2, 'fs: ESM exports': 9, zlib: 6 },
      loader: { '': 3 },
      evaluation: { zod: 7, '@aws-sdk/client-sqs': 5, '(the bundle top level)': 2 },
      'garbage collection': { '': 8 },
      other: { '': 1 },
    });
  });

  it("names a bundle frame the source map does not cover esbuild's runtime, and a project file the project", () => {
    const BUNDLE_URL = 'file:///tmp/b/index.mjs';
    const map = new SourceMap({
      version: 3,
      file: 'index.mjs',
      sourceRoot: '',
      sourcesContent: [],
      sources: ['../../shared/worker/orders.ts'],
      names: [],
      mappings: ';KAAA',
    });
    const owner = mappedBundleOwner((url) => url === BUNDLE_URL, map);

    expect(owner(frame('placeOrder', BUNDLE_URL, 1, 9))).toBe('(project)');
    // Before line 1's first mapping, and on a line with none: esbuild's own helpers
    expect(owner(frame('__esm', BUNDLE_URL, 1, 2))).toBe('(esbuild wrappers)');
    expect(owner(frame('__esm', BUNDLE_URL, 2, 2))).toBe('(esbuild wrappers)');
    expect(owner(frame('', BUNDLE_URL, 0, 0))).toBe('(the bundle top level)');
    expect(owner(frame('send', 'file:///tmp/other.mjs', 1, 9))).toBeUndefined();
  });

  it("splits the ingest bench's serving process into the webhook function, the local stand-ins and Node's own work", () => {
    // Prepare: owners as `projectShares` names them in the process that serves the ingest bench.
    const busy: [string, number][] = [
      ['@smithy/core', 0.25],
      ['infra/local/stack.ts', 0.1],
      ['(garbage collector)', 0.07],
      ['fastify', 0.06],
      ['@aws-sdk/core', 0.05],
      ['fauxqs', 0.04],
      ['zod', 0.04],
      ['shared/platforms/signature.ts', 0.02],
      ['functions/webhook.ts', 0.01],
      ['@aws-lambda-powertools/logger', 0.01],
      ['(writev)', 0.06],
      ['toad-cache', 0.005],
      ['sandbox/server.ts', 0.005],
    ];
    // Act
    const parts = ingestParts(busy);
    // Assess: largest part first, each with its owners largest first.
    expect(parts.map((p) => p.part)).toEqual([
      'the webhook function',
      'the local stand-ins',
      'Node, no caller of ours',
    ]);
    const [fn, standIns, node] = parts;
    expect(fn?.share).toBeCloseTo(0.38);
    expect(fn?.owners.map(([o]) => o)).toEqual([
      '@smithy/core',
      '@aws-sdk/core',
      'zod',
      'shared/platforms/signature.ts',
      'functions/webhook.ts',
      '@aws-lambda-powertools/logger',
    ]);
    expect(standIns?.share).toBeCloseTo(0.21);
    expect(standIns?.owners.map(([o]) => o)).toEqual([
      'infra/local/stack.ts',
      'fastify',
      'fauxqs',
      'toad-cache',
      'sandbox/server.ts',
    ]);
    expect(node?.share).toBeCloseTo(0.13);
    expect(node?.owners.map(([o]) => o)).toEqual(['(garbage collector)', '(writev)']);
    expect(ingestParts([])).toEqual([]);
  });
});

/** A profile whose samples are `stacks` (root first), each `deltas[i]` µs after the one before. */
function profileOf(
  stacks: readonly (readonly ReturnType<typeof frame>[])[],
  deltas: readonly number[],
): CpuProfile {
  type Node = { id: number; callFrame: ReturnType<typeof frame>; children: number[] };
  const root: Node = { id: 1, callFrame: frame('(root)', ''), children: [] };
  const nodes: Node[] = [root];
  const samples = stacks.map((stack) => {
    let at = root;
    for (const f of stack) {
      const known = at.children
        .map((id) => nodes[id - 1])
        .find((n) => n !== undefined && JSON.stringify(n.callFrame) === JSON.stringify(f));
      if (known) at = known;
      else {
        const node: Node = { id: nodes.length + 1, callFrame: f, children: [] };
        nodes.push(node);
        at.children.push(node.id);
        at = node;
      }
    }
    return at.id;
  });
  return { nodes, samples, timeDeltas: deltas };
}

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CONNECTOR_BUNDLING } from '../../infra/connector-stack.ts';
import {
  circles,
  edges,
  type ImportGraph,
  importGraph,
  reachable,
  sourceFiles,
  specifiersOf,
  type Violation,
  within,
} from '../support/import-graph.ts';

/**
 * The import graph runs one way: the programs (cli/, sandbox/, infra/) load the functions and
 * shared/, the functions load shared/, and shared/ loads none of them. Inside shared/ the modules
 * stand on floors, and an import only goes down or along one; the worker core knows the platform
 * through its port, never a concrete backend or adapter. Each rule is checked on the real graph and,
 * so that a rule that can never fail is caught too, on the graph plus one deliberately bad import.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const TOP_LEVEL = ['functions', 'shared', 'infra', 'cli', 'sandbox', 'local', 'bin', 'test'];
const files = sourceFiles(root, TOP_LEVEL);
const graph = importGraph(root, files);

/** What each top-level folder may import besides itself; test/ may import anything. */
const MAY_IMPORT: Readonly<Record<string, readonly string[]>> = {
  'shared/': [],
  'functions/': ['shared/'],
  // The local defaults, not the local stack: a CLI command must not start emulators to read a port.
  'cli/': ['shared/', 'local/'],
  'sandbox/': ['shared/', 'local/'],
  'local/': [],
  'bin/': ['cli/'],
  'infra/': ['functions/', 'shared/', 'sandbox/', 'local/'],
};

/**
 * The floors of shared/, lowest first; a file in no list is on the floor above them all (the use
 * cases: worker/, ingest.ts, finance.ts, the HTTP edge, observability).
 */
const FLOORS: ReadonlyArray<readonly string[]> = [
  // Plain data, rules and the ports: what everything else is written in terms of.
  [
    'shared/domain/',
    'shared/errors.ts',
    'shared/json.ts',
    'shared/money.ts',
    'shared/ledger.ts',
    'shared/queueing.ts',
    'shared/ports.ts',
    'shared/validation.ts',
    'shared/http/types.ts',
    'shared/http/client-answers.ts',
    'shared/http/retry-after.ts',
  ],
  ['shared/config/'],
  // Adapters: the AWS ones, the shop platforms' (webhooks and APIs) and the affiliate platform's two interfaces.
  [
    'shared/adapters/',
    'shared/secrets.ts',
    'shared/platforms/',
    'shared/shops/',
    'shared/affiliate/',
    'shared/legacy/',
  ],
];

const WORKER_CORE = 'shared/worker/';
/** What implements a port: the worker core is handed these, it does not import them. */
const CONCRETE = [
  'shared/legacy/',
  'shared/affiliate/client.ts',
  'shared/affiliate/backend.ts',
  'shared/affiliate/http.ts',
  'shared/adapters/',
];

function programOf(file: string): string | undefined {
  return Object.keys(MAY_IMPORT).find((prefix) => file.startsWith(prefix));
}

function programViolations(g: ImportGraph): Violation[] {
  return edges(g).flatMap(([from, to]) => {
    const program = programOf(from);
    if (program === undefined || to.startsWith(program)) return [];
    if ((MAY_IMPORT[program] ?? []).some((allowed) => to.startsWith(allowed))) return [];
    return [
      {
        from,
        to,
        rule: `${program} may import only ${[program, ...(MAY_IMPORT[program] ?? [])].join(', ')}`,
      },
    ];
  });
}

function floorOf(file: string): number {
  const floor = FLOORS.findIndex((prefixes) => prefixes.some((prefix) => within(file, prefix)));
  return floor < 0 ? FLOORS.length : floor;
}

function floorViolations(g: ImportGraph): Violation[] {
  return edges(g)
    .filter(([from, to]) => from.startsWith('shared/') && to.startsWith('shared/'))
    .filter(([from, to]) => floorOf(to) > floorOf(from))
    .map(([from, to]) => ({ from, to, rule: `runs back up, from floor ${floorOf(from)} to ${floorOf(to)}` }));
}

function workerCoreViolations(g: ImportGraph): Violation[] {
  return edges(g)
    .filter(([from, to]) => from.startsWith(WORKER_CORE) && CONCRETE.some((c) => within(to, c)))
    .map(([from, to]) => ({ from, to, rule: 'the worker core imports a concrete backend or adapter' }));
}

/** The graph with one more import, to see a rule fail. */
function withImport(from: string, to: string): ImportGraph {
  const copy = new Map(graph);
  copy.set(from, [...(graph.get(from) ?? []), to]);
  return copy;
}

describe('import boundaries', () => {
  it('reads every form of import a source can hold', () => {
    const source = [
      "import type { A } from './a.ts';",
      "import {\n  b,\n} from '../b.ts';",
      "export * from './c.ts';",
      "export type { D } from './d.ts';",
      "import './e.ts';",
      "const f = await import('./f.ts');",
      "import { z } from 'zod';",
    ].join('\n');

    expect(specifiersOf(source)).toEqual([
      './a.ts',
      '../b.ts',
      './c.ts',
      './d.ts',
      './e.ts',
      './f.ts',
      'zod',
    ]);
  });

  it('finds the sources and their imports (the rules below judge a real graph)', () => {
    expect(files).toContain('functions/worker.ts');
    expect(files).toContain('cli/program.ts');
    expect(files).toContain('sandbox/server.ts');
    expect(graph.get('bin/connector.ts')).toEqual(['cli/program.ts']);
  });

  it('shared/ imports no program, and each program imports only what it stands on', () => {
    expect(programViolations(graph)).toEqual([]);

    const bad = programViolations(withImport('shared/ingest.ts', 'cli/program.ts'));
    expect(bad).toEqual([expect.objectContaining({ from: 'shared/ingest.ts', to: 'cli/program.ts' })]);
    for (const program of ['infra/local/stack.ts', 'sandbox/server.ts', 'functions/worker.ts']) {
      expect(programViolations(withImport('shared/money.ts', program))).toHaveLength(1);
    }
    expect(programViolations(withImport('cli/send.ts', 'infra/local/stack.ts'))).toHaveLength(1);
  });

  it('the local defaults import nothing at all', () => {
    const text = readFileSync(join(root, 'local/defaults.ts'), 'utf8');

    expect(specifiersOf(text)).toEqual([]);
  });

  it('shared/ holds only what the Lambda functions load', () => {
    // A module the bundler substitutes for a package (esbuild --alias) is loaded without an import.
    const aliased = Object.entries(CONNECTOR_BUNDLING.esbuildArgs ?? {})
      .filter(([flag]) => flag.startsWith('--alias:'))
      .map(([, target]) => String(target).replace(/^\.\//, ''));
    const loaded = reachable(graph, [...files.filter((f) => f.startsWith('functions/')), ...aliased]);

    expect(files.filter((f) => f.startsWith('shared/') && !loaded.has(f))).toEqual([]);
  });

  it('inside shared/, no import runs back up a floor', () => {
    expect(floorViolations(graph)).toEqual([]);

    expect(floorViolations(withImport('shared/domain/events.ts', 'shared/affiliate/schemas.ts'))).toEqual([
      expect.objectContaining({ from: 'shared/domain/events.ts', to: 'shared/affiliate/schemas.ts' }),
    ]);
    expect(floorViolations(withImport('shared/config/sources.ts', 'shared/ingest.ts'))).toHaveLength(1);
  });

  it('the worker core imports no concrete backend or adapter', () => {
    expect(workerCoreViolations(graph)).toEqual([]);

    for (const concrete of [
      'shared/legacy/client.ts',
      'shared/affiliate/client.ts',
      'shared/adapters/sqs.ts',
    ]) {
      expect(workerCoreViolations(withImport('shared/worker/batch.ts', concrete))).toEqual([
        expect.objectContaining({ from: 'shared/worker/batch.ts', to: concrete }),
      ]);
    }
  });

  it('no import forms a circle', () => {
    expect(circles(graph)).toEqual([]);

    expect(circles(withImport('shared/errors.ts', 'shared/money.ts'))).toEqual([
      'shared/errors.ts -> shared/money.ts -> shared/errors.ts',
    ]);
  });
});

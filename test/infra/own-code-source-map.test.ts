import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeFileName, deployedSourceMap, esbuildOptionsFor } from '../../infra/bundle-report.ts';
import { CONNECTOR_BUNDLING, FUNCTION_NODE_OPTIONS, PROJECT_ROOT } from '../../infra/connector-stack.ts';
import { isOwnSource, ownCodeSourceMap, ownCodeSourceMapCommand } from '../../infra/own-code-source-map.ts';

/**
 * The functions' maps keep only the project's own files (infra/own-code-source-map.ts), so that
 * Node reads less at each cold start. What must hold: a stack frame of our code names the same
 * TypeScript line as with esbuild's whole map, and a frame of a package's code names the bundle,
 * never a file of ours. The program is test/fixtures/source-map/entry.ts, bundled with the worker's
 * settings (minified, a linked map without sources content), its zod call a package's code.
 */
const ENTRY = fileURLToPath(new URL('../fixtures/source-map/entry.ts', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'own-code-source-map-test-'));
const bundle = join(dir, codeFileName());
let code: string;
let full: string;
let own: string;

beforeAll(async () => {
  await build({
    ...esbuildOptionsFor('worker'),
    entryPoints: [ENTRY],
    outfile: bundle,
    write: true,
    metafile: false,
  });
  code = readFileSync(bundle, 'utf8');
  full = readFileSync(`${bundle}.map`, 'utf8');
  own = ownCodeSourceMap(full);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The error's stack as the bundle prints it, run as Lambda runs a function, beside `map`. */
function stackWith(map: string, mode: 'own' | 'package'): string {
  writeFileSync(`${bundle}.map`, map);
  const run = spawnSync(process.execPath, [bundle, mode], {
    encoding: 'utf8',
    env: { PATH: process.env['PATH'] ?? '', NODE_OPTIONS: FUNCTION_NODE_OPTIONS },
  });
  return run.stdout;
}

interface Entry {
  readonly originalSource?: string;
}

describe("a function's source map cut to the project's own code", () => {
  it('lists only project files, far smaller than the whole map', () => {
    // Act
    const before = JSON.parse(full) as { sources: string[] };
    const after = JSON.parse(own) as { sources: string[]; names: string[] };

    // Assess: zod was in the map, and is gone; the entry stays
    expect(before.sources.some((s) => s.includes('node_modules/zod/'))).toBe(true);
    expect(after.sources).toHaveLength(1);
    expect(after.sources[0]).toMatch(/test\/fixtures\/source-map\/entry\.ts$/);
    expect(own.length).toBeLessThan(full.length / 4);
  });

  it('maps every position of our code as the whole map does, and a package position to nothing', () => {
    // Prepare
    const whole = new SourceMap(JSON.parse(full));
    const cut = new SourceMap(JSON.parse(own));
    const lines = code.split('\n');
    const position = fc
      .integer({ min: 0, max: lines.length - 1 })
      .chain((line) => fc.tuple(fc.constant(line), fc.integer({ min: 0, max: (lines[line] ?? '').length })));
    let ours = 0;
    let theirs = 0;

    // Act and assess: every column of the bundle's lines, then random positions
    const check = ([line, column]: [number, number]) => {
      const before = whole.findEntry(line, column) as Entry;
      const after = cut.findEntry(line, column) as Entry;
      if (before.originalSource !== undefined && isOwnSource(before.originalSource)) {
        ours++;
        expect(after).toEqual(before);
      } else {
        theirs++;
        expect(after.originalSource).toBeUndefined();
      }
    };
    lines.forEach((text, line) => {
      for (let column = 0; column <= text.length; column++) check([line, column]);
    });
    fc.assert(fc.property(position, (at) => check(at)));

    // Both kinds of position were met
    expect(ours).toBeGreaterThan(100);
    expect(theirs).toBeGreaterThan(ours);
  });

  it('names the TypeScript line where our code throws, as the whole map does', () => {
    // Act
    const before = stackWith(full, 'own');
    const after = stackWith(own, 'own');

    // Assess
    expect(before).toMatch(/entry\.ts:11:\d+/);
    expect(after).toMatch(/entry\.ts:11:\d+/);
  });

  it("names our caller's line when a package throws, and the bundle for the package's frames", () => {
    // Act
    const before = stackWith(full, 'package');
    const after = stackWith(own, 'package');

    // Assess: with the whole map zod's frames named zod's files; cut, they name the bundle
    expect(before).toMatch(/node_modules\/zod\//);
    expect(after).toMatch(/entry\.ts:15:\d+/);
    expect(after).not.toMatch(/node_modules/);
    expect(after).toMatch(/index\.js:\d+:\d+/);
  });

  it('refuses what is not a version 3 source map', () => {
    expect(() => ownCodeSourceMap('{"version":2,"sources":[],"mappings":""}')).toThrow(/version 3/);
    expect(() => ownCodeSourceMap('not json')).toThrow();
  });

  it('keeps the sources content of the files it keeps, when a map has it', () => {
    // Prepare: a map of two sources, one of a package, with their contents
    const map = JSON.stringify({
      version: 3,
      sources: ['../node_modules/lib/index.js', '../shared/a.ts'],
      sourcesContent: ['lib', 'ours'],
      names: ['f', 'g'],
      mappings: 'AAAAA,CCAAC',
    });

    // Act
    const cut = JSON.parse(ownCodeSourceMap(map)) as Record<string, unknown>;

    // Assess: the package's segment became an unmapped one, ours kept its name
    expect(cut).toMatchObject({ sources: ['../shared/a.ts'], sourcesContent: ['ours'], names: ['g'] });
    expect(new SourceMap(cut as never).findEntry(0, 1)).toMatchObject({ name: 'g', originalColumn: 0 });
    expect((new SourceMap(cut as never).findEntry(0, 0) as Entry).originalSource).toBeUndefined();
  });
});

describe('the deployed maps', () => {
  it('are cut by the command CDK runs after esbuild, which rewrites the map in place', () => {
    // Prepare: the stack's hook, for this folder
    writeFileSync(`${bundle}.map`, full);
    const commands = CONNECTOR_BUNDLING.commandHooks?.afterBundling(PROJECT_ROOT, dir) ?? [];

    // Act: as CDK runs a hook, in bash from the project
    for (const command of commands) {
      const run = spawnSync('bash', ['-c', command], { cwd: PROJECT_ROOT, encoding: 'utf8' });
      expect(run.status, run.stderr).toBe(0);
    }

    // Assess
    expect(commands).toEqual([ownCodeSourceMapCommand(PROJECT_ROOT, `${dir}/index.js.map`)]);
    expect(readFileSync(`${bundle}.map`, 'utf8')).toBe(own);
  });

  it('are what the bundle report makes of the map in process', () => {
    expect(deployedSourceMap(full)).toBe(own);
  });

  it('refuse to be reported from command hooks the report does not know', () => {
    // Prepare
    const other = {
      ...CONNECTOR_BUNDLING,
      commandHooks: { ...CONNECTOR_BUNDLING.commandHooks!, afterBundling: () => ['true'] },
    };

    // Act and assess
    expect(() => deployedSourceMap(full, other)).toThrow(/command hooks/);
  });

  it('the command says how to use it when given no map, and which file it could not cut', () => {
    // Prepare
    const script = join(PROJECT_ROOT, 'infra/own-code-source-map.ts');
    const notAMap = join(dir, 'not-a-map.map');
    writeFileSync(notAMap, '{"version":3}');

    // Act
    const bare = spawnSync(process.execPath, [script], { encoding: 'utf8' });
    const bad = spawnSync(process.execPath, [script, notAMap], { encoding: 'utf8' });

    // Assess
    expect(bare.status).toBe(2);
    expect(bare.stderr).toMatch(/usage/);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain(`own-code-source-map: ${notAMap}: not a version 3 source map`);
    expect(readFileSync(notAMap, 'utf8')).toBe('{"version":3}');
  });

  it('refuses a path the bundling shell would read, rather than run something else', () => {
    expect(() => ownCodeSourceMapCommand('project-$HOME', 'asset/index.js.map')).toThrow(/cannot quote/);
    expect(() => ownCodeSourceMapCommand('project', 'asset-"x"/index.js.map')).toThrow(/cannot quote/);
    expect(ownCodeSourceMapCommand('my project', 'asset/index.js.map')).toBe(
      'node "my project/infra/own-code-source-map.ts" "asset/index.js.map"',
    );
  });
});

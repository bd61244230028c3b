import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codeFileName, deployedSourceMap, esbuildOptionsFor } from '../../infra/bundle-report.ts';
import { CONNECTOR_BUNDLING, PROJECT_ROOT } from '../../infra/connector-stack.ts';
import { isOwnSource, ownCodeSourceMap, ownCodeSourceMapCommand } from '../../infra/own-code-source-map.ts';
import { lambdaProcessEnv } from '../bench/lambda-process.ts';

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
    env: lambdaProcessEnv({ PATH: process.env['PATH'] ?? '' }),
  });
  return run.stdout;
}

/**
 * Runs `script` (CommonJS, `bundle` the bundle's path) in Node started with `nodeOptions`, and
 * returns what it printed as JSON.
 */
function runScript(script: string, nodeOptions?: string): Record<string, string> {
  const run = spawnSync(process.execPath, ['-e', `const bundle = ${JSON.stringify(bundle)};\n${script}`], {
    encoding: 'utf8',
    env: {
      PATH: process.env['PATH'] ?? '',
      ...(nodeOptions === undefined ? {} : { NODE_OPTIONS: nodeOptions }),
    },
  });
  expect(run.stderr).toBe('');
  return JSON.parse(run.stdout) as Record<string, string>;
}

interface Entry {
  readonly originalSource?: string;
}

describe("a function's source map cut to the project's own code", () => {
  it('lists only project files, far smaller than the whole map', () => {
    // Act
    const before = JSON.parse(full) as { sources: string[] };
    const after = JSON.parse(own) as { sources: string[]; names: string[] };

    // Assess: zod was in the map, and is gone; the entry stays, with the bundles' prelude
    expect(before.sources.some((s) => s.includes('node_modules/zod/'))).toBe(true);
    expect(after.sources.map((s) => relative(PROJECT_ROOT, resolve(dir, s))).sort()).toEqual([
      'functions/bundle-prelude.ts',
      'shared/adapters/source-mapped-stacks.ts',
      'test/fixtures/source-map/entry.ts',
    ]);
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

  it('is read when a stack trace is first printed, not while the bundle loads', () => {
    // Prepare: no map beside the bundle while it loads; it is back before the error's stack is read
    writeFileSync(`${bundle}.map`, own);
    const script = [
      "const { renameSync } = require('node:fs');",
      "renameSync(bundle + '.map', bundle + '.map.away');",
      'const program = require(bundle);',
      "renameSync(bundle + '.map.away', bundle + '.map');",
      'let stack = "";',
      'try { program.failInOwnCode(); } catch (error) { stack = error.stack; }',
      'process.stdout.write(JSON.stringify({ stack }));',
    ].join('\n');

    // Act: as Lambda starts a function, without NODE_OPTIONS
    const { stack } = runScript(script);

    // Assess: the map read at load would have been none, and the frame would name the bundle
    expect(stack).toMatch(/entry\.ts:11:\d+/);
  });

  it.each(['own', 'package'] as const)(
    "prints, for an error thrown in %s code, the stack Node's --enable-source-maps printed",
    (mode) => {
      // Prepare: the same error's frames, printed by the bundle's formatter and by Node's own, which
      // --enable-source-maps makes map through the map read while the bundle loaded
      writeFileSync(`${bundle}.map`, own);
      const script = [
        'const node = Error.prepareStackTrace;',
        'const program = require(bundle);',
        'const bundled = Error.prepareStackTrace;',
        'let frames;',
        'Error.prepareStackTrace = (_, trace) => { frames = trace; return ""; };',
        'let thrown;',
        `try { ${mode === 'own' ? 'program.failInOwnCode()' : 'program.parseAmount({ amount: 12 })'}; } catch (error) { thrown = error; void thrown.stack; }`,
        'process.stdout.write(JSON.stringify({ bundled: bundled(thrown, frames), node: node(thrown, frames), same: String(bundled === node) }));',
      ].join('\n');

      // Act
      const printed = runScript(script, '--enable-source-maps');

      // Assess: the bundle brings its own formatter, and it prints what Node printed, line for line
      expect(printed['same']).toBe('false');
      expect(printed['bundled']).toMatch(mode === 'own' ? /entry\.ts:11:\d+/ : /entry\.ts:15:\d+/);
      expect(printed['bundled']?.split('\n')).toEqual(printed['node']?.split('\n'));
    },
  );

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

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire, type SourceMap } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encode } from '@jridgewell/sourcemap-codec';
import { afterAll, describe, expect, it } from 'vitest';
import {
  linkedSourceMaps,
  type StackFormatter,
  sourceMappedStack,
} from '../../shared/adapters/source-mapped-stacks.ts';

/**
 * The bundles' own stack formatter (shared/adapters/source-mapped-stacks.ts), on small programs
 * written here: one with a map made by hand, one without, one whose map is broken. That it prints
 * what Node's --enable-source-maps printed, line for line, is checked on a real bundle in
 * test/infra/own-code-source-map.test.ts.
 */
const dir = mkdtempSync(join(tmpdir(), 'source-mapped-stacks-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const require = createRequire(join(dir, 'here.js'));

/** A "minified" program of one line, as a bundler writes it, and its map to src/orig.ts. */
const MAPPED_CODE =
  '"use strict";exports.f=function(){throw new Error("boom")};' +
  'exports.W=class{constructor(){throw new Error("built")}};';
const ORIGINAL = [
  'export function original() {',
  "  throw new Error('boom');",
  '}',
  'export class Widget {',
  '  constructor() {',
  "    throw new Error('built');",
  '  }',
  '}',
];

function writeMapped(): string {
  const at = (text: string) => MAPPED_CODE.indexOf(text);
  const segments: [number, number, number, number, number?][] = [
    [at('function'), 0, 0, 16, 0],
    [at('throw new Error("boom")'), 0, 1, 2],
    [at('class'), 0, 3, 13, 1],
    [at('constructor'), 0, 4, 2],
    [at('throw new Error("built")'), 0, 5, 4],
  ];
  mkdirSync(join(dir, 'out'), { recursive: true });
  mkdirSync(join(dir, 'src'), { recursive: true });
  writeFileSync(join(dir, 'src', 'orig.ts'), ORIGINAL.join('\n'));
  const file = join(dir, 'out', 'mapped.js');
  writeFileSync(file, `${MAPPED_CODE}\n//# sourceMappingURL=mapped.js.map\n`);
  writeFileSync(
    `${file}.map`,
    JSON.stringify({
      version: 3,
      sourceRoot: '../',
      sources: ['src/orig.ts'],
      names: ['original', 'Widget'],
      mappings: encode([segments as never]),
    }),
  );
  return file;
}

/** The error `run` throws and its frames, as V8 hands them to `Error.prepareStackTrace`. */
function thrownBy(run: () => void): { error: Error; trace: NodeJS.CallSite[] } {
  const previous = Error.prepareStackTrace;
  let trace: NodeJS.CallSite[] = [];
  Error.prepareStackTrace = (_error, frames) => {
    trace = frames;
    return '';
  };
  try {
    run();
  } catch (thrown) {
    void (thrown as Error).stack;
    return { error: thrown as Error, trace };
  } finally {
    Error.prepareStackTrace = previous;
  }
  throw new Error('nothing was thrown');
}

/** What V8 prints when nothing maps a frame: the error, then every frame as a CallSite prints. */
const asV8Prints: StackFormatter = (error, trace) =>
  [String(error), ...trace.map((callSite) => `    at ${callSite}`)].join('\n');

/** `linkedSourceMaps` reading from disk, and the paths it read. */
function countingMaps(): { maps: ReturnType<typeof linkedSourceMaps>; reads: string[] } {
  const reads: string[] = [];
  const maps = linkedSourceMaps((path) => {
    reads.push(path);
    return readFileSync(path, 'utf8');
  });
  return { maps, reads };
}

describe('a stack printed through the source maps its files link to', () => {
  it("names a frame's original file, line, column and the name the map gives its function", () => {
    // Prepare
    const program = require(writeMapped()) as { f: () => void };
    const { f } = program;
    const { error, trace } = thrownBy(() => f());

    // Act
    const stack = sourceMappedStack(linkedSourceMaps(), asV8Prints)(error, trace);

    // Assess: sources resolve from the map's folder through its sourceRoot; lines and columns from 1
    const [first, top] = stack.split('\n');
    expect(first).toBe('Error: boom');
    expect(top).toBe(`    at original (${join(dir, 'src', 'orig.ts')}:2:3)`);
    expect(stack).not.toContain('mapped.js');
  });

  it("keeps 'new' on a constructor's frame", () => {
    // Prepare
    const program = require(writeMapped()) as { W: new () => unknown };
    const { error, trace } = thrownBy(() => new program.W());

    // Act
    const top = sourceMappedStack(linkedSourceMaps(), asV8Prints)(error, trace).split('\n')[1];

    // Assess: the constructor's segment names nothing, so the name is V8's (as Node prints it too)
    expect(top).toBe(`    at new exports.W (${join(dir, 'src', 'orig.ts')}:6:5)`);
  });

  it('prints the frames of a file without a map as V8 does, and reads that file once', () => {
    // Prepare
    const file = join(dir, 'plain.js');
    writeFileSync(file, '"use strict";exports.fail=function fail(){throw new TypeError("plain")};\n');
    const program = require(file) as { fail: () => void };
    const { maps, reads } = countingMaps();
    const format = sourceMappedStack(maps, asV8Prints);
    const first = thrownBy(() => program.fail());
    const second = thrownBy(() => program.fail());

    // Act
    const stacks = [format(first.error, first.trace), format(second.error, second.trace)];

    // Assess: nothing changed; no path but a file's was read, each once
    expect(stacks).toEqual([asV8Prints(first.error, first.trace), asV8Prints(second.error, second.trace)]);
    expect(stacks[0]).toMatch(/plain\.js:1:\d+/);
    expect(reads.filter((path) => path === file)).toHaveLength(1);
    expect(new Set(reads).size).toBe(reads.length);
    expect(reads.every((path) => path.startsWith('/'))).toBe(true);
  });

  it('prints the frames as V8 does when the map cannot be parsed, and does not try it again', () => {
    // Prepare
    const file = join(dir, 'broken.js');
    writeFileSync(
      file,
      '"use strict";exports.fail=()=>{throw new Error("x")};\n//# sourceMappingURL=broken.js.map\n',
    );
    writeFileSync(`${file}.map`, '{ not json');
    const program = require(file) as { fail: () => void };
    const { maps, reads } = countingMaps();
    const format = sourceMappedStack(maps, asV8Prints);
    const thrown = thrownBy(() => program.fail());

    // Act
    const stacks = [format(thrown.error, thrown.trace), format(thrown.error, thrown.trace)];

    // Assess
    expect(stacks).toEqual([asV8Prints(thrown.error, thrown.trace), asV8Prints(thrown.error, thrown.trace)]);
    expect(reads.filter((path) => path === `${file}.map`)).toHaveLength(1);
    expect(maps(file)).toBeUndefined();
  });

  it("takes the first line from the formatter it stands in front of (Node's names its errors' codes)", () => {
    // Prepare
    const program = require(writeMapped()) as { f: () => void };
    const { error, trace } = thrownBy(() => program.f());
    const node: StackFormatter = (e, frames) =>
      frames.length === 0 ? `${e.name} [ERR_EXAMPLE]: ${e.message}` : 'x';

    // Act
    const stack = sourceMappedStack(linkedSourceMaps(), node)(error, trace);

    // Assess
    expect(stack.split('\n')[0]).toBe('Error [ERR_EXAMPLE]: boom');
    expect(stack.split('\n')[1]).toMatch(/orig\.ts:2:3\)$/);
  });

  it('never throws: a frame it cannot map is printed as it is', () => {
    // Prepare
    const program = require(writeMapped()) as { f: () => void };
    const { error, trace } = thrownBy(() => program.f());
    const failing = (): SourceMap => {
      throw new Error('disk gone');
    };

    // Act
    const stack = sourceMappedStack(failing, asV8Prints)(error, trace);

    // Assess
    expect(stack).toBe(asV8Prints(error, trace));
    expect(stack).toMatch(/mapped\.js:1:\d+/);
  });

  it('reads no map for what is not a file: built-in modules, eval, relative names, data URLs', () => {
    // Prepare
    const inline = join(dir, 'inline.js');
    writeFileSync(inline, 'exports.x=1;\n//# sourceMappingURL=data:application/json;base64,e30=\n');
    const { maps, reads } = countingMaps();

    // Act and assess
    for (const name of ['node:internal/modules/cjs/loader', 'evalmachine.<anonymous>', 'relative/file.js']) {
      expect(maps(name)).toBeUndefined();
    }
    expect(reads).toEqual([]);
    expect(maps(inline)).toBeUndefined();
    expect(reads).toEqual([inline]);
  });
});

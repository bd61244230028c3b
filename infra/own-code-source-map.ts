import { readFileSync, writeFileSync } from 'node:fs';
import { decode, encode, type SourceMapSegment } from '@jridgewell/sourcemap-codec';

/**
 * The functions' source maps cut down to the project's own code (issue 16, the cold start).
 *
 * Until 2026-11-28 every function ran with `--enable-source-maps`, and Node read and parsed a
 * module's whole map while it loaded the module, before the handler ran; now a bundle reads its map
 * on its first stack trace (shared/adapters/source-mapped-stacks.ts), and the cut keeps that read and
 * the deployment small. For a bundle of about 380 KiB the map esbuild writes is about 620 KiB, nine
 * tenths of it the AWS SDK's, zod's and the other packages' code. A stack trace is read for the
 * frames of our own code; a package's frames then name the bundle (`index.js:1:23456`) instead of
 * the package's file. esbuild has no option to leave packages out of a map (evanw/esbuild#1685; the
 * plugin suggested there stopped working in 0.25.2, #4130, and CDK's bundling takes no plugins), so
 * the stack rewrites the map after esbuild wrote it (CONNECTOR_BUNDLING's `afterBundling`, which
 * runs this file) and the bundle report does the same in process.
 *
 * The rewrite keeps every mapping of a project file as it was, and marks where a run of package code
 * begins with an unmapped segment, so a position in a package's code maps to nothing rather than to
 * the project code before it: a lookup in the new map gives what the old one gave for a project
 * file, and nothing otherwise (test/infra/own-code-source-map.test.ts checks this at every column
 * of a bundle).
 */

/** The parts of a version 3 source map read here; other fields are kept as they are. */
interface SourceMapJson {
  readonly version: number;
  readonly sources: readonly (string | null)[];
  readonly names?: readonly string[];
  readonly mappings: string;
  readonly sourceRoot?: string;
  readonly sourcesContent?: readonly (string | null)[];
  readonly [field: string]: unknown;
}

/** A source of the project: any path with no `node_modules` folder in it. */
export function isOwnSource(source: string | null): boolean {
  return source !== null && !/(^|[/\\])node_modules[/\\]/.test(source);
}

/** `map` (JSON text) with only the mappings of the project's own sources. */
export function ownCodeSourceMap(map: string): string {
  const parsed = JSON.parse(map) as SourceMapJson;
  if (parsed.version !== 3 || !Array.isArray(parsed.sources) || typeof parsed.mappings !== 'string') {
    throw new Error('not a version 3 source map');
  }
  const root = parsed.sourceRoot ?? '';
  const sourceIndex = new Map<number, number>();
  const sources: (string | null)[] = [];
  const sourcesContent: (string | null)[] = [];
  parsed.sources.forEach((source, index) => {
    if (!isOwnSource(source === null ? null : `${root}${source}`)) return;
    sourceIndex.set(index, sources.length);
    sources.push(source);
    sourcesContent.push(parsed.sourcesContent?.[index] ?? null);
  });
  const nameIndex = new Map<number, number>();
  const names: string[] = [];
  const nameOf = (index: number): number => {
    let kept = nameIndex.get(index);
    if (kept === undefined) {
      kept = names.length;
      nameIndex.set(index, kept);
      names.push(parsed.names?.[index] ?? '');
    }
    return kept;
  };

  const lines = decode(parsed.mappings).map((line) => {
    const kept: SourceMapSegment[] = [];
    for (const segment of line) {
      const source = segment.length === 1 ? undefined : sourceIndex.get(segment[1]);
      if (segment.length === 1 || source === undefined) {
        // Package code (or code esbuild left unmapped): one unmapped segment where such a run begins.
        const last = kept.at(-1);
        if (last === undefined || last.length > 1) kept.push([segment[0]]);
        continue;
      }
      kept.push(
        segment.length === 5
          ? [segment[0], source, segment[2], segment[3], nameOf(segment[4])]
          : [segment[0], source, segment[2], segment[3]],
      );
    }
    return kept;
  });

  return JSON.stringify({
    ...parsed,
    sources,
    ...(parsed.sourcesContent === undefined ? {} : { sourcesContent }),
    names,
    mappings: encode(lines),
  });
}

/**
 * The shell command (bash, or cmd on Windows, as CDK runs a hook) that rewrites `mapFile` in place
 * with this file of the project at `projectRoot`. Each path is double-quoted, which both shells
 * take; a path with a character either would still read (`"`, `$`, a backquote, `%`) is refused.
 */
export function ownCodeSourceMapCommand(projectRoot: string, mapFile: string): string {
  const quoted = (path: string) => {
    if (/["$`%]/.test(path))
      throw new Error(`cannot quote the path ${path} for the bundling's shell: move it`);
    return `"${path}"`;
  };
  return `node ${quoted(`${projectRoot}/infra/own-code-source-map.ts`)} ${quoted(mapFile)}`;
}

function main(files: readonly string[]): void {
  if (files.length === 0) {
    console.error('usage: node infra/own-code-source-map.ts <index.js.map>…');
    process.exitCode = 2;
    return;
  }
  for (const file of files) {
    try {
      writeFileSync(file, ownCodeSourceMap(readFileSync(file, 'utf8')));
    } catch (error) {
      console.error(`own-code-source-map: ${file}: ${(error as Error).message}`);
      process.exitCode = 1;
    }
  }
}

if (import.meta.main) main(process.argv.slice(2));

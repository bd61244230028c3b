import { readFileSync } from 'node:fs';
import { SourceMap, type SourceMapPayload, type SourceMapping } from 'node:module';
import { isAbsolute } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * Stack traces of a function bundle that name our TypeScript, at no cost to the cold start.
 *
 * Node's `--enable-source-maps` reads a module's map while it loads the module: it parses the JSON
 * and counts the length of every line of the code, a loop over each of the bundle's 300 to 400
 * thousand characters before any of it is optimised. That was 7 to 12 ms of every cold start here
 * (docs/benchmarks.md), paid for a stack trace most containers never print. The bundles instead
 * carry this formatter (CONNECTOR_BUNDLING injects functions/bundle-prelude.ts, which installs it),
 * and the functions run without the option: a file's map is read when a stack with a frame in that
 * file is first printed, then kept. A frame is printed as Node's own formatter prints it with the
 * option on (lib/internal/source_map/prepare_stack_trace.js in Node 24), so logs read the same;
 * test/infra/own-code-source-map.test.ts compares the two on a bundle, line for line.
 */

/** What V8 calls to turn an error and its frames into `error.stack` (`Error.prepareStackTrace`). */
export type StackFormatter = (error: Error, trace: NodeJS.CallSite[]) => string;

/** The source map of a file, or undefined when it has none that can be read. */
export type SourceMapOf = (file: string) => SourceMap | undefined;

const STACK_LINE_AT = '\n    at ';

/**
 * `fallback` with every frame of a file that `mapOf` maps printed at its place in the original
 * source. The first line (the error's name, code and message) and every frame without a mapping
 * are `fallback`'s and V8's own. A failure to map a frame prints the frame as it is: formatting a
 * stack must never throw.
 */
export function sourceMappedStack(mapOf: SourceMapOf, fallback: StackFormatter): StackFormatter {
  return (error, trace) => {
    const header = fallback(error, []);
    const frames = trace.map((callSite, i) => {
      try {
        const file = callSite.getFileName() ?? callSite.getEvalOrigin();
        const map = file === undefined ? undefined : mapOf(file);
        if (map !== undefined) return `${STACK_LINE_AT}${mappedFrame(map, callSite, trace[i + 1])}`;
      } catch {
        // As Node does: the frame as V8 prints it.
      }
      return `${STACK_LINE_AT}${callSite}`;
    });
    return `${header}${frames.join('')}`;
  };
}

/** A frame as V8 prints it (`SerializeJSStackFrame`), its place and name taken from the map. */
function mappedFrame(map: SourceMap, callSite: NodeJS.CallSite, caller: NodeJS.CallSite | undefined): string {
  // Source map lines and columns count from 0, a stack's from 1.
  const origin = entryAt(map, callSite.getLineNumber(), callSite.getColumnNumber());
  if (
    origin.originalSource === undefined ||
    origin.originalLine === undefined ||
    origin.originalColumn === undefined
  ) {
    return `${callSite}`;
  }
  const source = origin.originalSource.startsWith('file://')
    ? fileURLToPath(origin.originalSource)
    : origin.originalSource;
  const prefix = callSite.isAsync() ? 'async ' : callSite.isConstructor() ? 'new ' : '';
  const typeName = callSite.getTypeName();
  const namePrefix = typeName !== null && typeName !== 'global' ? `${typeName}.` : '';
  const runtimeName = callSite.getFunctionName() ?? callSite.getMethodName();
  const name = originalName(map, callSite, caller) || runtimeName || '<anonymous>';
  return `${prefix}${namePrefix}${name} (${source}:${origin.originalLine + 1}:${origin.originalColumn + 1})`;
}

/**
 * The name a minifier took away, from the map's `names`: the one at the start of the enclosing
 * function, else the one at the caller's call when the caller is in the same file.
 */
function originalName(
  map: SourceMap,
  callSite: NodeJS.CallSite,
  caller: NodeJS.CallSite | undefined,
): string | undefined {
  const enclosing = entryAt(map, callSite.getEnclosingLineNumber(), callSite.getEnclosingColumnNumber());
  if (enclosing.name) return enclosing.name;
  if (caller !== undefined && caller.getFileName() === callSite.getFileName()) {
    return entryAt(map, caller.getLineNumber(), caller.getColumnNumber()).name;
  }
  return undefined;
}

/** `findEntry` at a stack's place; Node's entries carry the segment's `name`, its types do not. */
function entryAt(
  map: SourceMap,
  line: number | null,
  column: number | null,
): Partial<SourceMapping> & { readonly name?: string } {
  return map.findEntry((line ?? 0) - 1, (column ?? 0) - 1);
}

/**
 * The map each file links to with its last `sourceMappingURL` comment, as Node finds it: read the
 * first time a file is asked for, and kept, a file without one or whose map cannot be read or parsed
 * as none. Only files on disk (an absolute path or a `file:` URL) are read; a map inlined as a
 * `data:` URL counts as none (the bundles link theirs).
 */
export function linkedSourceMaps(
  read: (path: string) => string = (path) => readFileSync(path, 'utf8'),
): SourceMapOf {
  const maps = new Map<string, SourceMap | undefined>();
  return (file) => {
    if (maps.has(file)) return maps.get(file);
    let map: SourceMap | undefined;
    try {
      map = linkedSourceMap(file, read);
    } catch {
      map = undefined;
    }
    maps.set(file, map);
    return map;
  };
}

const SOURCE_MAPPING_URL = /\/[*/]#\s+sourceMappingURL=(?<url>\S+)/g;

function linkedSourceMap(file: string, read: (path: string) => string): SourceMap | undefined {
  const path = file.startsWith('file://') ? fileURLToPath(file) : file;
  if (!isAbsolute(path)) return undefined;
  let url: string | undefined;
  for (const match of read(path).matchAll(SOURCE_MAPPING_URL)) url = match.groups?.['url'];
  if (url === undefined) return undefined;
  const mapUrl = new URL(url, pathToFileURL(path));
  if (mapUrl.protocol !== 'file:') return undefined;
  const payload = JSON.parse(read(fileURLToPath(mapUrl))) as SourceMapPayload;
  // As Node does: every source an absolute URL, relative ones from the map's own place.
  const sources = payload.sources.map((source) => {
    const rooted = (payload.sourceRoot || '') + source;
    return isAbsolute(rooted) ? pathToFileURL(rooted).href : new URL(rooted, mapUrl).href;
  });
  return new SourceMap({ ...payload, sources, sourceRoot: '' });
}

/**
 * Puts the source-mapped formatter in front of the one the process has (Node's own, which then
 * still prints the first line of every stack and every frame without a map).
 */
export function installSourceMappedStacks(): void {
  Error.prepareStackTrace = sourceMappedStack(linkedSourceMaps(), Error.prepareStackTrace);
}

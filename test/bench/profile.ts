import { Session } from 'node:inspector/promises';
import type { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

/**
 * Where a worker process's CPU goes, from the V8 CPU profiles its `--cpu-prof` writes
 * (`npm run bench -- --only multi --profile`): the busy time by package or project file of the
 * instance's bundle, so that a missed target comes with its profile, not just its figure. The same
 * for the bench's own process (fauxqs and dynalite) and the sandbox's, whose sources are files, and
 * for the cold start's imports of each function's bundle (`importPhases`).
 */

/** The parts of a V8 CPU profile (`.cpuprofile`) read here. */
export interface CpuProfile {
  readonly nodes: readonly {
    readonly id: number;
    readonly callFrame: {
      readonly functionName: string;
      readonly url: string;
      readonly lineNumber: number;
      /** 0-based; V8 always writes it. */
      readonly columnNumber?: number;
    };
    readonly children?: readonly number[];
  }[];
  readonly samples: readonly number[];
  /** Microseconds before each sample. */
  readonly timeDeltas: readonly number[];
}

/** Where each module of an unminified esbuild bundle begins: the `// path` comment esbuild writes before it. */
export interface ModuleStart {
  /** 0-based, as the profile's `lineNumber`. */
  readonly line: number;
  readonly owner: string;
}

const MODULE_COMMENT = /^\/\/ (\S+\.(?:[cm]?[jt]s|json))$/;

/** The package (`@scope/name`, `name`) a module of node_modules belongs to, or the project file. */
export function ownerOf(path: string): string {
  const at = path.lastIndexOf('node_modules/');
  if (at < 0) return path.replace(/^(\.\.\/)+/, '');
  const [first = '', second = ''] = path.slice(at + 'node_modules/'.length).split('/');
  return first.startsWith('@') ? `${first}/${second}` : first;
}

export function moduleStarts(bundle: string): ModuleStart[] {
  const starts: ModuleStart[] = [];
  bundle.split('\n').forEach((text, line) => {
    const path = MODULE_COMMENT.exec(text)?.[1];
    if (path !== undefined) starts.push({ line, owner: ownerOf(path) });
  });
  return starts;
}

function ownerAt(starts: readonly ModuleStart[], line: number): string {
  let low = 0;
  let high = starts.length - 1;
  let found = -1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    if ((starts[mid]?.line ?? 0) <= line) {
      found = mid;
      low = mid + 1;
    } else high = mid - 1;
  }
  return found < 0 ? '(bundle prelude)' : (starts[found]?.owner ?? '(bundle prelude)');
}

type Frame = CpuProfile['nodes'][number]['callFrame'];

/** The owner of a frame of the bundle (`isBundle` of its URL): the module its line falls in. */
export function bundleOwner(
  isBundle: (url: string) => boolean,
  starts: readonly ModuleStart[],
): (frame: Frame) => string | undefined {
  return (frame) => (isBundle(frame.url) ? ownerAt(starts, frame.lineNumber) : undefined);
}

/**
 * The owner of a frame of a source file: its package under node_modules, else its path under
 * `root` (the project); none for Node's own code or a file elsewhere.
 */
export function fileOwner(root: string): (frame: Frame) => string | undefined {
  const base = root.endsWith('/') ? root : `${root}/`;
  return (frame) => {
    if (!frame.url.startsWith('file:')) return undefined;
    const path = fileURLToPath(frame.url);
    if (path.includes('/node_modules/')) return ownerOf(path);
    return path.startsWith(base) ? path.slice(base.length) : undefined;
  };
}

/** A profile's nodes by id, and each node's parent's id. */
function profileTree(profile: CpuProfile): {
  nodes: Map<number, CpuProfile['nodes'][number]>;
  parent: Map<number, number>;
} {
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  return { nodes, parent };
}

/**
 * Busy microseconds by owner. Each sample goes to the nearest frame up its stack that `ownerOfFrame`
 * names, so Node's own code (http, crypto, streams) counts for the package that called it; a sample
 * with no such frame counts under its own function (`(garbage collector)`, `(program)`, a timer's
 * callback); idle samples are left out, and so is the time before the first sample.
 */
export function busyByOwner(
  profile: CpuProfile,
  ownerOfFrame: (frame: Frame) => string | undefined,
): Map<string, number> {
  const { nodes, parent } = profileTree(profile);
  const owner = new Map<number, string>();
  const ownerOfNode = (id: number): string => {
    const known = owner.get(id);
    if (known !== undefined) return known;
    let found: string | undefined;
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = nodes.get(at)?.callFrame;
      found = frame === undefined ? undefined : ownerOfFrame(frame);
      if (found !== undefined) break;
    }
    const own = nodes.get(id)?.callFrame.functionName;
    const result = found ?? `(${(own ?? '').replace(/^\(|\)$/g, '') || 'anonymous'})`;
    owner.set(id, result);
    return result;
  };
  const busy = new Map<string, number>();
  profile.samples.forEach((id, i) => {
    // The first delta runs from the profile's start to the first sample: the profiler starting
    // (logging every compiled function), which no sample of the program saw.
    if (i === 0) return;
    if (nodes.get(id)?.callFrame.functionName === '(idle)') return;
    const who = ownerOfNode(id);
    busy.set(who, (busy.get(who) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  return busy;
}

/**
 * The owner of a frame of a minified bundle (`isBundle` of its URL), from the source map esbuild
 * wrote for it, every input named (the deployed map keeps only the project's files): the package of
 * the module the function came from, or `(project)`. The module's own function (line 0, column 0)
 * is the bundle's top level, where esbuild hoists every module's top-level statements; a position no
 * mapping of its line covers is esbuild's own code (the wrappers that start a module on first use,
 * its helpers). V8 compiles a function when it is first called, in its caller's frame: a wrapper's or
 * the top level's own time holds the compiling of what they call.
 */
export function mappedBundleOwner(
  isBundle: (url: string) => boolean,
  map: Pick<SourceMap, 'findEntry'>,
): (frame: Frame) => string | undefined {
  return (frame) => {
    if (!isBundle(frame.url)) return undefined;
    const column = frame.columnNumber ?? 0;
    if (frame.lineNumber === 0 && column === 0) return '(the bundle top level)';
    const entry = map.findEntry(frame.lineNumber, column);
    // Node's findEntry falls back to an earlier line's last mapping: not this position's.
    if (!('originalSource' in entry) || entry.generatedLine !== frame.lineNumber) return '(esbuild wrappers)';
    return entry.originalSource.includes('node_modules/') ? ownerOf(entry.originalSource) : '(project)';
  };
}

/** What a sample of a cold start's import was doing (`importPhases`). */
export type ImportPhase =
  | 'compile'
  | 'source map'
  | 'built-in'
  | 'loader'
  | 'evaluation'
  | 'garbage collection'
  | 'other';

/** Busy microseconds by phase, and within a phase by part (a built-in's name, a package); `''` when it has none. */
export type ImportPhases = Map<ImportPhase, Map<string, number>>;

const MODULE_LOADERS = 'node:internal/modules/';
/** Where Node has V8 compile a module: an ES module's source text, a CommonJS module's wrapper. */
const MODULE_COMPILERS: ReadonlySet<string> = new Set(['compileSourceTextModule', 'wrapSafe']);
const SOURCE_MAP = 'node:internal/source_map/';
const BUILTIN_LOADERS: ReadonlySet<string> = new Set(['compileForPublicLoader', 'compileForInternalLoader']);

/**
 * Where a module's import spent its time, from a V8 CPU profile of it (a fresh process importing a
 * function's bundle: the bench's cold start). A sample goes to the first of these that its stack
 * shows:
 * - `source map`: Node reading the bundle's map (`--enable-source-maps`, as deployed);
 * - `compile`: V8 compiling the bundle (`compileSourceTextModule` for an ES module, `wrapSafe` for
 *   CommonJS);
 * - `built-in`: Node loading a built-in module the bundle imports (its static imports, or a
 *   `require` as a package runs), by the public built-in asked for (`https` counts the `tls` it
 *   loads); `fs: ESM exports` is what `import … from 'node:fs'` adds to a `require`: Node reads every
 *   export of the built-in for its ES module facade, which loads the lazy ones (fs's streams);
 * - `evaluation`: the bundle's code running, by the owner `bundleFrameOwner` names for the nearest
 *   bundle frame (Node's own code it calls counts for it, as in `busyByOwner`);
 * - `loader`: the rest of Node's module loaders (reading and decoding the file, resolving, linking);
 * - `garbage collection`, and `other` for the rest.
 * Idle samples are left out, and so is the time before the first sample.
 */
export function importPhases(
  profile: CpuProfile,
  bundleFrameOwner: (frame: Frame) => string | undefined,
  into: ImportPhases = new Map(),
): ImportPhases {
  const { nodes, parent } = profileTree(profile);
  profile.samples.forEach((id, i) => {
    if (i === 0) return;
    const stack: Frame[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = nodes.get(at)?.callFrame;
      if (frame !== undefined) stack.unshift(frame);
    }
    const found = phaseOf(stack, bundleFrameOwner);
    if (found === undefined) return;
    const [phase, part] = found;
    const parts = into.get(phase) ?? new Map<string, number>();
    parts.set(part, (parts.get(part) ?? 0) + (profile.timeDeltas[i] ?? 0));
    into.set(phase, parts);
  });
  return into;
}

/** The phase and part of a sample whose stack is `stack`, root first; none for an idle one. */
function phaseOf(
  stack: readonly Frame[],
  bundleFrameOwner: (frame: Frame) => string | undefined,
): [ImportPhase, string] | undefined {
  const leaf = stack.at(-1)?.functionName;
  if (leaf === '(idle)') return undefined;
  if (leaf === '(garbage collector)') return ['garbage collection', ''];
  if (stack.some((f) => f.url.startsWith(SOURCE_MAP))) return ['source map', ''];
  if (stack.some((f) => MODULE_COMPILERS.has(f.functionName))) return ['compile', ''];
  const loading = stack.findIndex((f) => BUILTIN_LOADERS.has(f.functionName));
  if (loading >= 0) {
    // An `import` of a built-in goes through its translator; a `require` as a package runs does not.
    const translating = stack.findIndex((f) => f.functionName === 'builtinStrategy');
    const asked = stack
      .slice(translating >= 0 ? translating : loading)
      .find((f) => /^node:(?!internal\/)/.test(f.url));
    const name = asked?.url.slice('node:'.length);
    // The ESM facade of a built-in reads every export once, and a lazy export loads its module then.
    if (stack.some((f) => f.functionName === 'getESMFacade')) {
      return ['built-in', name === undefined ? 'ESM exports' : `${name}: ESM exports`];
    }
    return ['built-in', name ?? '(internal)'];
  }
  const owner = stack.reduce<string | undefined>((nearest, f) => bundleFrameOwner(f) ?? nearest, undefined);
  if (owner !== undefined) return ['evaluation', owner];
  if (stack.some((f) => f.url.startsWith(MODULE_LOADERS))) return ['loader', ''];
  return ['other', ''];
}

/** Owners by share of the whole busy time, largest first: `[owner, share 0–1]`. */
export function shares(busy: ReadonlyMap<string, number>): [string, number][] {
  const total = [...busy.values()].reduce((a, b) => a + b, 0);
  if (total === 0) return [];
  return [...busy.entries()].map(([k, v]): [string, number] => [k, v / total]).sort((a, b) => b[1] - a[1]);
}

/** Who the busy time of the ingest bench's serving process works for (`ingestParts`). */
export type IngestPart = 'the webhook function' | 'the local stand-ins' | 'Node, no caller of ours';

/** What the deployed webhook function runs: the project's function code and the packages it bundles. */
const FUNCTION_OWNER =
  /^(?:shared\/|functions\/|zod$|@aws-sdk\/|@smithy\/|@aws-lambda-powertools\/|@middy\/)/;

/**
 * The ingest bench's serving process (`--profile`) by part: what the webhook function itself runs
 * (its code, zod, the AWS SDK's client with the Node code it calls), what stands in locally for
 * AWS's side (`infra/local/`, the HTTP server in front of the handler that API Gateway is in AWS;
 * fauxqs and its fastify server, SQS; anything else a package or file of the project), and Node's own
 * work that no frame of ours called (`(garbage collector)`, `(writev)` flushing sockets, …). Largest
 * part first, each with its owners as given (largest first when `busy` is, as `shares` gives it).
 */
export function ingestParts(
  busy: readonly [string, number][],
): { part: IngestPart; share: number; owners: [string, number][] }[] {
  const parts = new Map<IngestPart, [string, number][]>();
  for (const [owner, share] of busy) {
    const part: IngestPart = owner.startsWith('(')
      ? 'Node, no caller of ours'
      : FUNCTION_OWNER.test(owner)
        ? 'the webhook function'
        : 'the local stand-ins';
    const owners = parts.get(part) ?? [];
    owners.push([owner, share]);
    parts.set(part, owners);
  }
  return [...parts]
    .map(([part, owners]) => ({ part, share: owners.reduce((sum, [, s]) => sum + s, 0), owners }))
    .sort((a, b) => b.share - a.share);
}

/** Adds `more` into `into`. */
export function addBusy(into: Map<string, number>, more: ReadonlyMap<string, number>): void {
  for (const [k, v] of more) into.set(k, (into.get(k) ?? 0) + v);
}

/** The project's root, under which a source file's owner is its path. */
const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * A profile of a process that runs the project's sources as files (the bench's own process, the
 * sandbox's): owners by share, each sample given to its package or project file.
 */
export function projectShares(profile: CpuProfile): [string, number][] {
  return shares(busyByOwner(profile, fileOwner(PROJECT_ROOT)));
}

/**
 * V8's CPU profiler on the calling process, as `--cpu-prof` runs it in the workers: where the
 * processes that share the cores with them (the emulators', the sandbox's) spend their time.
 * `stop` ends it and resolves the profile (the same one however often it is called).
 */
export async function startProfiler(): Promise<{ stop(): Promise<CpuProfile> }> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  let stopped: Promise<CpuProfile> | undefined;
  return {
    stop() {
      stopped ??= session.post('Profiler.stop').then(({ profile }) => {
        session.disconnect();
        return profile as unknown as CpuProfile;
      });
      return stopped;
    },
  };
}

import { Session } from 'node:inspector/promises';
import { fileURLToPath } from 'node:url';

/**
 * Where a worker process's CPU goes, from the V8 CPU profiles its `--cpu-prof` writes
 * (`npm run bench -- --only multi --profile`): the busy time by package or project file of the
 * instance's bundle, so that a missed target comes with its profile, not just its figure. The same
 * for the bench's own process (fauxqs and dynalite) and the sandbox's, whose sources are files.
 */

/** The parts of a V8 CPU profile (`.cpuprofile`) read here. */
export interface CpuProfile {
  readonly nodes: readonly {
    readonly id: number;
    readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
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
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
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

/** Owners by share of the whole busy time, largest first: `[owner, share 0–1]`. */
export function shares(busy: ReadonlyMap<string, number>): [string, number][] {
  const total = [...busy.values()].reduce((a, b) => a + b, 0);
  if (total === 0) return [];
  return [...busy.entries()].map(([k, v]): [string, number] => [k, v / total]).sort((a, b) => b[1] - a[1]);
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

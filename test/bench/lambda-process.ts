import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import type { CpuProfile } from './profile.ts';

/**
 * The bench's stand-ins for a Lambda function run its bundle as Lambda runs it: Node started with no
 * NODE_OPTIONS, as the stack starts every function, whatever the bench itself runs with; the
 * bundle's map beside it. On 2026-11-27 the functions ran with `--enable-source-maps`, and so did
 * the stand-ins, which paid what a deployed function paid for its readable stack traces: reading the
 * map at every cold start. Since 2026-11-28 the bundles read it on their first stack trace
 * (shared/adapters/source-mapped-stacks.ts).
 */
export function lambdaProcessEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { NODE_OPTIONS: _bench, ...rest } = env;
  return rest;
}

/** The first line of a script that loads a function's module (`lambdaLoad`): a `require` of its own. */
export const LOAD_PRELUDE =
  "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);";

/**
 * The expression, in an ES module script that starts with `LOAD_PRELUDE`, that loads a function's
 * module as Lambda's Node.js runtime does: `import()` for an `.mjs` file, `require` for CommonJS.
 */
export function lambdaLoad(file: string): string {
  return file.endsWith('.mjs')
    ? `(await import(${JSON.stringify(pathToFileURL(file).href)}))`
    : `require(${JSON.stringify(file)})`;
}

export interface ImportTimes {
  /** Milliseconds each fresh process took to import the bundle. */
  readonly times: readonly number[];
  /**
   * Whether, in every process, loading the bundle installed its own stack formatter (the deployed
   * bundles map their stack traces themselves: shared/adapters/source-mapped-stacks.ts).
   */
  readonly mapsStacks: boolean;
  /** With `profileIntervalUs`: each import's V8 CPU profile, from just before it to its end. */
  readonly profiles: readonly CpuProfile[];
}

export interface ImportTimesOptions {
  /**
   * Profile each import with V8's CPU profiler at this sampling interval. The profiler starts in the
   * process just before the import (through `node:inspector`, loaded first), so the profile covers
   * what the time covers; its cost is in both.
   */
  readonly profileIntervalUs?: number;
}

/**
 * Loads a bundle (its map beside it, if it has one) in `runs` fresh Node processes, one after
 * another, each started as Lambda starts the function and loading it as Lambda's runtime does
 * (`lambdaLoad`): the module-initialisation part of a cold start. The environment is only PATH and a
 * region, as the handlers wire their clients on the first event and read nothing else at import.
 * The profiling script starts V8's profiler itself rather than through `startProfiler` (profile.ts):
 * importing that TypeScript module would load `node:url` and Node's type stripping before the timed
 * import, and the bundle would find them loaded.
 */
export function importTimes(file: string, runs: number, options: ImportTimesOptions = {}): ImportTimes {
  const interval = options.profileIntervalUs;
  const profiled = interval !== undefined;
  const script = [
    LOAD_PRELUDE,
    'const before = Error.prepareStackTrace;',
    ...(profiled
      ? [
          "import { Session } from 'node:inspector/promises';",
          // The global `performance` loads perf_hooks on first use: before the profile, as before the time.
          'performance.now();',
          'const session = new Session(); session.connect();',
          "await session.post('Profiler.enable');",
          `await session.post('Profiler.setSamplingInterval', { interval: ${Math.max(1, Math.round(interval))} });`,
          "await session.post('Profiler.start');",
        ]
      : []),
    `const t = performance.now(); ${lambdaLoad(file)}; const ms = performance.now() - t;`,
    ...(profiled ? ["const { profile } = await session.post('Profiler.stop');"] : []),
    `process.stdout.write(JSON.stringify({ ms, mapsStacks: Error.prepareStackTrace !== before${profiled ? ', profile' : ''} }));`,
  ].join('\n');
  const times: number[] = [];
  const profiles: CpuProfile[] = [];
  let mapsStacks = true;
  for (let i = 0; i < runs; i++) {
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      env: lambdaProcessEnv({ PATH: process.env['PATH'] ?? '', AWS_REGION: 'us-east-1' }),
      // A profile of a cold start is a few MB of JSON.
      maxBuffer: 256 * 1024 * 1024,
    });
    if (child.status !== 0) throw new Error(`importing ${file} failed: ${child.stderr.slice(0, 500)}`);
    const measured = JSON.parse(child.stdout) as { ms: number; mapsStacks: boolean; profile?: CpuProfile };
    times.push(measured.ms);
    if (measured.profile !== undefined) profiles.push(measured.profile);
    mapsStacks &&= measured.mapsStacks;
  }
  return { times, mapsStacks, profiles };
}

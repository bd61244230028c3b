import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleEntryAs, codeFileName } from '../../infra/bundle-report.ts';
import { importTimes, lambdaProcessEnv } from '../bench/lambda-process.ts';
import { importPhases, mappedBundleOwner } from '../bench/profile.ts';

/**
 * The bench's stand-ins for a function (the multi-instance drain's worker processes, the cold
 * start's imports) run its bundle as Lambda runs it: Node started without NODE_OPTIONS, as the stack
 * starts every function, the bundle's source map beside it, cut to the project's files as deployed,
 * and read by the bundle itself on its first stack trace. A bundle made with the stack's settings,
 * in a folder of its own, is the function here.
 */
const dir = mkdtempSync(join(tmpdir(), 'bench-lambda-process-test-'));
const entry = join(dir, 'entry.ts');
const bundle = join(dir, codeFileName());
const busyEntry = join(dir, 'busy.ts');
const busyBundle = join(dir, 'busy', codeFileName());
afterAll(() => rmSync(dir, { recursive: true, force: true }));

beforeAll(async () => {
  writeFileSync(
    entry,
    [
      'export function whereAmI(): string {',
      "  return new Error('here').stack ?? '';",
      '}',
      'if (process.argv[2] === "print") process.stdout.write(whereAmI());',
      '',
    ].join('\n'),
  );
  // The worker's bundling settings (minified, a linked map without sources content), this entry.
  await bundleEntryAs('worker', entry, bundle);
  // A module whose top level keeps the CPU busy for 40 ms, as a heavy dependency's would.
  writeFileSync(
    busyEntry,
    [
      'function spin(ms: number): number {',
      '  const until = performance.now() + ms;',
      '  let turns = 0;',
      '  while (performance.now() < until) turns++;',
      '  return turns;',
      '}',
      'export const turns = spin(40);',
      '',
    ].join('\n'),
  );
  await bundleEntryAs('worker', busyEntry, busyBundle);
});

describe('a stand-in for a Lambda function', () => {
  it('runs without NODE_OPTIONS, as the stack starts every function, whatever the bench runs with', () => {
    // Prepare: what the bench starts its worker processes with, from its own environment
    const env = lambdaProcessEnv({ PATH: process.env['PATH'] ?? '', NODE_OPTIONS: '--enable-source-maps' });

    // Assess: none of the bench's own options
    expect(env).not.toHaveProperty('NODE_OPTIONS');
    expect(env.PATH).toBe(process.env['PATH'] ?? '');
  });

  it('names the TypeScript in a stack trace, as a deployed function does', () => {
    // Act: the bundle run as the bench runs a worker process
    const run = spawnSync(process.execPath, [bundle, 'print'], {
      encoding: 'utf8',
      env: lambdaProcessEnv({ PATH: process.env['PATH'] ?? '' }),
    });

    // Assess: the bundle mapped its own frame through the map beside it
    expect(run.stdout).toMatch(/entry\.ts:2:\d+/);
    expect(run.stdout).not.toMatch(/index\.js:/);
  });

  it('imports a bundle for the cold start as Lambda does, and reports that it maps its own stacks', () => {
    // Act
    const measured = importTimes(bundle, 2);

    // Assess: two imports timed, each bundle installing its stack formatter while it loaded
    expect(measured.times).toHaveLength(2);
    for (const ms of measured.times) expect(ms).toBeGreaterThan(0);
    expect(measured.mapsStacks).toBe(true);
  });

  it("profiles an import on request, with V8's profiler on only around it", () => {
    // Act: one import timed and profiled
    const measured = importTimes(busyBundle, 1, { profileIntervalUs: 200 });

    // Assess: the busy module's own function holds most of the import, found through its map
    expect(measured.times).toHaveLength(1);
    expect(measured.profiles).toHaveLength(1);
    const map = new SourceMap(JSON.parse(readFileSync(`${busyBundle}.map`, 'utf8')));
    const url = pathToFileURL(busyBundle).href;
    const [profile] = measured.profiles;
    if (profile === undefined) throw new Error('no profile');
    const phases = importPhases(
      profile,
      mappedBundleOwner((u) => u === url, map),
    );
    const total = [...phases.values()].flatMap((parts) => [...parts.values()]).reduce((a, b) => a + b, 0);
    const project = phases.get('evaluation')?.get('(project)') ?? 0;
    expect(project / total).toBeGreaterThan(0.5);
    // And without the option no profiler runs
    expect(importTimes(busyBundle, 1).profiles).toEqual([]);
  });
});

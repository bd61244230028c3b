import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * `npm run bench` with options it cannot run: it says which option and why, exits 1 before it
 * bundles, starts or writes anything, as `--batch-size` did alone before.
 */

const RUN = fileURLToPath(new URL('../bench/run.ts', import.meta.url));

/** Runs the bench in a scratch folder (its reports go under `reports/` there); its exit and output. */
function bench(...args: string[]): { status: number | null; stderr: string; wrote: string[] } {
  const cwd = mkdtempSync(join(tmpdir(), 'bench-options-'));
  try {
    const run = spawnSync(process.execPath, [RUN, ...args], { cwd, encoding: 'utf8', timeout: 60_000 });
    return { status: run.status, stderr: run.stderr, wrote: readdirSync(cwd) };
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
}

describe('npm run bench: options it cannot run', () => {
  it.each([
    [['--only', 'cold', '--cold-runs', 'abc'], '--cold-runs'],
    [['--only', 'cold', '--cold-runs', '0'], '--cold-runs'],
    [['--only', 'cold', '--cold-profile-runs', '-1'], '--cold-profile-runs'],
    [['--only', 'drain', '--orders', '2k'], '--orders'],
    [['--only', 'drain', '--pollers', '1.5'], '--pollers'],
    [['--only', 'ingest', '--ingest-seconds', ''], '--ingest-seconds'],
    [['--only', 'ingest', '--connections', 'many'], '--connections'],
    [['--only', 'multi', '--instances', '1,,10'], '--instances'],
    [['--only', 'multi', '--instances', '0'], '--instances'],
    [['--only', 'multi', '--multi-orders', '1e3'], '--multi-orders'],
    [['--only', 'multi', '--multi-pollers', '0'], '--multi-pollers'],
    [['--only', 'multi', '--max-concurrency', 'x'], '--max-concurrency'],
    [['--only', 'multi', '--foreign', '-30'], '--foreign'],
    [['--only', 'multi', '--foreign-instances', '0'], '--foreign-instances'],
    [['--only', 'multi', '--pacing', 'adaptive,fast'], '--pacing'],
    [['--only', 'colds'], '--only'],
  ])('%j: exit 1, naming %s, before any work', (args, option) => {
    // Act
    const { status, stderr, wrote } = bench(...args);

    // Assess: commander's message names the option; nothing was measured or written
    expect(status).toBe(1);
    expect(stderr).toContain(`option '${option} `);
    expect(stderr).not.toMatch(/bundling|drain:|ingest:/);
    expect(wrote).toEqual([]);
  });

  it('names the values each list option takes', () => {
    // Act
    const only = bench('--only', 'cold,warm');
    const pacing = bench('--pacing', 'dynamic');

    // Assess
    expect(only.stderr).toContain('drain, multi, ingest, cold');
    expect(only.stderr).toContain('warm');
    expect(pacing.stderr).toContain('static, adaptive');
    expect(pacing.stderr).toContain('dynamic');
  });
});

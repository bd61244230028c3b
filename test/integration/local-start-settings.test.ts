import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnLocalStart, untilServing } from '../support/local-start.ts';

/**
 * `npm start` with a wrong or half-given setting: exit 2 and one line naming the setting, before
 * anything starts; never a stack trace, never a setting silently ignored.
 */

const START = fileURLToPath(new URL('../../infra/local/start.ts', import.meta.url));
const cwd = mkdtempSync(join(tmpdir(), 'connector-settings-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

/** `npm start` in an empty directory with only these settings; killed if it starts at all. */
function npmStart(env: Record<string, string>): { status: number | null; stderr: string; stdout: string } {
  const run = spawnSync(process.execPath, [START, '--quiet'], {
    cwd,
    env: { PATH: process.env['PATH'] ?? '', PORT: '0', SANDBOX_PORT: '0', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: run.status, stderr: run.stderr, stdout: run.stdout };
}

/** What a stack trace prints, in Node's format. */
const STACK_LINE = /^\s+at /m;

describe('npm start with a bad setting', () => {
  it('refuses a LOCAL_DATA_DIR that is a file with exit 2 naming it, not a stack trace', () => {
    // Prepare
    const file = join(cwd, 'data-is-a-file');
    writeFileSync(file, 'not a directory');
    // Act
    const run = npmStart({ LOCAL_DATA_DIR: file });
    // Assess
    expect(run.stderr).not.toMatch(STACK_LINE);
    expect(run.stderr).toContain('LOCAL_DATA_DIR');
    expect(run.stderr).toContain(file);
    expect(run.status).toBe(2);
  });

  it.each([
    ['AFFILIATE_BASE_URL', 'AFFILIATE_TOKEN', { AFFILIATE_BASE_URL: 'http://127.0.0.1:9' }],
    ['AFFILIATE_TOKEN', 'AFFILIATE_BASE_URL', { AFFILIATE_TOKEN: 'a-token' }],
  ])('refuses %s without %s (exit 2) instead of running against the sandbox', (_given, missing, env) => {
    const run = npmStart(env);

    expect(run.stdout).not.toContain('Conversion connector running locally');
    expect(run.stderr).toContain(missing);
    expect(run.status).toBe(2);
  });

  it('refuses another platform without PROGRAM_ID and RULE_ID with exit 2 naming them', () => {
    const run = npmStart({ AFFILIATE_BASE_URL: 'http://127.0.0.1:9', AFFILIATE_TOKEN: 'a-token' });

    expect(run.stderr).toContain('PROGRAM_ID');
    expect(run.stderr).toContain('RULE_ID');
    expect(run.status).toBe(2);
  });

  it.each([
    ['LEASE_MS', 'abc'],
    ['ADD_VERIFY_SECONDS', 'soon'],
    ['AFFILIATE_ROUTES', '{not json'],
  ])('refuses a wrong worker setting %s with exit 2 naming it', (name, value) => {
    const run = npmStart({ [name]: value });

    expect(run.stderr).not.toMatch(STACK_LINE);
    expect(run.stderr).toContain(name);
    expect(run.status).toBe(2);
  });

  it('refuses a SANDBOX_FAULTS that is not JSON with exit 2 naming it, rather than ignoring it', () => {
    const run = npmStart({ SANDBOX_FAULTS: '{"errorRate":' });

    expect(run.stderr).not.toMatch(STACK_LINE);
    expect(run.stderr).toContain('SANDBOX_FAULTS');
    expect(run.status).toBe(2);
  });
});

describe('npm start with the sandbox’s own settings', () => {
  it('starts its sandbox with SANDBOX_FAULTS and SANDBOX_DUPLICATES, as npm run sandbox does', async () => {
    // Prepare
    const faults = { errorRate: 1, errorStatus: 503, routes: ['/advertiser/conversions.add'] };
    const run = spawnLocalStart(cwd, {
      SANDBOX_FAULTS: JSON.stringify(faults),
      SANDBOX_DUPLICATES: 'reject',
    });
    try {
      const { platformUrl } = await untilServing(run);
      // Act
      const set = (await (await fetch(`${platformUrl}/_sandbox/faults`)).json()) as { faults: unknown };
      const options = (await (await fetch(`${platformUrl}/_sandbox/options`)).json()) as {
        options: { duplicates: string };
      };
      // Assess
      expect(set.faults).toMatchObject(faults);
      expect(options.options.duplicates).toBe('reject');
    } finally {
      run.child.kill('SIGKILL');
      await run.exited;
    }
  });
});

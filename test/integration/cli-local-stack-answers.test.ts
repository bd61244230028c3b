import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { localState } from '../../infra/local/stack.ts';
import { LOCAL_STATE_FILE } from '../../local/defaults.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { DEFAULT_VERIFY_MS } from '../../shared/worker/flow.ts';
import { localStackForCli, runCli } from '../support/cli.ts';

/**
 * What the CLI tells an operator of the local stack, from the `.local-stack.json` that `npm start`
 * writes: backfill's JSON alone on stdout, the verification window of an unclear add, and the fix
 * when the shop fakes no longer answer.
 */
const CLICK = '0123456789abcdef01234567';
const local = localStackForCli();

const cli = (argv: string[], env: Record<string, string> = {}) => runCli(argv, { cwd: local.dir, env });
const program = () => [...local.stack.sources.values()][0]?.program ?? '';

function unclearAdd(externalId: string, at: number): OrderRecord {
  const now = new Date(at).toISOString();
  return {
    key: ledgerKey(program(), externalId),
    program: program(),
    externalId,
    source: 'shopify',
    state: 'adding',
    version: 0,
    kind: 'tracking',
    originalAmount: 1500,
    currentAmount: 1500,
    currency: 'EUR',
    refunds: {},
    createdAt: now,
    updatedAt: now,
    unclearAddAt: at,
    leaseOwner: 'a-worker',
    leaseUntil: at + 60_000,
  };
}

describe('connector backfill --json with stderr a pipe (CI)', () => {
  it('prints the JSON summary alone on stdout and the per-change log on stderr', async () => {
    // Prepare: one order the webhooks missed
    const shops = local.stack.sandbox?.shops.control;
    if (!shops) throw new Error('the local stack runs the sandbox in process');
    shops.reset();
    shops.createOrder('shopify', { clickId: CLICK, at: new Date(Date.now() - 60_000).toISOString() });
    // Act
    const run = await cli(['backfill', '--source', 'shopify', '--from', '1h', '--dry-run', '--json']);
    // Assess
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ source: 'shopify', found: 1 });
    expect(run.stderr).toMatch(/^\[1\/1\] .+/m);
  });
});

describe('connector status of an unclear add against the local stack', () => {
  it("words the worker's verification window with its number, read from .local-stack.json", async () => {
    // Prepare: an add without a clear answer a moment ago; ADD_VERIFY_SECONDS not set for the CLI
    const at = Date.now() - 5_000;
    await local.stack.ledger.create(unclearAdd('L-UNCLEAR', at));
    // Act
    const shown = await cli(['status', 'L-UNCLEAR']);
    // Assess
    const seconds = DEFAULT_VERIFY_MS / 1000;
    expect(shown.stdout).toContain('no clear answer');
    expect(shown.stdout).toContain(
      `(ADD_VERIFY_SECONDS: ${seconds} s), until ${new Date(at + DEFAULT_VERIFY_MS).toISOString()}`,
    );
  });

  it('takes ADD_VERIFY_SECONDS given to the command over the file', async () => {
    // Prepare
    await local.stack.ledger.create(unclearAdd('L-UNCLEAR-ENV', Date.now() - 5_000));
    // Act
    const shown = await cli(['status', 'L-UNCLEAR-ENV'], { ADD_VERIFY_SECONDS: '10' });
    // Assess
    expect(shown.stdout).toContain('(ADD_VERIFY_SECONDS: 10 s)');
  });
});

/** The fix line under each failed `shop webhooks <source>` check of doctor's output. */
function shopFixes(stdout: string): string[] {
  const lines = stdout.split('\n');
  return lines.flatMap((line, i) => (line.startsWith('✗ shop webhooks ') ? [lines[i + 1] ?? ''] : []));
}

describe('connector doctor with the state file of a stack that was killed', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it("tells that the shop APIs are the local stack's shop fakes, and to start it, not to check shopApi.url", async () => {
    // Prepare: every address of the file on a port where nothing listens any more
    const dead = await new Promise<number>((resolve) => {
      const server = createServer();
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    const dir = mkdtempSync(join(tmpdir(), 'connector-stale-shops-'));
    dirs.push(dir);
    const stale = JSON.stringify(localState(local.stack)).replace(
      /(127\.0\.0\.1|localhost):\d+/g,
      `127.0.0.1:${dead}`,
    );
    writeFileSync(join(dir, LOCAL_STATE_FILE), stale);
    // Act
    const doctor = await runCli(['doctor'], { cwd: dir });
    // The same shop URLs given as the user's own SOURCES: a shop of theirs, not the stack's fakes
    const own = await runCli(['doctor'], {
      cwd: dir,
      env: { SOURCES: JSON.stringify((JSON.parse(stale) as { sources: unknown }).sources) },
    });
    // Assess
    expect(doctor.code).toBe(1);
    const fixes = shopFixes(doctor.stdout);
    expect(fixes, doctor.stdout).toHaveLength(3);
    for (const fix of fixes) {
      expect(fix).toContain("the local stack's shop fakes");
      expect(fix).toContain('npm start');
      expect(fix).not.toContain('check shopApi.url');
    }
    const ownFixes = shopFixes(own.stdout);
    expect(ownFixes, own.stdout).toHaveLength(3);
    for (const fix of ownFixes) {
      expect(fix).toContain('check shopApi.url of source');
      expect(fix).not.toContain('shop fakes');
    }
  }, 60_000);
});

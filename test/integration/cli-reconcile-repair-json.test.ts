import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import { localStateDir, runCli } from '../support/cli.ts';

/**
 * `reconcile --json` and `--csv` are for scripts (`… --json > report.json`, a spreadsheet): with
 * `--repair`, stdout must still be that JSON or CSV alone; the repair's plan and outcome are for the
 * person, on stderr, where its confirmation prompt already is.
 */
const LONG_AGO = 20 * 60_000;
let stack: LocalStack;
let state: { dir: string; remove(): void };
let program: string;
const startedAt = new Date(Date.now() - 2 * 3_600_000).toISOString();

/** An add left unfinished for good whose conversion never reached the platform. */
async function stuckAdd(externalId: string): Promise<void> {
  const then = new Date(Date.now() - LONG_AGO).toISOString();
  await stack.ledger.create({
    key: ledgerKey(program, externalId),
    program,
    externalId,
    source: 'generic',
    state: 'adding',
    version: 0,
    kind: 'tracking',
    originalAmount: 1500,
    currentAmount: 1500,
    currency: 'EUR',
    refunds: {},
    leaseOwner: 'a-worker-that-died',
    leaseUntil: Date.parse(then),
    createdAt: then,
    updatedAt: then,
  });
}

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 } });
  state = localStateDir(stack);
  program = stack.sources.get('generic')?.program ?? '';
  await stuckAdd('7201');
  await stuckAdd('7202');
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const cli = (...argv: string[]) => runCli(argv, { cwd: state.dir });

describe('reconcile --repair for scripts', () => {
  it('keeps stdout the CSV of a dry run, the plan on stderr', async () => {
    // Act
    const dry = await cli(
      'reconcile',
      '--from',
      startedAt,
      '--program',
      program,
      '--csv',
      '--repair',
      '--dry-run',
    );

    // Assess
    expect(dry.code).toBe(1);
    const lines = dry.stdout.trim().split('\n');
    expect(lines[0]).toBe(
      'kind,program,externalId,conversionId,ledgerState,ledgerAmount,platformStatus,platformAmount,currency,detail',
    );
    expect(lines.slice(1).map((l) => l.split(',')[0])).toEqual(['stuck_add', 'stuck_add']);
    expect(dry.stderr).toMatch(/7201\s+failed: no conversion on the platform/);
    expect(dry.stderr).toContain('dry run: 2 stuck adds would be repaired');
  });

  it('keeps stdout the JSON report, and the repair is done and told on stderr', async () => {
    // Act
    const repaired = await cli(
      'reconcile',
      '--from',
      startedAt,
      '--program',
      program,
      '--json',
      '--repair',
      '--yes',
    );

    // Assess: done, yet both orders are left without a conversion (failed): exit 1.
    expect(repaired.code, repaired.stderr).toBe(1);
    expect(JSON.parse(repaired.stdout).differences.map((d: { kind: string }) => d.kind)).toEqual([
      'stuck_add',
      'stuck_add',
    ]);
    expect(repaired.stderr).toContain('repaired 2 stuck adds');
    expect(repaired.stderr).toMatch(/^7201: failed: no conversion on the platform/m);
    expect((await stack.ledger.get(ledgerKey(program, '7201')))?.state).toBe('failed');
  });
});

import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { IngestResult } from '../bench/run.ts';

/**
 * `npm run bench -- --only ingest --profile`, run for real and briefly: autocannon from its own
 * process against the local stack, every request answered 202, and the report says what the serving
 * process spent (its CPU, per request) and, profiled, what that CPU worked for: the webhook function
 * (its code, zod, the SDK's SQS client), the local stand-ins of AWS (the HTTP server in front of the
 * handler, fauxqs), Node's own work. Issue 16: a missed ingest target comes with where the time goes.
 */

const RUN = fileURLToPath(new URL('../bench/run.ts', import.meta.url));
const cwd = mkdtempSync(join(tmpdir(), 'bench-ingest-'));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

function bench(...args: string[]): Promise<{ status: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [RUN, ...args], { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.once('error', reject);
    child.once('exit', (status) => resolve({ status, stderr }));
  });
}

/** The part of the bench's JSON report read here. */
interface IngestReport {
  readonly ingest: IngestResult;
}

describe('npm run bench -- --only ingest', () => {
  it('loads the webhook, every request answered 202, and says what the serving process spent and on what', async () => {
    // Act
    const run = await bench('--only', 'ingest', '--ingest-seconds', '1', '--connections', '4', '--profile');
    // Assess
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const files = readdirSync(join(cwd, 'reports'));
    const json = files.find((f) => f.endsWith('.json')) ?? '';
    const md = files.find((f) => f.endsWith('.md')) ?? '';
    const report = JSON.parse(readFileSync(join(cwd, 'reports', json), 'utf8')) as IngestReport;
    const ingest = report.ingest;
    expect(ingest.requests).toBeGreaterThan(0);
    expect(ingest.non2xx).toBe(0);
    expect(ingest.errors).toBe(0);
    expect(ingest.servingCpuPercent).toBeGreaterThan(0);
    expect(ingest.servingCpuMicrosPerRequest).toBeGreaterThan(0);
    expect(ingest.loadCpuPercent).toBeGreaterThan(0);
    const owners = (ingest.servingCpuByOwner ?? []).map(([owner]) => owner);
    expect(owners).toContain('@smithy/core');
    expect(owners).toContain('infra/local/stack.ts');
    expect(owners).toContain('fauxqs');
    const text = readFileSync(join(cwd, 'reports', md), 'utf8');
    expect(text).toContain('serving CPU µs per request');
    // The three parts come largest first: on a loaded machine Node's own work (GC) can lead.
    expect(text).toMatch(/(?:^- |· )the webhook function [\d.]+% \(.*@smithy\/core/m);
    expect(text).toMatch(/the local stand-ins [\d.]+% \(.*infra\/local\/stack\.ts/);
  }, 60_000);
});

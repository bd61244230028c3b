import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { LOCAL_STATE_FILE } from '../../local/defaults.ts';
import {
  type LocalServing,
  type LocalStart,
  postLocalOrder,
  spawnLocalStart,
  untilServing,
} from '../support/local-start.ts';
import { until } from '../support/until.ts';

/**
 * A second `npm start` while one runs: a port taken, the same LOCAL_DATA_DIR, the same directory
 * (one `.local-stack.json`). Each gets a clear one-line answer and leaves the running stack whole.
 */

const STACK_LINE = /^\s+at /m;

const dirs: string[] = [];
const runs: LocalStart[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const r of runs.splice(0)) {
    r.child.kill('SIGKILL');
    await r.exited;
  }
  for (const s of servers.splice(0)) s.close();
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

function spawnStart(cwd: string, env: Record<string, string> = {}): LocalStart {
  const run = spawnLocalStart(cwd, env);
  runs.push(run);
  return run;
}

/** `npm start` up and serving, or the test fails with what it printed. */
function start(cwd: string, env: Record<string, string> = {}): Promise<LocalServing> {
  return untilServing(spawnStart(cwd, env));
}

async function stop(running: LocalStart): Promise<number | null> {
  running.child.kill('SIGINT');
  return (await running.exited).code;
}

/** A port some other program holds. */
async function takenPort(): Promise<number> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return typeof address === 'object' && address ? address.port : 0;
}

function stateIn(cwd: string): { connectorUrl?: string } | undefined {
  const file = join(cwd, LOCAL_STATE_FILE);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { connectorUrl?: string }) : undefined;
}

async function placeAndAwait(running: LocalServing, orderId: string): Promise<number> {
  expect(await postLocalOrder(running.url, orderId)).toBe(202);
  return until(
    async () => {
      const res = await fetch(`${running.platformUrl}/_sandbox/conversions`);
      const { conversions } = (await res.json()) as { conversions: { externalId: string }[] };
      return conversions.filter((c) => c.externalId === orderId).length;
    },
    (found) => found > 0,
    `a conversion of order ${orderId}`,
  );
}

describe('a second npm start while one runs', () => {
  it('says that PORT is taken (exit 1), without a stack trace', async () => {
    // Prepare
    const port = await takenPort();
    // Act
    const run = spawnStart(tempDir('connector-cwd-'), { PORT: String(port) });
    const { code } = await run.exited;
    // Assess
    expect(run.output()).not.toMatch(STACK_LINE);
    expect(run.output()).toContain('port already in use');
    expect(run.output()).toContain(String(port));
    expect(code).toBe(1);
  });

  it('refuses the LOCAL_DATA_DIR of the running one (exit 1, naming it), and the first runs on', async () => {
    // Prepare
    const dataDir = tempDir('connector-data-');
    const firstDir = tempDir('connector-cwd-');
    const first = await start(firstDir, { LOCAL_DATA_DIR: dataDir });
    // Act
    const second = spawnStart(tempDir('connector-cwd-'), { LOCAL_DATA_DIR: dataDir });
    const { code } = await second.exited;
    // Assess
    expect(second.output()).not.toMatch(STACK_LINE);
    expect(second.output()).toContain('LOCAL_DATA_DIR');
    expect(second.output()).toContain(String(first.child.pid));
    expect(code).toBe(1);
    expect(await placeAndAwait(first, 'still-running-1')).toBe(1);
    expect(stateIn(firstDir)?.connectorUrl).toBe(first.url);
  }, 90_000);

  it('leaves .local-stack.json to the stack still running when the other in the same directory stops', async () => {
    // Prepare: two stacks started from one directory, the second on other ports.
    const cwd = tempDir('connector-cwd-');
    const first = await start(cwd);
    const second = await start(cwd);
    expect(stateIn(cwd)?.connectorUrl).toBe(second.url);
    // Act
    expect(await stop(first)).toBe(0);
    const afterFirstStopped = stateIn(cwd)?.connectorUrl;
    expect(await stop(second)).toBe(0);
    // Assess
    expect(afterFirstStopped).toBe(second.url);
    expect(stateIn(cwd)).toBeUndefined();
  }, 90_000);

  it('hands .local-stack.json back to the first stack when the second one stops', async () => {
    // Prepare
    const cwd = tempDir('connector-cwd-');
    const first = await start(cwd);
    const second = await start(cwd);
    // Act
    expect(await stop(second)).toBe(0);
    const afterSecondStopped = stateIn(cwd)?.connectorUrl;
    expect(await stop(first)).toBe(0);
    // Assess
    expect(afterSecondStopped).toBe(first.url);
    expect(stateIn(cwd)).toBeUndefined();
  }, 90_000);
});

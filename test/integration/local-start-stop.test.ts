import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { LOCAL_STATE_FILE } from '../../local/defaults.ts';
import { localEmulators } from '../support/local-emulators.ts';
import {
  type LocalServing,
  type LocalStart,
  postLocalOrder,
  spawnLocalStart,
  untilPrinted,
  untilServing,
} from '../support/local-start.ts';
import { until } from '../support/until.ts';

/**
 * Stopping `npm start` while a batch is in hand: Ctrl-C waits for it, a second Ctrl-C does not, and
 * closing the terminal (SIGHUP) stops it as Ctrl-C does. With LOCAL_DATA_DIR nothing is lost either
 * way: what the forced stop cut short is finished after a restart, once.
 */

interface Running extends LocalServing {
  readonly cwd: string;
}

const dirs: string[] = [];
const children: LocalStart[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    c.child.kill('SIGKILL');
    await c.exited;
  }
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

async function start(cwd: string, env: Record<string, string> = {}, quiet = true): Promise<Running> {
  const run = spawnLocalStart(cwd, env, { quiet });
  children.push(run);
  return { ...(await untilServing(run)), cwd };
}

async function placeOrder(running: Running, orderId: string): Promise<void> {
  expect(await postLocalOrder(running.url, orderId)).toBe(202);
}

async function setFaults(running: Running, faults: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${running.platformUrl}/_sandbox/faults`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(faults),
  });
  expect(res.status).toBe(200);
}

/** Resolves once the sandbox has been called on `route` (the worker holds the order's batch). */
async function calledOn(running: Running, route: string): Promise<void> {
  const callsOn = async () => {
    const res = await fetch(`${running.platformUrl}/_sandbox/calls`, { signal: AbortSignal.timeout(10_000) });
    const { calls } = (await res.json()) as { calls: Record<string, { total: number }> };
    return calls[route]?.total ?? 0;
  };
  await until(callsOn, (total) => total > 0, `a call on ${route}`);
}

/** The first Ctrl-C was taken: the stack is stopping and finishing the batches in hand. */
const STOPPING = 'finishing the batches in hand';

async function conversionsOf(running: Running, externalId: string): Promise<number> {
  const res = await fetch(`${running.platformUrl}/_sandbox/conversions`);
  const { conversions } = (await res.json()) as { conversions: { externalId: string }[] };
  return conversions.filter((c) => c.externalId === externalId).length;
}

const ADD = '/advertiser/conversions.add';

describe('stopping npm start while a batch is in hand', () => {
  it('stops at once on a second Ctrl-C instead of waiting out the platform’s retry-after', async () => {
    // Prepare: the platform asks to wait 25 s, and the worker waits within its invocation.
    const running = await start(tempDir('connector-cwd-'));
    await setFaults(running, { burst429: 3, burstRetryAfterMs: 25_000, routes: [ADD] });
    await placeOrder(running, 'stop-twice-1');
    await calledOn(running, ADD);
    // Act
    running.child.kill('SIGINT');
    await untilPrinted(running, STOPPING);
    const secondAt = Date.now();
    running.child.kill('SIGINT');
    const exit = await running.exited;
    // Assess: well before the 25 s the first Ctrl-C would have waited
    expect(Date.now() - secondAt).toBeLessThan(5_000);
    expect(exit.code).toBe(130);
    expect(running.output()).toContain('stopped at once');
    expect(existsSync(join(running.cwd, LOCAL_STATE_FILE))).toBe(false);
  }, 60_000);

  it('finishes an add cut short by the second Ctrl-C after a restart on LOCAL_DATA_DIR, once', async () => {
    // Prepare: an add the platform answers in 4 s (within the client's 5 s), and records only then.
    const dataDir = tempDir('connector-data-');
    const first = await start(tempDir('connector-cwd-'), { LOCAL_DATA_DIR: dataDir });
    await setFaults(first, { latencyMs: 4_000, routes: [ADD] });
    await placeOrder(first, 'stop-twice-2');
    // The worker leases the order in the ledger, then sends the add: from here the add is going out,
    // and the platform holds its answer for 4 s.
    const before = localEmulators(first.cwd);
    try {
      await until(
        () => before.ledgerRecord('stop-twice-2'),
        (record) => record?.state === 'adding',
        'the order to be leased for its add',
      );
    } finally {
      before.close();
    }
    // Act
    first.child.kill('SIGINT');
    await untilPrinted(first, STOPPING);
    first.child.kill('SIGINT');
    expect((await first.exited).code).toBe(130);
    const second = await start(tempDir('connector-cwd-'), { LOCAL_DATA_DIR: dataDir }, false);
    // Once the queue is empty the message is done with: nothing can add the order again after that.
    const after = localEmulators(second.cwd);
    try {
      await until(
        () => after.queueLeft(),
        (left) => left === 0,
        'the recovered message to be done with',
      );
    } finally {
      after.close();
    }
    // Assess: the add was in flight when the first one stopped, and the restart added it once.
    expect(second.output()).toContain('recovered after a crash: 1 messages in flight, 1 add leases');
    expect(await conversionsOf(second, 'stop-twice-2')).toBe(1);
  }, 90_000);

  it('stops as on Ctrl-C when the terminal closes (SIGHUP): exit 0, .local-stack.json removed', async () => {
    // Prepare
    const running = await start(tempDir('connector-cwd-'));
    expect(existsSync(join(running.cwd, LOCAL_STATE_FILE))).toBe(true);
    // Act
    running.child.kill('SIGHUP');
    const exit = await running.exited;
    // Assess
    expect(exit).toEqual({ code: 0, signal: null });
    expect(existsSync(join(running.cwd, LOCAL_STATE_FILE))).toBe(false);
  });
});

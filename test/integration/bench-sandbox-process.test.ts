import { createServer } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { type SandboxProcess, startSandboxProcess } from '../bench/sandbox-host.ts';

/**
 * The multi-instance drain's sandbox runs in a process of its own, as the platform is its own
 * server for the deployed workers (test/bench/sandbox-process.ts). The drain reads what it needs
 * through the sandbox's control routes: the foreign client it sets, the calls and the conversions
 * its end-of-run checks count, and the process's CPU over IPC.
 */
const started: SandboxProcess[] = [];
afterAll(async () => {
  await Promise.all(started.map((s) => s.close()));
});

describe("the bench's sandbox process", () => {
  it('answers the platform API with its token and reports what it saw', async () => {
    // Prepare
    const sandbox = await startSandboxProcess({ port: 0 });
    started.push(sandbox);
    await sandbox.cpuStart();

    // Act: one call as a worker makes it, one without the token, a foreign client set
    const call = (token: string) =>
      fetch(`${sandbox.url}/advertiser/conversions.list`, { headers: { authorization: `Bearer ${token}` } });
    const withToken = await call(sandbox.token);
    const without = await call('not-the-token');
    await sandbox.setForeignLoad({ route: '/advertiser/conversions.add', perSecond: 7 });
    const foreign = (await (await fetch(`${sandbox.url}/_sandbox/foreign-load`)).json()) as unknown;

    // Assess
    expect(without.status).toBe(401);
    expect(withToken.status).toBe(200);
    expect(foreign).toEqual({ foreignLoad: { route: '/advertiser/conversions.add', perSecond: 7 } });
    const calls = await sandbox.calls();
    expect(Object.values(calls).reduce((n, c) => n + c.total, 0)).toBeGreaterThanOrEqual(2);
    expect(await sandbox.conversions()).toEqual([]);
    expect(sandbox.seed.programs.length).toBeGreaterThan(0);
    const cpu = await sandbox.cpu();
    expect(cpu.cpuMs).toBeGreaterThan(0);
    expect(cpu.byOwner).toBeUndefined();
  }, 30_000);

  it('profiles itself when asked, by package or project file', async () => {
    const sandbox = await startSandboxProcess({ port: 0 }, true);
    started.push(sandbox);
    await sandbox.cpuStart();
    for (let i = 0; i < 20; i++) await sandbox.calls();

    const cpu = await sandbox.cpu();

    expect(cpu.byOwner?.length).toBeGreaterThan(0);
    expect((cpu.byOwner ?? []).reduce((n, [, share]) => n + share, 0)).toBeCloseTo(1, 5);
  }, 30_000);

  it('fails with the reason when the sandbox cannot start, instead of waiting for it', async () => {
    // Prepare: a port already taken
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const address = taken.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      await expect(startSandboxProcess({ port })).rejects.toThrow(/the bench sandbox exited with 1/);
    } finally {
      taken.close();
    }
  }, 30_000);

  it('ends its process on close', async () => {
    const sandbox = await startSandboxProcess({ port: 0 });
    await sandbox.close();

    await expect(fetch(`${sandbox.url}/_sandbox/calls`)).rejects.toThrow();
  }, 30_000);
});

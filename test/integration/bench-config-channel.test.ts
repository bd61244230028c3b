import { fork, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { forkWithConfig } from '../bench/config-channel.ts';
import { firstMessage } from '../support/child-process.ts';

/**
 * The processes the bench forks (its worker instances, its ingest load generator) take their
 * settings, secrets included, over IPC: nothing of them is on their command line, which any user of
 * the machine can read (`ps`). The receiving side runs here in a process of its own, as theirs runs.
 */
const HELPERS = new URL('../bench/config-channel.ts', import.meta.url).href;
const dir = mkdtempSync(join(tmpdir(), 'bench-config-channel-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function script(name: string, body: string): string {
  const file = join(dir, name);
  writeFileSync(file, `import { receiveConfig } from ${JSON.stringify(HELPERS)};\n${body}\n`);
  return file;
}

const TOKEN = 'sandbox-token-5f0c1e9a';
const config = { env: { AFFILIATE_TOKEN: TOKEN, LEGACY_CREDENTIALS: `u1:${TOKEN}-legacy` }, pollers: 2 };

describe('the settings of a process the bench forks', () => {
  it('reach it whole, and none of them is on its command line', async () => {
    const child = forkWithConfig(
      script(
        'echo.ts',
        'const config = await receiveConfig(); process.send?.({ config, argv: process.argv });',
      ),
      config,
      { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] },
    );
    const answer = (await firstMessage(child)) as { config: unknown; argv: string[] };
    expect(answer.config).toEqual(config);
    expect(child.spawnargs.join(' ')).not.toContain(TOKEN);
    expect(answer.argv.join(' ')).not.toContain(TOKEN);
    expect(answer.argv.join(' ')).not.toContain('pollers');
  });

  it('are waited for: messages before them are not taken for them', async () => {
    const child = fork(
      script('wait.ts', 'const config = await receiveConfig(); process.send?.({ config });'),
      [],
      { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] },
    );
    child.send({ type: 'go' });
    child.send({ type: 'config', config });
    expect(await firstMessage(child)).toEqual({ config });
  });

  it('are asked for with a clear error when it is run without the bench', () => {
    // Started from a shell, as someone might run the bundle by hand: no IPC channel.
    const run = spawnSync(
      process.execPath,
      [
        script(
          'alone.ts',
          "try { await receiveConfig(); console.log('no error'); } catch (e) { console.log(String(e)); }",
        ),
      ],
      { encoding: 'utf8', timeout: 10_000 },
    );
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('npm run bench');
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emptyDir, runCli, spawnCli } from '../support/cli.ts';
import { type FakeSecretsManager, startFakeSecretsManager } from '../support/fake-secrets-manager.ts';

/**
 * `connector doctor` checks the finance key's strength (at least 32 characters), the current and
 * the previous value, wherever the key lives: a variable, or Secrets Manager (the stand-in on port 0).
 */

const STRONG = 'fk, with;semi [brackets] {braces} (parens) 0123456';
const WEAK = 'local-finance-key';

let fake: FakeSecretsManager;
let cwd: { dir: string; remove(): void };

beforeAll(async () => {
  fake = await startFakeSecretsManager({
    'connector/strong': { AWSCURRENT: STRONG, AWSPREVIOUS: `${STRONG}-old` },
    'connector/weak-previous': { AWSCURRENT: STRONG, AWSPREVIOUS: WEAK },
  });
  cwd = emptyDir();
});
afterAll(async () => {
  cwd?.remove();
  await fake?.close();
});

const AWS = () => ({
  AWS_REGION: 'us-east-1',
  AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
  AWS_SECRET_ACCESS_KEY: 'example-secret-access-key',
  AWS_ENDPOINT_URL_SECRETS_MANAGER: fake.endpoint,
});

/** In process for variables; as its own process for AWS, whose SDK reads credentials from the process. */
async function doctor(env: Record<string, string>) {
  const result = env['FINANCE_API_KEY_SECRET']
    ? await spawnCli(['doctor'], { cwd: cwd.dir, env }).done
    : await runCli(['doctor'], { cwd: cwd.dir, env });
  return result.stdout.split('\n').filter((l) => l.includes('finance key'));
}

describe('connector doctor: the finance key', () => {
  it('a weak key in FINANCE_API_KEY fails, naming the length and the minimum', async () => {
    const lines = await doctor({ FINANCE_API_KEY: WEAK });
    expect(lines.join('\n')).toMatch(/✗ finance key\s+FINANCE_API_KEY has 17 characters, fewer than 32/);
  });

  it('a strong key passes, a weak FINANCE_API_KEY_PREVIOUS fails', async () => {
    expect((await doctor({ FINANCE_API_KEY: STRONG })).join('\n')).toMatch(/✓ finance key\s+/);
    expect((await doctor({ FINANCE_API_KEY: STRONG, FINANCE_API_KEY_PREVIOUS: WEAK })).join('\n')).toMatch(
      /✗ finance key\s+FINANCE_API_KEY_PREVIOUS has 17 characters/,
    );
  });

  it('in Secrets Manager: AWSCURRENT and AWSPREVIOUS are both checked', async () => {
    const strong = await doctor({ ...AWS(), FINANCE_API_KEY_SECRET: 'connector/strong' });
    const weak = await doctor({ ...AWS(), FINANCE_API_KEY_SECRET: 'connector/weak-previous' });
    expect(strong.join('\n')).toMatch(/✓ finance key\s+/);
    expect(weak.join('\n')).toMatch(
      /✗ finance key\s+connector\/weak-previous AWSPREVIOUS has 17 characters, fewer than 32/,
    );
  });
});

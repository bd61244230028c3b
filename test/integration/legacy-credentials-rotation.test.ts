import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { legacyClientFromEnv } from '../../functions/worker.ts';
import { type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import type { LegacyClientEvent } from '../../shared/legacy/client.ts';
import { AwsSecretStore } from '../../shared/secrets.ts';
import {
  type FakeSecretsManager,
  secretsManagerClientFor,
  startFakeSecretsManager,
} from '../support/fake-secrets-manager.ts';

/**
 * The legacy credentials (`user_code:api_key`) are rotated in Secrets Manager while worker and
 * accept containers stay warm. Like the platform token, the client built at cold start follows the
 * secret within its max age, and reads it once more after a 401, so a rotation does not park the
 * legacy sources' messages as `configuration` until the containers happen to be recycled. The
 * sandbox (port 0) accepts only the new key; the value is read through the real AwsSecretStore
 * from the wire-level Secrets Manager stand-in.
 */

const USER = 'legacy-user';
const OLD_KEY = 'legacy-key-before-rotation';
const NEW_KEY = 'legacy-key-after-rotation';
const SECRET = 'connector/legacy-credentials';

let sandbox: RunningSandbox;
let fake: FakeSecretsManager;
let client: SecretsManagerClient;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, legacyUserCode: USER, legacyApiKey: NEW_KEY });
  fake = await startFakeSecretsManager({});
  client = secretsManagerClientFor(fake);
});
afterAll(async () => {
  client?.destroy();
  await fake?.close();
  await sandbox?.close();
});

/** A warm container's legacy client, wired as the worker and the accept function wire it. */
async function warmLegacyClient(store: AwsSecretStore, events: LegacyClientEvent[]) {
  const env = { LEGACY_BASE_URL: sandbox.url, LEGACY_CREDENTIALS_SECRET: SECRET };
  const legacy = await legacyClientFromEnv(env, store, {
    baseDelayMs: 1,
    maxDelayMs: 5,
    onEvent: (e) => events.push(e),
  });
  if (!legacy) throw new Error('no legacy client');
  return legacy;
}

const refusals = (events: LegacyClientEvent[]) =>
  events.filter((e) => e.type === 'request' && e.status === 401).length;

describe('rotated legacy credentials in a warm worker', () => {
  it('after a 401 the credentials are read again (skipping the cache) and the call succeeds with them', async () => {
    // Prepare: the secret rotated after the cold start, within the cache's max age.
    fake.rotate(SECRET, `${USER}:${OLD_KEY}`);
    const store = new AwsSecretStore(300, client, () => 0);
    const events: LegacyClientEvent[] = [];
    const legacy = await warmLegacyClient(store, events);
    fake.rotate(SECRET, `${USER}:${NEW_KEY}`);

    // Act
    const program = await legacy.programDetail(sandbox.seed.programs[0]!);

    // Assess
    expect(program).toBeDefined();
    expect(refusals(events)).toBe(1);
  });

  it('on the max age the new credentials are used without a 401 first', async () => {
    // Prepare
    fake.rotate(SECRET, `${USER}:${OLD_KEY}`);
    let now = 0;
    const store = new AwsSecretStore(300, client, () => now);
    const events: LegacyClientEvent[] = [];
    const legacy = await warmLegacyClient(store, events);
    fake.rotate(SECRET, `${USER}:${NEW_KEY}`);
    now += 300_000;

    // Act
    const program = await legacy.programDetail(sandbox.seed.programs[0]!);

    // Assess
    expect(program).toBeDefined();
    expect(refusals(events)).toBe(0);
  });

  it('credentials refused again after the fresh read stay a configuration failure, after one more try', async () => {
    // Prepare: the secret still holds the old key, which the platform no longer takes.
    fake.rotate(SECRET, `${USER}:${OLD_KEY}`);
    const store = new AwsSecretStore(300, client, () => 0);
    const events: LegacyClientEvent[] = [];
    const legacy = await warmLegacyClient(store, events);

    // Act
    const error = await legacy.programDetail(sandbox.seed.programs[0]!).catch((e: unknown) => e);

    // Assess
    expect(error).toMatchObject({ name: 'ConfigurationError', status: 401 });
    expect(String((error as Error).message)).not.toContain(OLD_KEY);
    expect(refusals(events)).toBe(1);
  });
});

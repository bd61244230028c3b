import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import { AffiliateClient, type AffiliateClientEvent } from '../../shared/affiliate/client.ts';
import { ConfigurationError } from '../../shared/errors.ts';
import { AwsSecretStore } from '../../shared/secrets.ts';
import {
  type FakeSecretsManager,
  secretsManagerClientFor,
  startFakeSecretsManager,
} from '../support/fake-secrets-manager.ts';

/**
 * The platform token is rotated in Secrets Manager while worker containers stay warm. A client
 * holding the old token re-reads it on the secret's max age, and once after a 401, so the rotation
 * does not park messages as `configuration`. The sandbox (port 0) accepts only the new token; the
 * token is read through the real AwsSecretStore from the wire-level Secrets Manager stand-in.
 */

const OLD_TOKEN = 'platform-token-before-rotation';
const NEW_TOKEN = 'platform-token-after-rotation';
const TOKEN_SECRET = 'connector/affiliate-token';

let sandbox: RunningSandbox;
let fake: FakeSecretsManager;
let client: SecretsManagerClient;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, token: NEW_TOKEN });
  fake = await startFakeSecretsManager({});
  client = secretsManagerClientFor(fake);
});
afterAll(async () => {
  client?.destroy();
  await fake?.close();
  await sandbox?.close();
});

/** A warm worker's client: built with the token read at cold start, re-reading it from `store`. */
async function warmClient(store: AwsSecretStore, events: AffiliateClientEvent[]) {
  return new AffiliateClient({
    baseUrl: sandbox.url,
    token: await store.get(TOKEN_SECRET),
    tokenSource: (options) => store.get(TOKEN_SECRET, options),
    baseDelayMs: 1,
    maxDelayMs: 5,
    onEvent: (e) => events.push(e),
  });
}

const refusals = (events: AffiliateClientEvent[]) =>
  events.filter((e) => e.type === 'request' && e.status === 401).length;

describe('a rotated platform token in a warm worker', () => {
  it('after a 401 the token is read again (once, skipping the cache) and the call succeeds with it', async () => {
    // Prepare: the secret rotated after the cold start, within the cache's max age.
    fake.rotate(TOKEN_SECRET, OLD_TOKEN);
    const store = new AwsSecretStore(300, client, () => 0);
    const events: AffiliateClientEvent[] = [];
    const platform = await warmClient(store, events);
    fake.rotate(TOKEN_SECRET, NEW_TOKEN);

    // Act
    const info = await platform.advertiserInfo();

    // Assess
    expect(info).toBeDefined();
    expect(refusals(events)).toBe(1);
  });

  it('on the max age the new token is used without a 401 first', async () => {
    // Prepare
    fake.rotate(TOKEN_SECRET, OLD_TOKEN);
    let now = 0;
    const store = new AwsSecretStore(300, client, () => now);
    const events: AffiliateClientEvent[] = [];
    const platform = await warmClient(store, events);
    fake.rotate(TOKEN_SECRET, NEW_TOKEN);
    now += 300_000;

    // Act
    await platform.advertiserInfo();

    // Assess
    expect(refusals(events)).toBe(0);
  });

  it('a token still refused after the re-read is a ConfigurationError, after one re-read only', async () => {
    // Prepare: nobody rotated anything; the token is simply wrong.
    fake.rotate(TOKEN_SECRET, OLD_TOKEN);
    fake.rotate(TOKEN_SECRET, OLD_TOKEN);
    const store = new AwsSecretStore(300, client, () => 0);
    const events: AffiliateClientEvent[] = [];
    const platform = await warmClient(store, events);
    const readsBefore = fake.calls.length;

    // Act
    const failure = await platform.advertiserInfo().catch((error: unknown) => error);

    // Assess
    expect(failure).toBeInstanceOf(ConfigurationError);
    expect((failure as Error).message).toMatch(/the API token was refused/);
    expect(refusals(events)).toBe(1);
    expect(fake.calls.slice(readsBefore).filter((c) => c.versionStage === 'AWSCURRENT')).toHaveLength(1);
  });
});

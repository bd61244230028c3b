import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../shared/errors.ts';
import { AwsSecretStore } from '../../shared/secrets.ts';
import {
  type FakeSecretsManager,
  secretsManagerClientFor,
  startFakeSecretsManager,
} from '../support/fake-secrets-manager.ts';

/**
 * Rotation in AWS is Secrets Manager's own: `put-secret-value` makes the new value AWSCURRENT and
 * the old one AWSPREVIOUS. The store (real SDK client, the wire-level stand-in) accepts exactly
 * those two values, each whole, and sees a rotation within its max age.
 */

const ODD = 'wc_k3y, with;semi [brackets] {braces} (parens),end';
const NEW = 'ck_rotated_new_0123456789abcdefghijklmnopqrstuv';
const OLD = 'ck_rotated_old_0123456789abcdefghijklmnopqrstuv';

let fake: FakeSecretsManager;
let client: SecretsManagerClient;

beforeAll(async () => {
  fake = await startFakeSecretsManager({
    'connector/odd': ODD,
    'connector/rotated': { AWSCURRENT: NEW, AWSPREVIOUS: OLD },
    'connector/later': OLD,
  });
  client = secretsManagerClientFor(fake);
});
afterAll(async () => {
  client?.destroy();
  await fake?.close();
});

const reads = (secretId: string) =>
  fake.calls
    .filter((c) => c.action === 'GetSecretValue' && c.secretId === secretId)
    .map((c) => c.versionStage);

describe('AwsSecretStore', () => {
  it('a secret never rotated: its one value, whole, and the missing AWSPREVIOUS is remembered too', async () => {
    // Prepare
    const store = new AwsSecretStore(300, client, () => 0);
    // Act
    const first = await store.accepted('connector/odd');
    const again = await store.accepted('connector/odd');
    // Assess
    expect(first).toEqual([ODD]);
    expect(again).toEqual([ODD]);
    expect(reads('connector/odd').sort()).toEqual(['AWSCURRENT', 'AWSPREVIOUS']);
  });

  it('a rotated secret: AWSCURRENT and AWSPREVIOUS are accepted, and get() is the current one', async () => {
    const store = new AwsSecretStore(300, client, () => 0);
    expect(await store.accepted('connector/rotated')).toEqual([NEW, OLD]);
    expect(await store.get('connector/rotated')).toBe(NEW);
  });

  it('a rotation is seen after the max age, not before; fresh reads at once', async () => {
    // Prepare
    let now = 1_000_000;
    const store = new AwsSecretStore(300, client, () => now);
    expect(await store.accepted('connector/later')).toEqual([OLD]);
    // Act
    fake.rotate('connector/later', NEW);
    const cached = await store.accepted('connector/later');
    now += 300_000;
    const expired = await store.accepted('connector/later');
    fake.rotate('connector/later', ODD);
    const fresh = await store.get('connector/later', { fresh: true });
    // Assess
    expect(cached).toEqual([OLD]);
    expect(expired).toEqual([NEW, OLD]);
    expect(fresh).toBe(ODD);
  });

  it('a missing secret is a ConfigurationError naming it, not kept in the cache', async () => {
    const store = new AwsSecretStore(300, client, () => 0);
    await expect(store.accepted('connector/gone')).rejects.toThrow(ConfigurationError);
    await expect(store.get('connector/gone')).rejects.toThrow(
      /secret connector\/gone could not be read \(ResourceNotFoundException\)/,
    );
    expect(reads('connector/gone').filter((s) => s === 'AWSCURRENT')).toHaveLength(2);
  });
});

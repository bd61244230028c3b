import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { secretsManagerClient } from './adapters/aws-clients.ts';
import { type Env, optionalNumber } from './config/env.ts';
import { ConfigurationError } from './errors.ts';
import type { SecretStore } from './ports.ts';

/** The `SecretStore` adapters: env or `.env` locally, Secrets Manager in AWS. */

/** Locally, the variable holding the value a secret had before its rotation. */
export function previousVariable(ref: string): string {
  return `${ref}_PREVIOUS`;
}

/** Local: the reference is the name of an environment variable; `<NAME>_PREVIOUS` the previous value. */
export class EnvSecretStore implements SecretStore {
  readonly #env: Env;
  constructor(env: Env) {
    this.#env = env;
  }
  async get(ref: string): Promise<string> {
    const value = this.#env[ref];
    if (value === undefined || value === '') throw new ConfigurationError(`secret ${ref} is not set`);
    return value;
  }
  async accepted(ref: string): Promise<readonly string[]> {
    const previous = this.#env[previousVariable(ref)];
    return [await this.get(ref), ...(previous ? [previous] : [])];
  }
}

/** Secrets Manager's own labels: `put-secret-value` moves AWSCURRENT to the new version, AWSPREVIOUS to the old. */
const CURRENT = 'AWSCURRENT';
const PREVIOUS = 'AWSPREVIOUS';

interface Versions {
  readonly current: string;
  readonly previous: string | undefined;
}

/**
 * AWS: Secrets Manager, each reference's AWSCURRENT and AWSPREVIOUS versions cached together for
 * `maxAgeSeconds`, so a warm Lambda does not call Secrets Manager per request, yet a rotated
 * secret is picked up within that bound. (Powertools' SecretsProvider keys its cache by name only,
 * so two version stages would share one entry, and it caches no "there is no previous version".)
 * `client` defaults to one with the Lambda functions' time budget.
 */
export class AwsSecretStore implements SecretStore {
  readonly #maxAgeMs: number;
  readonly #client: SecretsManagerClient;
  readonly #now: () => number;
  readonly #cache = new Map<string, { readonly until: number; readonly versions: Promise<Versions> }>();

  constructor(
    maxAgeSeconds: number,
    client: SecretsManagerClient = secretsManagerClient(),
    now: () => number = Date.now,
  ) {
    this.#maxAgeMs = maxAgeSeconds * 1000;
    this.#client = client;
    this.#now = now;
  }

  async get(ref: string, options: { readonly fresh?: boolean } = {}): Promise<string> {
    return (await this.#versions(ref, options.fresh ?? false)).current;
  }

  async accepted(ref: string): Promise<readonly string[]> {
    const { current, previous } = await this.#versions(ref, false);
    return previous === undefined ? [current] : [current, previous];
  }

  #versions(ref: string, fresh: boolean): Promise<Versions> {
    const cached = this.#cache.get(ref);
    if (!fresh && cached && this.#now() < cached.until) return cached.versions;
    const versions = Promise.all([this.#read(ref, CURRENT), this.#read(ref, PREVIOUS)]).then(
      ([current, previous]) => {
        if (current === undefined) throw new ConfigurationError(`secret ${ref} has no ${CURRENT} version`);
        return { current, previous };
      },
    );
    this.#cache.set(ref, { until: this.#now() + this.#maxAgeMs, versions });
    // A failed read is not kept: the next request tries again.
    versions.catch(() => {
      if (this.#cache.get(ref)?.versions === versions) this.#cache.delete(ref);
    });
    return versions;
  }

  async #read(ref: string, stage: string): Promise<string | undefined> {
    let value: string | undefined;
    try {
      const out = await this.#client.send(new GetSecretValueCommand({ SecretId: ref, VersionStage: stage }));
      value = out.SecretString;
    } catch (error) {
      // A secret never rotated has no AWSPREVIOUS version: Secrets Manager says ResourceNotFound.
      if (stage === PREVIOUS && (error as Error).name === 'ResourceNotFoundException') return undefined;
      // The SDK's message may name the ARN but never holds the value; keep only the error name.
      throw new ConfigurationError(`secret ${ref} could not be read (${(error as Error).name})`, {
        cause: error,
      });
    }
    if (value === undefined || value === '') {
      if (stage === PREVIOUS) return undefined;
      throw new ConfigurationError(`secret ${ref} is empty or binary`);
    }
    return value;
  }
}

/** The Lambda functions' store: Secrets Manager, cached for SECRETS_MAX_AGE_SECONDS (default 300). */
export function awsSecretStore(env: Env): AwsSecretStore {
  return new AwsSecretStore(optionalNumber(env, 'SECRETS_MAX_AGE_SECONDS', 300));
}

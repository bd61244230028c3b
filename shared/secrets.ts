import { getSecret } from '@aws-lambda-powertools/parameters/secrets';
import type { Env } from './config/env.ts';
import { ConfigurationError } from './errors.ts';

/** Where secret values come from: Secrets Manager in AWS, env or `.env` locally. */
export interface SecretStore {
  /** Resolves a reference (a secret name or ARN in AWS, an env variable name locally) to its value. */
  get(ref: string): Promise<string>;
}

/** Local: the reference is the name of an environment variable. */
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
}

/**
 * AWS: Secrets Manager through Powertools Parameters, cached for `maxAgeSeconds` so a warm Lambda
 * does not call Secrets Manager per request, yet a rotated secret is picked up within that bound.
 */
export class AwsSecretStore implements SecretStore {
  readonly #maxAge: number;
  constructor(maxAgeSeconds: number) {
    this.#maxAge = maxAgeSeconds;
  }
  async get(ref: string): Promise<string> {
    let value: unknown;
    try {
      value = await getSecret(ref, { maxAge: this.#maxAge });
    } catch (error) {
      // The SDK's message may name the ARN but never holds the value; keep only the error name.
      throw new ConfigurationError(`secret ${ref} could not be read (${(error as Error).name})`, {
        cause: error,
      });
    }
    if (typeof value !== 'string' || value === '')
      throw new ConfigurationError(`secret ${ref} is empty or binary`);
    return value;
  }
}

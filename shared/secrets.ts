import { SecretsProvider } from '@aws-lambda-powertools/parameters/secrets';
import type { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { secretsManagerClient } from './adapters/aws-clients.ts';
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
 * `client` defaults to one with the Lambda functions' time budget (Powertools' own default client has
 * no request timeout).
 */
export class AwsSecretStore implements SecretStore {
  readonly #maxAge: number;
  readonly #provider: SecretsProvider;
  constructor(maxAgeSeconds: number, client: SecretsManagerClient = secretsManagerClient()) {
    this.#maxAge = maxAgeSeconds;
    this.#provider = new SecretsProvider({ awsSdkV3Client: client });
  }
  async get(ref: string): Promise<string> {
    let value: unknown;
    try {
      value = await this.#provider.get(ref, { maxAge: this.#maxAge });
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

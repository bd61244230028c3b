import { type Env, optionalNumber } from '../config/env.ts';
import type { SourceConfig } from '../config/sources.ts';
import { ConfigurationError } from '../errors.ts';
import { LegacyBackend } from '../legacy/backend.ts';
import { LegacyClient, type LegacyClientOptions, parseLegacyCredentials } from '../legacy/client.ts';
import type { ConversionBackend, SecretStore } from '../ports.ts';

export interface BackendsDeps {
  /** The current API's backend (`CurrentApiBackend`), used by sources with `backend: 'current'`. */
  readonly current: ConversionBackend;
  /**
   * The legacy 2.0 client, when the deployment has legacy credentials (`LEGACY_BASE_URL` and
   * `LEGACY_CREDENTIALS_SECRET`). Without it a `backend: 'legacy'` source fails with a
   * `ConfigurationError` that names the missing settings.
   */
  readonly legacy?: LegacyClient;
  /** Lets tests wrap each backend (to kill a worker mid-flight). */
  readonly wrap?: (backend: ConversionBackend, source: SourceConfig) => ConversionBackend;
}

/**
 * The worker's `backendFor`: the source's `backend` setting picks the current API or the legacy
 * 2.0 interface. One backend per source, built on first use.
 */
export function backendFor(deps: BackendsDeps): (source: SourceConfig) => ConversionBackend {
  const built = new Map<string, ConversionBackend>();
  const wrap = deps.wrap ?? ((backend: ConversionBackend) => backend);
  return (source) => {
    const known = built.get(source.id);
    if (known) return known;
    let backend: ConversionBackend;
    if (source.backend === 'legacy') {
      if (!deps.legacy) {
        throw new ConfigurationError(
          `source ${source.id} uses the legacy backend, but LEGACY_BASE_URL and LEGACY_CREDENTIALS_SECRET are not configured`,
        );
      }
      backend = new LegacyBackend(deps.legacy);
    } else {
      backend = deps.current;
    }
    const wrapped = wrap(backend, source);
    built.set(source.id, wrapped);
    return wrapped;
  };
}

/**
 * The legacy 2.0 client from `LEGACY_BASE_URL` and `LEGACY_CREDENTIALS_SECRET` (a secret reference
 * whose value is `user_code:api_key`), with `LEGACY_RATE_PER_SECOND` (default 100). Undefined when
 * neither is set (no legacy source to serve); one without the other is a configuration error.
 */
export async function legacyClientFromEnv(
  env: Env,
  secrets: SecretStore,
  options: Partial<Omit<LegacyClientOptions, 'baseUrl' | 'userCode' | 'apiKey'>> = {},
): Promise<LegacyClient | undefined> {
  const baseUrl = env['LEGACY_BASE_URL']?.trim() ?? '';
  const secretRef = env['LEGACY_CREDENTIALS_SECRET']?.trim() ?? '';
  // The credentials secret turns the legacy interface on; the stack always sets the base URL.
  if (secretRef === '') return undefined;
  if (baseUrl === '') {
    throw new ConfigurationError(
      'missing required setting LEGACY_BASE_URL (the legacy 2.0 interface needs it)',
    );
  }
  const credentials = parseLegacyCredentials(await secrets.get(secretRef), `secret ${secretRef}`);
  return new LegacyClient({
    ratePerSecond: optionalNumber(env, 'LEGACY_RATE_PER_SECOND', 100),
    ...options,
    baseUrl,
    ...credentials,
  });
}

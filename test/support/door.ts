import { SourceConfig } from '../../shared/config/sources.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import type { SignedPlatform } from './webhooks.ts';

/** The platforms a source may be of, one source of each at the door. */
export const DOOR_PLATFORMS = ['shopify', 'woocommerce', 'stripe', 'generic'] as const;

/**
 * One source per platform, as the local stack configures them (id = platform, secret in
 * `<PLATFORM>_SECRET`), and the secret store that holds `secrets` for them: what a test of the
 * webhook door hands `ingestWebhook` or the handler.
 */
export function sourcePerPlatform(secrets: Readonly<Record<SignedPlatform, string>>): {
  readonly sources: Map<string, SourceConfig>;
  readonly secretStore: EnvSecretStore;
} {
  const sources = new Map(
    DOOR_PLATFORMS.map((platform) => [
      platform as string,
      SourceConfig.parse({
        id: platform,
        platform,
        program: '5ad000000000000000000101',
        rule: '5ad000000000000000000201',
        secretRef: `${platform.toUpperCase()}_SECRET`,
      }),
    ]),
  );
  const secretStore = new EnvSecretStore(
    Object.fromEntries(DOOR_PLATFORMS.map((p) => [`${p.toUpperCase()}_SECRET`, secrets[p]])),
  );
  return { sources, secretStore };
}

import { SourceConfig } from '../../shared/config/sources.ts';
import { SOURCE_PLATFORMS } from '../../shared/domain/platforms.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import type { SignedPlatform } from './webhooks.ts';

/** The platforms a source may be of, one source of each at the door. */
export const DOOR_PLATFORMS = SOURCE_PLATFORMS;

/**
 * One source per platform, as the local stack configures them (id = platform, secret in
 * `<PLATFORM>_SECRET`), and the secret store that holds `secrets` for them (and `previous`, while
 * rotating, in `<PLATFORM>_SECRET_PREVIOUS`): what a test of the webhook door hands `ingestWebhook`
 * or the handler.
 */
export function sourcePerPlatform(
  secrets: Readonly<Record<SignedPlatform, string>>,
  previous?: Readonly<Record<SignedPlatform, string>>,
): {
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
    Object.fromEntries(
      DOOR_PLATFORMS.flatMap((p) => [
        [`${p.toUpperCase()}_SECRET`, secrets[p]],
        ...(previous ? [[`${p.toUpperCase()}_SECRET_PREVIOUS`, previous[p]]] : []),
      ]),
    ),
  );
  return { sources, secretStore };
}

import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { SourceConfig } from '../../shared/config/sources.ts';
import { SOURCE_PLATFORMS } from '../../shared/domain/platforms.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import type { SignedPlatform } from './webhooks.ts';

/** The platforms a source may be of, one source of each at the door. */
export const DOOR_PLATFORMS = SOURCE_PLATFORMS;

/**
 * A webhook secret per platform for a test of the door, `tag` telling one test file's apart:
 * `<tag>-shopify-secret`, and Stripe's written as Stripe writes them, `whsec_<tag>_stripe_secret`.
 */
export function doorSecrets(tag: string): Record<SignedPlatform, string> {
  return Object.fromEntries(
    DOOR_PLATFORMS.map((p) => [p, p === 'stripe' ? `whsec_${tag}_stripe_secret` : `${tag}-${p}-secret`]),
  ) as Record<SignedPlatform, string>;
}

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

/**
 * An API Gateway (payload 2.0) event as the deployed route of `source` (`POST /webhooks/<source>`)
 * delivers it: the source in the route key, the body base64-encoded.
 */
export function webhookEvent(
  source: string,
  headers: Record<string, string>,
  body: Buffer,
): APIGatewayProxyEventV2 {
  return {
    version: '2.0',
    routeKey: `POST /webhooks/${source}`,
    rawPath: `/webhooks/${source}`,
    rawQueryString: '',
    headers,
    isBase64Encoded: true,
    body: body.toString('base64'),
    requestContext: {} as APIGatewayProxyEventV2['requestContext'],
  };
}

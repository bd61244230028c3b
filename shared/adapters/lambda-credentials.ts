import { type FromEnvInit, fromEnv } from '@aws-sdk/credential-provider-env';

/**
 * What the Lambda bundles load in place of `@aws-sdk/credential-provider-node`, the SDK clients'
 * default credential chain (CONNECTOR_BUNDLING aliases it here; the import is static in every
 * client's runtime config, so only the bundler can leave it out). Lambda puts the execution role's
 * credentials in the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN),
 * the first place the full chain looks; the rest of it (profiles, SSO, STS web identity, credential
 * processes, container and instance metadata) can never answer there, yet it was about 130 KiB of
 * each bundle with the STS and SSO clients it carries. Without those variables a call fails at
 * once, naming them, instead of probing instance metadata. The CLI and the local stack run from
 * source and keep the full chain (operators use profiles and SSO).
 */
export function defaultProvider(init: FromEnvInit = {}): ReturnType<typeof fromEnv> {
  return fromEnv(init);
}

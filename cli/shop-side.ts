import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import type { SourceConfig } from '../shared/config/sources.ts';
import { hasShopApi } from '../shared/domain/platforms.ts';
import { ConfigurationError } from '../shared/errors.ts';
import { subscriptionTopics } from '../shared/platforms/registry.ts';
import type { SecretStore } from '../shared/ports.ts';
import { type ShopCredentials, shopCredentials } from '../shared/shops/credentials.ts';
import type { ShopHttpOptions } from '../shared/shops/http.ts';
import { ShopifyClient } from '../shared/shops/shopify.ts';
import { StripeClient } from '../shared/shops/stripe.ts';
import { WooCommerceClient } from '../shared/shops/woocommerce.ts';
import type { CheckResult } from './check-result.ts';
import { awsCall, type CliContext } from './context.ts';
import { CliError, explain, printable, unreachableHint } from './io.ts';
import {
  describeProblem,
  diagnose,
  type SubscriptionApi,
  type SubscriptionProblem,
  shopifySubscriptions,
  stripeSubscriptions,
  type WantedSubscriptions,
  wooCommerceSubscriptions,
} from './shops/subscriptions.ts';

/**
 * The shop side of a source for `connector doctor` and `connector subscribe`: where the shop must
 * deliver (`<connector URL>/webhooks/<source id>`), what it must send (the adapter's topics), and
 * the shop's subscription API over the source's `shopApi` credentials.
 */

/** The sources whose shop API the CLI can read. */
export function shopSources(ctx: CliContext): SourceConfig[] {
  return ctx.sources().filter((s) => s.shopApi !== undefined && hasShopApi(s.platform));
}

/**
 * `<connector URL>/webhooks/<source id>`, or undefined when the connector URL is not known.
 *
 * A shop told to deliver there sends it every order, signed with the source's secret: as good as the
 * secret. So a shop reached with credentials the user holds (environment, Secrets Manager) is pointed
 * only at a connector URL the user gave, never at one read from the state file, as `send` and
 * `refund` send no such credential there; the state file's URL goes with the state file's own (local)
 * credentials.
 *
 * @throws CliError naming the source, its credentials' origin and how to give the URL
 */
export function webhookAddress(ctx: CliContext, source: SourceConfig): string | undefined {
  const ref = source.shopApi?.credentialsRef;
  const origin = ref === undefined ? undefined : secretOrigin(ctx, ref);
  if (ref !== undefined && origin !== undefined) {
    ctx.checkDestination(
      'connectorUrl',
      `the shop of source ${source.id} (${ref} from ${ORIGIN_TEXT[origin]})`,
      origin,
      'is not told to deliver to',
    );
  }
  const base = ctx.get('connectorUrl');
  return base === undefined
    ? undefined
    : `${base.replace(/\/+$/, '')}/webhooks/${encodeURIComponent(source.id)}`;
}

/**
 * Secrets by reference, as the CLI may read them. Sources from the local state file take their
 * credentials from that file only (its URLs go with its own, public, credentials); sources from
 * SOURCES take them from the environment, else the state file, else (against AWS) Secrets Manager.
 */
export function cliSecretStore(ctx: CliContext): SecretStore {
  const read = async (ref: string): Promise<string> => {
    const found = locateSecret(ctx, ref);
    if (found === undefined) {
      throw new ConfigurationError(
        `secret ${ref} is not set: set ${ref} in the environment (or .env) of npm start and of this command`,
      );
    }
    if (found.value !== undefined) return found.value;
    let text: string | undefined;
    try {
      const out = await ctx.secretsManager().send(new GetSecretValueCommand({ SecretId: ref }), awsCall());
      text = out.SecretString;
    } catch (error) {
      throw new ConfigurationError(
        `secret ${ref} could not be read (${explain(error)}); this identity needs secretsmanager:GetSecretValue on it`,
      );
    }
    if (!text) throw new ConfigurationError(`secret ${ref} is empty or binary`);
    return text;
  };
  return { get: read, accepted: async (ref) => [await read(ref)] };
}

/** Whether the sources are the user's (SOURCES), rather than the state file's. */
function sourcesFromEnv(ctx: CliContext): boolean {
  return (ctx.io.env['SOURCES'] ?? '').trim() !== '';
}

export type SecretOrigin = 'env' | 'file' | 'secretsManager';
const ORIGIN_TEXT: Record<SecretOrigin, string> = {
  env: 'the environment',
  file: 'the state file',
  secretsManager: 'Secrets Manager',
};

/**
 * Where `cliSecretStore` reads `ref` from, or undefined when from nowhere (the read then fails,
 * naming it).
 */
export function secretOrigin(ctx: CliContext, ref: string): SecretOrigin | undefined {
  return locateSecret(ctx, ref)?.origin;
}

/**
 * Where `ref` is read from, with its value when the CLI holds it (Secrets Manager is asked only on
 * the read): state-file sources from the file only, SOURCES' from the environment, else the file,
 * else (against AWS) Secrets Manager.
 */
function locateSecret(ctx: CliContext, ref: string): { origin: SecretOrigin; value?: string } | undefined {
  if (!sourcesFromEnv(ctx)) {
    const value = ctx.fileSecret(ref);
    return value === undefined ? undefined : { origin: 'file', value };
  }
  const value = ctx.secret(ref);
  if (value !== undefined) return { origin: (ctx.io.env[ref] ?? '').trim() !== '' ? 'env' : 'file', value };
  return ctx.isLocal ? undefined : { origin: 'secretsManager' };
}

/** Every request bounded; a CLI waits a few seconds, not minutes, for a shop that is down. */
const READS: ShopHttpOptions = { timeoutMs: 10_000, maxAttempts: 3, maxRetryAfterMs: 10_000 };
// A create is not idempotent: one whose answer was lost is not sent again blindly. A rerun of
// subscribe lists first, so it creates only what is still missing.
const WRITES: ShopHttpOptions = { ...READS, maxAttempts: 1 };

function subscriptionApi(credentials: ShopCredentials): SubscriptionApi {
  switch (credentials.platform) {
    case 'shopify':
      return shopifySubscriptions(
        new ShopifyClient(credentials, READS),
        new ShopifyClient(credentials, WRITES),
      );
    case 'woocommerce':
      return wooCommerceSubscriptions(
        new WooCommerceClient(credentials, READS),
        new WooCommerceClient(credentials, WRITES),
      );
    case 'stripe':
      return stripeSubscriptions(new StripeClient(credentials, READS), new StripeClient(credentials, WRITES));
  }
}

export interface ShopSide {
  readonly wanted: WantedSubscriptions;
  readonly api: SubscriptionApi;
}

/**
 * The wanted subscriptions and the shop's API of one source with `shopApi`.
 *
 * @throws ConfigurationError naming the missing setting or the credentials' problem (never a value)
 */
export async function shopSide(ctx: CliContext, source: SourceConfig, address: string): Promise<ShopSide> {
  const credentials = await shopCredentials(cliSecretStore(ctx), source);
  return {
    wanted: { platform: credentials.platform, address, topics: subscriptionTopics(source) },
    api: subscriptionApi(credentials),
  };
}

/**
 * The fix when the shop's API failed. The state file's sources (`npm start`'s) read the sandbox's
 * shop fakes, served by the local stack: nothing answering there means the stack is not running.
 */
function shopFix(ctx: CliContext, source: SourceConfig, error: unknown): string {
  if (!sourcesFromEnv(ctx) && unreachableHint(error) !== undefined) {
    return `the shop API of source ${source.id} is the local stack's shop fakes: is the local stack running? Start it with npm start`;
  }
  return `check shopApi.url of source ${source.id}, and that the shop is up`;
}

/** `connector subscribe --source <id>`: the fix hint of every shop-side problem. */
export function subscribeHint(source: SourceConfig): string {
  return `connector subscribe --source ${source.id} (add --dry-run to see what it would change)`;
}

/**
 * `connector doctor`'s shop side: for each source with `shopApi`, a failed check per problem of
 * its webhook subscriptions (missing topic, wrong address, switched off), else one passed check.
 */
export async function shopWebhookChecks(ctx: CliContext): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  for (const source of shopSources(ctx)) {
    const name = `shop webhooks ${source.id}`;
    let address: string | undefined;
    try {
      address = webhookAddress(ctx, source);
    } catch (error) {
      if (!(error instanceof CliError)) throw error;
      results.push({
        name,
        status: 'fail',
        detail: printable(`not checked: ${error.message}`),
        hint: "pass --url or set CONNECTOR_URL to the connector's public URL",
      });
      continue;
    }
    if (address === undefined) {
      results.push({
        name,
        status: 'fail',
        detail: 'not checked: the connector URL is not known',
        hint: "pass --url or set CONNECTOR_URL to the connector's public URL",
      });
      continue;
    }
    let side: ShopSide;
    let problems: SubscriptionProblem[];
    try {
      side = await shopSide(ctx, source, address);
      problems = diagnose(side.wanted, await side.api.list());
    } catch (error) {
      const credentials = error instanceof ConfigurationError;
      results.push({
        name,
        status: 'fail',
        detail: printable(credentials ? error.message : `${source.shopApi?.url ?? ''}: ${explain(error)}`),
        hint: credentials
          ? `set ${source.shopApi?.credentialsRef ?? 'the shopApi credentials'} (docs/backfill.md): the key needs read access to webhooks`
          : shopFix(ctx, source, error),
      });
      continue;
    }
    if (problems.length === 0) {
      results.push({
        name,
        status: 'pass',
        detail: `${side.wanted.topics.join(', ')} → ${address}, active`,
      });
      continue;
    }
    for (const problem of problems) {
      const adminOnly =
        source.platform === 'shopify' && problem.kind === 'missing'
          ? '; a subscription made in the Shopify admin is not visible to the API'
          : '';
      results.push({
        name,
        status: 'fail',
        // Addresses and ids are the shop's text: no terminal escapes reach the operator's screen.
        detail: printable(describeProblem(problem, side.wanted)),
        hint: `${subscribeHint(source)}${adminOnly}`,
      });
    }
  }
  return results;
}

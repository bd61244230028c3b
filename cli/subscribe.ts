import type { Command } from 'commander';
import type { SourceConfig } from '../shared/config/sources.ts';
import { ConfigurationError } from '../shared/errors.ts';
import { type CliContext, missingMessage, settingOptions, withContext } from './context.ts';
import { CliError, type CliIo, explain, printable, writeLine } from './io.ts';
import { cliSecretStore, type ShopSide, secretOrigin, shopSide, webhookAddress } from './shop-side.ts';
import {
  describeFix,
  describeProblem,
  diagnose,
  planFixes,
  type SubscriptionFix,
} from './shops/subscriptions.ts';

interface SubscribeOptions {
  readonly source: string;
  readonly dryRun?: boolean;
  readonly showSecret?: boolean;
}

function sourceOf(ctx: CliContext, id: string): SourceConfig {
  const sources = ctx.sources();
  const source = sources.find((s) => s.id === id);
  if (!source) {
    const known = sources.map((s) => s.id).join(', ') || 'none configured';
    throw new CliError(`--source: unknown source "${id}" (known: ${known})`);
  }
  return source;
}

/** What WooCommerce is to sign new webhooks with: the source's own webhook secret. */
async function signingSecret(ctx: CliContext, source: SourceConfig): Promise<string> {
  // The shop signs every delivery to the connector URL with it: as good as sending it there.
  const origin = secretOrigin(ctx, source.secretRef);
  if (origin !== undefined) ctx.checkDestination('connectorUrl', source.secretRef, origin);
  try {
    return await cliSecretStore(ctx).get(source.secretRef);
  } catch (error) {
    throw new CliError(`a new WooCommerce webhook must sign with the source's secret: ${explain(error)}`);
  }
}

async function subscribe(ctx: CliContext, options: SubscribeOptions): Promise<void> {
  // What the shop answered (ids, addresses) is printed: never its terminal escapes.
  const out = (line: string) => writeLine(ctx.io.stdout, printable(line));
  const source = sourceOf(ctx, options.source);
  const address = webhookAddress(ctx, source);
  if (address === undefined) throw new CliError(missingMessage('connectorUrl'));
  let side: ShopSide;
  try {
    side = await shopSide(ctx, source, address);
  } catch (error) {
    if (error instanceof ConfigurationError) throw new CliError(error.message);
    throw error;
  }
  const { wanted, api } = side;
  const fixes = planFixes(wanted, await api.list());
  if (fixes.length === 0) {
    out(`${source.id}: nothing to do (${wanted.topics.join(', ')} → ${address}, active)`);
    return;
  }
  const dryRun = options.dryRun === true;
  const createsEndpoint = wanted.platform === 'stripe' && fixes.some((f) => f.kind === 'create');
  if (createsEndpoint && !dryRun && options.showSecret !== true) {
    throw new CliError(
      `a new Stripe endpoint's signing secret is shown once, when it is created: pass --show-secret to see it and store it under ${source.secretRef} (or --dry-run to see the plan)`,
    );
  }
  const secret =
    !dryRun && wanted.platform === 'woocommerce' && fixes.some((f) => f.kind === 'create')
      ? await signingSecret(ctx, source)
      : undefined;
  out(`${source.id} (${source.platform}): webhooks to ${address}`);
  for (const fix of fixes) {
    if (!dryRun) {
      const result = await applyOne(side, fix, secret);
      if (result.signingSecret !== undefined) {
        out(`  ${describeFix(fix, wanted, false)}: ${result.ids.join(', ')}`);
        out(`  signing secret: ${result.signingSecret}`);
        out(
          `  store it under ${source.secretRef} (Secrets Manager: aws secretsmanager put-secret-value --secret-id ${source.secretRef} --secret-string …; locally: ${source.secretRef}=… in .env, then restart npm start): until then its deliveries are refused`,
        );
        continue;
      }
    }
    out(`  ${describeFix(fix, wanted, dryRun)}`);
  }
  if (dryRun) {
    out('dry run: nothing changed');
    return;
  }
  // The shop's own word that nothing is left: a rerun would find nothing to do.
  const left = diagnose(wanted, await api.list());
  if (left.length > 0) {
    for (const problem of left) out(`  still: ${describeProblem(problem, wanted)}`);
    throw new CliError('', 1);
  }
  out(`${source.id}: every topic subscribed and active`);
}

async function applyOne(side: ShopSide, fix: SubscriptionFix, secret: string | undefined) {
  try {
    return await side.api.apply(fix, side.wanted, secret);
  } catch (error) {
    const what = describeFix(fix, side.wanted, true).replace(/^would /, '');
    // A read-only key lists but cannot write: the usual cause of a 401/403 here.
    const scope =
      error instanceof ConfigurationError ? ' (subscribe needs a key with write access to webhooks)' : '';
    throw new CliError(
      `${what} failed: ${printable(explain(error))}${scope}. Nothing is undone; connector subscribe lists first, so running it again does only what is left`,
      1,
    );
  }
}

/** `connector subscribe`: creates, re-enables or completes the shop's webhook subscriptions of a source. */
export function registerSubscribe(program: Command, io: CliIo): void {
  const command = program
    .command('subscribe')
    .summary("create or re-enable the shop's webhook subscriptions of a source")
    .description(
      "Puts right what `connector doctor` finds on the shop's side of a source with shopApi: creates the " +
        'missing subscriptions (Shopify, WooCommerce: one per topic; Stripe: one endpoint), re-enables a ' +
        'disabled WooCommerce webhook or Stripe endpoint, adds missing events to the Stripe endpoint. It ' +
        "never deletes or repoints anyone else's subscription, and a second run does nothing. The shop key " +
        'needs write access to webhooks (docs/backfill.md).',
    )
    .requiredOption('--source <id>', 'the source whose shop to subscribe')
    .option('--dry-run', 'print what it would change, change nothing')
    .option('--show-secret', "print a new Stripe endpoint's signing secret (Stripe shows it only once)");
  settingOptions(command, ['connectorUrl', 'region']);
  command
    .addHelpText(
      'after',
      `
Examples:
  $ npx connector subscribe --source woocommerce --dry-run
  $ npx connector subscribe --source shopify
  $ CONNECTOR_URL=https://abc.execute-api.eu-west-1.amazonaws.com SOURCES="$(jq -c .sources connector.config.json)" \\
    npx connector subscribe --source stripe --show-secret`,
    )
    .action(async (options: SubscribeOptions) => {
      await withContext(io, options, (ctx) => subscribe(ctx, options));
    });
}

import { readFileSync } from 'node:fs';
import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import type { Command } from 'commander';
import { SqsEventQueue } from '../shared/adapters/sqs.ts';
import { type BackfillSummary, backfill } from '../shared/backfill/backfill.ts';
import { type Delivery, genericDeliveries, readShop } from '../shared/backfill/deliveries.ts';
import type { SourceConfig } from '../shared/config/sources.ts';
import type { SourcePlatform } from '../shared/domain/platforms.ts';
import { ConfigurationError, describeError, isConnectorError } from '../shared/errors.ts';
import { adapterFor } from '../shared/platforms/registry.ts';
import type { EventQueue, SecretStore } from '../shared/ports.ts';
import { shopCredentials } from '../shared/shops/credentials.ts';
import { awsCall, type CliContext, settingOptions, withContext } from './context.ts';
import { CliError, type CliIo, cell, formatTable, nowOf, terminalJson, writeLine } from './io.ts';
import { rowProgress } from './progress.ts';
import { periodBound } from './reconcile.ts';

interface BackfillFlags {
  source?: string;
  from?: string;
  to?: string;
  file?: string;
  dryRun?: boolean;
  json?: boolean;
}

/**
 * The shop API credentials by their `credentialsRef`: env, then the local state file (`npm start`
 * writes the local ones), else Secrets Manager. A credential from the environment or Secrets Manager
 * is not sent to a shop URL that came from the state file (a file anyone may have left there).
 */
class CliShopSecrets implements SecretStore {
  readonly #ctx: CliContext;
  readonly #sourcesFromFile: boolean;

  constructor(ctx: CliContext) {
    this.#ctx = ctx;
    this.#sourcesFromFile = !ctx.io.env['SOURCES']?.trim();
  }

  async get(ref: string): Promise<string> {
    const fromEnv = this.#ctx.io.env[ref]?.trim();
    const value = this.#ctx.secret(ref);
    if (value !== undefined) {
      if (fromEnv && this.#sourcesFromFile) this.#refuse(ref, 'the environment');
      return value;
    }
    if (this.#sourcesFromFile && this.#ctx.stateFile() !== undefined) this.#refuse(ref, 'Secrets Manager');
    try {
      const out = await this.#ctx
        .secretsManager()
        .send(new GetSecretValueCommand({ SecretId: ref }), awsCall());
      if (!out.SecretString) throw new ConfigurationError(`secret ${ref} is empty or binary`);
      return out.SecretString;
    } catch (error) {
      if (isConnectorError(error)) throw error;
      throw new ConfigurationError(
        `shop API credentials ${ref}: not set in the environment, and the secret could not be read (${(error as Error).name}); this identity needs secretsmanager:GetSecretValue on it`,
      );
    }
  }

  async accepted(ref: string): Promise<readonly string[]> {
    return [await this.get(ref)];
  }

  #refuse(ref: string, origin: string): never {
    throw new CliError(
      `${ref} from ${origin} is not sent to a shop URL read from ${this.#ctx.stateFile()} (a file anyone may have left there): set SOURCES`,
    );
  }
}

/**
 * Where backfill reads a platform's changes: its shop API over a period, or a file of Generic
 * webhook bodies. A record, so a new platform must say.
 */
const READS_FROM: Readonly<Record<SourcePlatform, 'shop API' | 'file'>> = {
  shopify: 'shop API',
  woocommerce: 'shop API',
  stripe: 'shop API',
  generic: 'file',
};

function sourceOf(ctx: CliContext, id: string | undefined): SourceConfig {
  const sources = ctx.sources();
  const known = sources.map((s) => s.id).join(', ') || 'none configured';
  if (!id) throw new CliError(`--source: required (known: ${known})`);
  const source = sources.find((s) => s.id === id);
  if (!source) throw new CliError(`--source: unknown source "${cell(id, 64)}" (known: ${known})`);
  return source;
}

function fileDeliveries(path: string): Iterable<Delivery> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new CliError(
      `--file: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`,
    );
  }
  return genericDeliveries(text.split(/\r?\n/));
}

/** The summary: one line per outcome, then why each skipped change was skipped. */
export function summaryText(summary: BackfillSummary, period: string): string {
  const rows = [
    ['found', String(summary.found)],
    ['already applied', String(summary.alreadyApplied)],
    [summary.dryRun ? 'to queue' : 'queued', String(summary.queued)],
    ['skipped', String(summary.skipped.length)],
  ];
  const lines = [
    `backfill of source ${summary.source}, ${period}${summary.dryRun ? ' (dry run: nothing queued)' : ''}`,
    ...summary.notices.map((n) => `! ${n}`),
    formatTable(['', 'CHANGES'], rows),
  ];
  if (summary.skipped.length > 0) {
    const byReason = new Map<string, string[]>();
    for (const s of summary.skipped) byReason.set(s.reason, [...(byReason.get(s.reason) ?? []), s.label]);
    lines.push(
      '',
      formatTable(
        ['SKIPPED', 'WHY'],
        [...byReason].map(([reason, labels]) => [
          `${labels.length} (${cell(labels.slice(0, 3).join(', '), 50)}${labels.length > 3 ? ', …' : ''})`,
          cell(reason, 100),
        ]),
      ),
    );
  }
  return lines.join('\n');
}

/** `connector backfill`: the changes of a period read from the shop's API, queued as their webhooks would have been. */
export function registerBackfill(program: Command, io: CliIo): void {
  const command = program
    .command('backfill')
    .summary("queue what the shop's webhooks missed in a period, from the shop's own API")
    .description(
      "Reads the orders, refunds and cancellations of a period from the source's shop API (or a file of " +
        'Generic webhook bodies), maps each as its webhook would have been, and queues what the ledger ' +
        'does not already hold: what was applied is a no-op, the rest becomes exactly one change each.',
    )
    .requiredOption('--source <id>', 'the source to catch up (its shopApi: docs/backfill.md)')
    .option('--from <time>', 'start of the period: 2026-05-01, an ISO timestamp, or 48h/7d back from now')
    .option('--to <time>', 'end of the period (a date counts to its end); default: now')
    .option('--file <orders.jsonl>', 'Generic sources: one webhook body (JSON) per line')
    .option('--dry-run', 'read and tell what would be queued; queue nothing')
    .option('--json', 'print the summary as JSON');
  settingOptions(command, ['queueUrl', 'sqsEndpoint', 'ledgerTable', 'dynamoEndpoint', 'region']);
  command
    .addHelpText(
      'after',
      `
What is read: Shopify Admin orders (any status, with their refunds) by updated_at; WooCommerce REST
v3 orders by modification time, with their refunds; Stripe events of the types the connector maps
(only the last 30 days: Stripe keeps no older events); Generic: --file.

Examples:
  $ npx connector backfill --source shopify --from 48h --dry-run
  $ npx connector backfill --source woocommerce --from 2026-05-01 --to 2026-05-02
  $ npx connector backfill --source generic --file orders.jsonl

Exit codes: 0 done (skipped changes included), 1 the shop or the queue failed, 2 a wrong option or setting.`,
    )
    .action(async (flags: BackfillFlags) => {
      await withContext(io, flags, async (ctx) => {
        const now = nowOf(io);
        const source = sourceOf(ctx, flags.source);
        const readsFile = READS_FROM[source.platform] === 'file';
        if (readsFile && flags.file === undefined) {
          throw new CliError(`--file: required for the generic source ${source.id} (it has no API to read)`);
        }
        if (!readsFile && flags.file !== undefined) {
          throw new CliError(`--file: only for generic sources; ${source.id} is read from its shop API`);
        }
        if (!readsFile && flags.from === undefined) throw new CliError('--from: required');
        const from = flags.from === undefined ? now : periodBound(flags.from, '--from', now, false);
        const to = flags.to === undefined ? now : periodBound(flags.to, '--to', now, true);
        if (from.getTime() > to.getTime()) throw new CliError('--from: must not be after --to');

        let read: { notices: readonly string[]; deliveries: AsyncIterable<Delivery> | Iterable<Delivery> };
        if (flags.file !== undefined) read = { notices: [], deliveries: fileDeliveries(flags.file) };
        else {
          const credentials = await shopCredentials(new CliShopSecrets(ctx), source).catch(
            (error: unknown) => {
              if (error instanceof ConfigurationError) throw new CliError(error.message);
              throw error;
            },
          );
          read = readShop(
            source,
            credentials,
            { from, to },
            {
              now,
              maxAttempts: 5,
              // The shop's rate limit, said as it happens: the run is waiting, not stuck.
              onRetry: ({ path, status, waitMs }) =>
                writeLine(io.stderr, `${path}: ${status ?? 'no answer'}, trying again in ${waitMs} ms`),
            },
          );
        }
        const period =
          flags.file === undefined ? `${from.toISOString()} to ${to.toISOString()}` : `file ${flags.file}`;
        const progress = rowProgress(io, 0, 'backfill', flags.json ? 'json' : 'text');
        // A dry run sends nothing, so it needs no queue URL.
        const queue: EventQueue = flags.dryRun
          ? { send: () => Promise.reject(new Error('a dry run sends nothing')) }
          : new SqsEventQueue(ctx.sqs(), ctx.require('queueUrl'));
        const ledger = ctx.ledger();
        let summary: BackfillSummary;
        try {
          summary = await backfill(
            {
              adapterFor,
              queue,
              ledger,
              now: () => nowOf(io),
              onProgress: ({ found, label, outcome }) => {
                progress.grow(found);
                progress.row(`${label}: ${cell(outcome, 100)}`);
              },
            },
            source,
            read.deliveries,
            { dryRun: flags.dryRun ?? false, notices: read.notices },
          );
        } catch (error) {
          // The shop's or the queue's failure, classified; what was queued before it stays queued.
          if (error instanceof ConfigurationError) throw new CliError(error.message, 2);
          throw new CliError(
            `backfill stopped: ${describeError(error)} (run it again: what is already applied is a no-op)`,
            1,
          );
        } finally {
          progress.stop();
        }
        if (flags.json)
          writeLine(io.stdout, terminalJson({ ...summary, from: from.toISOString(), to: to.toISOString() }));
        else writeLine(io.stdout, summaryText(summary, period));
      });
    });
}

import type { Command } from 'commander';
import { type AcceptItem, type AcceptSummary, runAccept } from '../shared/accept/job.ts';
import { SqsFailureQueue } from '../shared/adapters/sqs.ts';
import { CurrentApiBackend } from '../shared/affiliate/backend.ts';
import { ConfigurationError } from '../shared/errors.ts';
import { LegacyBackend } from '../shared/legacy/backend.ts';
import { LegacyClient, parseLegacyCredentials } from '../shared/legacy/client.ts';
import type { ConversionBackend } from '../shared/ports.ts';
import { type CliContext, PLATFORM_CALL_MS, settingOptions, withContext } from './context.ts';
import { CliError, type CliIo, cell, formatTable, writeLine } from './io.ts';
import { rowProgress } from './progress.ts';

interface AcceptFlags {
  readonly olderThan?: string;
  readonly source?: string[];
  readonly limit?: string;
  readonly dryRun?: boolean;
}

/** An accept call holds its ledger lease this long: far past the client's bounded retries. */
const CLI_LEASE_MS = 120_000;
const DEFAULT_LIMIT = 500;
const DURATION = /^(\d+)\s*(h|d|w)$/i;
const UNIT_MS: Record<string, number> = { h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/** `30d` → ms; hours, days or weeks. @throws CliError naming the flag */
export function parseOlderThan(text: string): number {
  const match = DURATION.exec(text.trim());
  if (!match)
    throw new CliError(`--older-than: "${cell(text, 20)}" is not a duration such as 30d, 12h or 4w`);
  return Number(match[1]) * (UNIT_MS[(match[2] ?? '').toLowerCase()] ?? 0);
}

/** `connector accept`: the scheduled accept job, run by hand. */
export function registerAccept(program: Command, io: CliIo): void {
  const command = program
    .command('accept')
    .summary('accept conversions past their source’s return window (the hourly job, by hand)')
    .description(
      'Accepts on the platform the pending conversions of sources with acceptAfterDays whose order is ' +
        'older than the window, unless a refund is pending or the conversion was refused: the same job ' +
        'the hourly schedule runs, once per conversion. A conversion the platform will not accept is ' +
        'parked in the DLQ with the reason.',
    )
    .option(
      '--older-than <duration>',
      "orders older than this (30d, 12h, 4w) instead of each source's window",
    )
    .option('--source <id...>', 'only these sources (default: every source with acceptAfterDays)')
    .option(
      '--limit <n>',
      `at most this many orders taken to the platform: accept calls, and lookups that hold an order (default ${DEFAULT_LIMIT})`,
    )
    .option('--dry-run', 'list what would be accepted; change nothing');
  settingOptions(command, [
    'ledgerTable',
    'dynamoEndpoint',
    'dlqUrl',
    'queueUrl',
    'sqsEndpoint',
    'region',
    'affiliateBaseUrl',
  ]);
  command.addHelpText(
    'after',
    `
Legacy 2.0 sources need LEGACY_CREDENTIALS (user_code:api_key) and LEGACY_BASE_URL (default: the
affiliate URL); without them their conversions are left for the scheduled job.

Examples:
  $ npx connector accept --dry-run
  $ npx connector accept --older-than 30d --source shop-main

Exit codes: 0 done (held conversions included), 1 some accept failed, 2 usage or missing setting.`,
  );
  command.action(async (flags: AcceptFlags) => {
    await withContext(io, flags, (ctx) => accept(ctx, flags));
  });
}

async function accept(ctx: CliContext, flags: AcceptFlags): Promise<void> {
  const { io } = ctx;
  const olderThanMs = flags.olderThan === undefined ? undefined : parseOlderThan(flags.olderThan);
  const limit = flags.limit === undefined ? DEFAULT_LIMIT : Number(flags.limit);
  if (!Number.isInteger(limit) || limit < 1)
    throw new CliError('--limit: must be a whole number of at least 1');
  const sources = new Map(ctx.sources().map((s) => [s.id, s]));
  for (const id of flags.source ?? []) {
    if (!sources.has(id)) throw new CliError(`--source: unknown source "${id}"`);
    if (sources.get(id)?.acceptAfterDays === undefined)
      throw new CliError(`--source: source "${id}" has no acceptAfterDays: nothing of it is due`);
  }
  if (![...sources.values()].some((s) => s.acceptAfterDays !== undefined)) {
    throw new CliError(
      'no source has acceptAfterDays: nothing to accept (see docs/deploy.md; locally: ACCEPT_AFTER_DAYS=30 npm start)',
    );
  }
  const current = new CurrentApiBackend(await ctx.affiliate());
  const legacy = legacyBackend(ctx);
  const dlqUrl = ctx.require('dlqUrl');
  const deps = {
    ledger: ctx.ledger(),
    sources,
    backendFor: (source: { readonly id: string; readonly backend: string }): ConversionBackend => {
      if (source.backend !== 'legacy') return current;
      if (!legacy)
        throw new ConfigurationError(
          `source ${source.id} is on the legacy interface: set LEGACY_CREDENTIALS (and LEGACY_BASE_URL)`,
        );
      return legacy;
    },
    // Only `park` is used, which sends to the DLQ.
    failures: new SqsFailureQueue(ctx.sqs(), ctx.get('queueUrl') ?? dlqUrl, dlqUrl),
    now: () => Date.now(),
    leaseMs: CLI_LEASE_MS,
  };
  const options = {
    limit,
    ...(olderThanMs === undefined ? {} : { olderThanMs }),
    ...(flags.source ? { sources: flags.source } : {}),
  };

  // A read-only pass first: the progress bar's total, and the whole answer of a dry run.
  const plan = await runAccept(deps, { ...options, dryRun: true });
  if (flags.dryRun) {
    printItems(io, plan.items);
    writeLine(
      io.stdout,
      `dry run: ${plan.items.filter((i) => i.result === 'would_accept').length} would be accepted, ${plan.held} held; nothing changed`,
    );
    return;
  }
  const total = plan.items.filter((i) => i.result === 'would_accept').length;
  const progress = rowProgress(io, total, 'accept', 'text');
  let summary: AcceptSummary;
  try {
    summary = await runAccept(deps, {
      ...options,
      onItem: (item) => {
        if (item.result !== 'held') progress.row(line(item));
      },
    });
  } finally {
    progress.stop();
  }
  writeLine(
    io.stdout,
    formatTable(
      ['result', 'conversions'],
      [
        ['accepted', String(summary.accepted)],
        ['failed', String(summary.failed)],
        ['held', String(summary.held)],
        ['due left', String(summary.dueLeft)],
      ],
    ),
  );
  const held = summary.items.filter((i) => i.result === 'held');
  if (held.length > 0) {
    writeLine(io.stdout, '\nHeld (accepted by a later run):');
    printItems(io, held);
  }
  if (summary.failed > 0) {
    writeLine(
      io.stderr,
      'some conversions were not accepted: see the DLQ (connector dlq list) or retry later',
    );
    throw new CliError('', 1);
  }
}

const RESULT_TEXT: Record<AcceptItem['result'], string> = {
  accepted: 'accepted',
  would_accept: 'would accept',
  held: 'held',
  failed: 'failed: parked in the DLQ',
  retry: 'not accepted: next run',
};

function line(item: AcceptItem): string {
  return `${item.source}  order ${item.externalId}  → ${RESULT_TEXT[item.result]}${item.detail ? ` (${cell(item.detail, 120)})` : ''}`;
}

function printItems(io: CliIo, items: readonly AcceptItem[]): void {
  if (items.length === 0) {
    writeLine(io.stdout, 'nothing due');
    return;
  }
  writeLine(
    io.stdout,
    formatTable(
      ['source', 'order', 'conversion', 'due', 'result'],
      items.map((i) => [
        i.source,
        i.externalId,
        i.conversionId ?? '',
        i.acceptDueAt?.slice(0, 10) ?? '',
        `${RESULT_TEXT[i.result]}${i.detail ? ` (${cell(i.detail, 80)})` : ''}`,
      ]),
    ),
  );
}

/** The legacy interface from LEGACY_CREDENTIALS (a value, never a flag) and LEGACY_BASE_URL. */
function legacyBackend(ctx: CliContext): ConversionBackend | undefined {
  const credentials = ctx.io.env['LEGACY_CREDENTIALS']?.trim();
  if (!credentials) return undefined;
  const baseUrl = ctx.io.env['LEGACY_BASE_URL']?.trim() || ctx.require('affiliateBaseUrl');
  try {
    return new LegacyBackend(
      new LegacyClient({
        baseUrl,
        maxAttempts: 3,
        callBudgetMs: PLATFORM_CALL_MS,
        ...parseLegacyCredentials(credentials, 'LEGACY_CREDENTIALS'),
      }),
    );
  } catch (error) {
    throw new CliError((error as Error).message);
  }
}

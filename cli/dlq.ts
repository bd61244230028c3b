import type { Command } from 'commander';
import { ACCEPT_EVENT_TYPE } from '../shared/accept/job.ts';
import { type CliContext, type SettingName, settingOptions, withContext } from './context.ts';
import { type DiscardOptions, discardCommand } from './dlq-discard.ts';
import {
  confirmDeadLetterQueue,
  type DlqEntry,
  type DlqFilter,
  matches,
  purgeQueue,
  queueCounts,
  queueName,
  REDRIVE_CLASS,
  replayQueue,
  scanQueue,
} from './dlq-reader.ts';
import {
  ask,
  CliError,
  type CliIo,
  cell,
  formatAge,
  formatTable,
  nowOf,
  parseWhen,
  terminalJson,
  visibleText,
  writeLine,
} from './io.ts';
import { rowProgress } from './progress.ts';

interface FilterOptions {
  externalId?: string;
  reason?: string;
  since?: string;
}

const DLQ_SETTINGS: readonly SettingName[] = ['dlqUrl', 'sqsEndpoint', 'region'];

function filterOptions(command: Command): Command {
  return command
    .option('--external-id <id>', 'only this order')
    .option('--reason <text>', 'only messages whose reason contains this text (any case)')
    .option('--since <when>', 'only failures since an ISO date or a duration back (30m, 1h, 2d)');
}

function filterOf(io: CliIo, options: FilterOptions): DlqFilter {
  return {
    externalId: options.externalId,
    reason: options.reason,
    since: options.since === undefined ? undefined : parseWhen(options.since, nowOf(io), '--since'),
  };
}

function attemptsText(entry: DlqEntry): string {
  return entry.parked ? String(entry.attempts) : `${entry.receiveCount} receives`;
}

/** The platform's own words when it answered (the worker's reason then starts with the route called). */
function shortReason(entry: DlqEntry): string {
  const message = entry.attributes['platformMessage'];
  if (!message) return entry.reason;
  const status = entry.attributes['platformStatus'];
  return status ? `${status} ${message}` : message;
}

/** Whether the reason asks to settle the message by hand and then discard it. */
function settledByHand(entry: DlqEntry): boolean {
  return /then discard this message|once handled, discard it/i.test(entry.reason);
}

/**
 * What to do with a message, in a few words (docs/runbook.md, failure classes): the reason's own
 * instruction when it ends with one (settle by hand, then discard), else what its class asks.
 */
export function nextStep(entry: DlqEntry): string {
  // Replaying an accept accepts nothing: the worker does not take it and parks it again.
  if (entry.eventType === ACCEPT_EVENT_TYPE) return 'act on the platform, then discard';
  if (!entry.parked) return 'replay once the platform is healthy';
  if (settledByHand(entry)) return 'settle by hand, then discard';
  switch (entry.failureClass) {
    case 'transient':
      // Parked on the queue's last receive (shared/worker/batch.ts): its reason says what failed.
      if (/ on an unexpected error /.test(entry.reason))
        return "read the worker's logs (a bug?); replay once fixed";
      if (/ on a failed AWS call /.test(entry.reason)) return 'check the AWS service, then replay';
      return 'replay once the platform is healthy';
    case 'configuration':
      return 'fix the setting, then replay';
    case 'bad_input':
      return 'keep it for a bug report';
    default:
      return 'fix the cause, then replay';
  }
}

/** Why replaying this message would not do what a replay is for, if it would not. */
export function replayWarning(entry: DlqEntry): string | undefined {
  const which = `${entry.messageId} (order ${entry.externalId ?? '?'}, ${entry.eventType ?? '?'})`;
  const discard = `connector dlq discard ${entry.messageId}`;
  if (entry.eventType === ACCEPT_EVENT_TYPE) {
    return `${which}: replaying it accepts nothing (the worker does not take an accept; it is parked again): accept it on the platform if it should be, then ${discard}`;
  }
  if (entry.parked && settledByHand(entry)) {
    return `${which}: its reason asks to settle it by hand, then ${discard} (dlq show ${entry.messageId} has the whole reason)`;
  }
  return undefined;
}

function tableOf(entries: readonly DlqEntry[], now: Date): string {
  return formatTable(
    ['MESSAGE ID', 'EXTERNAL ID', 'EVENT', 'FAILURE CLASS', 'REASON', 'AGE', 'ATTEMPTS', 'NEXT'],
    entries.map((e) => [
      e.messageId,
      e.externalId ?? '?',
      e.eventType ?? '?',
      e.failureClass,
      cell(shortReason(e), 70),
      e.failedAt ? formatAge(now.getTime() - e.failedAt.getTime()) : '?',
      attemptsText(e),
      nextStep(e),
    ]),
  );
}

function jsonOf(entry: DlqEntry): Record<string, unknown> {
  let body: unknown = entry.body;
  try {
    body = JSON.parse(entry.body);
  } catch {
    // shown as the raw text
  }
  return {
    messageId: entry.messageId,
    externalId: entry.externalId ?? null,
    eventType: entry.eventType ?? null,
    source: entry.source ?? null,
    failureClass: entry.failureClass,
    reason: entry.reason,
    platformStatus: entry.attributes['platformStatus'] ?? null,
    platformMessage: entry.attributes['platformMessage'] ?? null,
    attempts: entry.attempts,
    receiveCount: entry.receiveCount,
    firstFailureAt: entry.attributes['firstFailureAt'] ?? null,
    lastFailureAt: entry.attributes['lastFailureAt'] ?? null,
    sentAt: entry.sentAt?.toISOString() ?? null,
    groupId: entry.groupId ?? null,
    deduplicationId: entry.deduplicationId ?? null,
    attributes: entry.attributes,
    body,
  };
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** `dlq list`: the messages counted in the total that could not be read. */
function hiddenNote(hidden: number): string {
  return `${hidden} of them ${hidden === 1 ? 'is' : 'are'} not shown: behind an earlier message of the same order (a FIFO queue hands out one order's messages in turn) or being read elsewhere; they come up as the ones ahead are replayed or discarded`;
}

/** `dlq replay`: the messages not read yet, which the replay takes too if they match. */
function behindNote(hidden: number): string {
  return `${plural(hidden, 'more message')} of the DLQ could not be read: behind an earlier message of the same order (a FIFO queue hands out one order's messages in turn) or being read elsewhere; a replay takes ${hidden === 1 ? 'it' : 'them'} too if ${hidden === 1 ? 'it matches' : 'they match'}, as the ones ahead leave`;
}

const LIST_EXAMPLES = `
Examples:
  $ npx connector dlq list
  $ npx connector dlq list --reason locked --since 2d
  $ npx connector dlq list --external-id 1001 --json

Reading does not consume: each message is hidden for 2 s while read, then made visible again.
FAILURE CLASS is the worker's (permanent, configuration, bad_input; transient: still failing on
the queue's last receive, the reason giving the last error) or "${REDRIVE_CLASS}" for a message
SQS moved after too many receives because the worker could not park it (ATTEMPTS is then SQS's
receive count, which counts reads by this command too, so it grows with each dlq list).
REASON is the platform's status and message when it answered, cut to fit: dlq show <message id>
(or --json) has the whole reason. NEXT is what to do: "fix the cause, then replay", "fix the
setting, then replay", "replay once the platform is healthy" (or, when the worker gave up on an
AWS call or an unexpected error, "check the AWS service, then replay" or "read the worker's logs
(a bug?); replay once fixed"), "settle by hand, then discard" (the
reason says how), "act on the platform, then discard" (an accept: replaying it accepts nothing),
"keep it for a bug report".`;

/** `connector dlq list|show|replay|discard|purge`: the dead-letter queue, for operators. */
export function registerDlq(program: Command, io: CliIo): void {
  const dlq = program
    .command('dlq')
    .summary('inspect, replay, discard or purge the dead-letter queue')
    .description(
      'Messages the worker parked with a reason, or that SQS moved after too many transient failures.',
    );

  const list = filterOptions(
    dlq.command('list').description('list DLQ messages without consuming them'),
  ).option('--json', 'print JSON');
  settingOptions(list, DLQ_SETTINGS);
  list.addHelpText('after', LIST_EXAMPLES).action(async (options: FilterOptions & { json?: boolean }) => {
    await withContext(io, options, async (ctx) => {
      const filter = filterOf(io, options);
      const { entries, hidden } = await scanQueue(ctx.sqs(), ctx.require('dlqUrl'));
      const shown = entries.filter((e) => matches(e, filter));
      if (options.json) {
        writeLine(io.stdout, terminalJson({ messages: shown.map(jsonOf), total: entries.length, hidden }));
        return;
      }
      if (shown.length > 0) writeLine(io.stdout, tableOf(shown, nowOf(io)));
      const filtered = shown.length === entries.length ? '' : ` (${shown.length} match)`;
      writeLine(io.stdout, `${plural(entries.length + hidden, 'message')} in the DLQ${filtered}`);
      if (hidden > 0) writeLine(io.stdout, hiddenNote(hidden));
    });
  });

  const show = dlq
    .command('show')
    .description('one DLQ message: every attribute and the body')
    .argument('<messageId>', 'message id, as dlq list shows it')
    .option('--json', 'print JSON');
  settingOptions(show, DLQ_SETTINGS);
  show.addHelpText(
    'after',
    `
Examples:
  $ npx connector dlq list --external-id 1001
  $ npx connector dlq show 6c1f0b4e-8d2a-4c55-9f3e-2b7d1a0e9c41
  $ npx connector dlq show 6c1f0b4e-8d2a-4c55-9f3e-2b7d1a0e9c41 --json

Reading does not consume (as dlq list). Exit code 1 when the message is not in the DLQ or not reachable
now (behind an earlier message of the same order).`,
  );
  show.action(async (messageId: string, options: { json?: boolean }) => {
    await withContext(io, options, async (ctx) => {
      const { entries, hidden } = await scanQueue(ctx.sqs(), ctx.require('dlqUrl'));
      const entry = entries.find((e) => e.messageId === messageId);
      if (!entry) {
        const why =
          hidden > 0
            ? ` (${hidden} message${hidden === 1 ? ' is' : 's are'} not reachable now: it may be one of them)`
            : '';
        throw new CliError(`message ${messageId} is not in the DLQ${why}`, 1);
      }
      if (options.json) {
        writeLine(io.stdout, terminalJson(jsonOf(entry)));
        return;
      }
      writeLine(io.stdout, showText(entry, nowOf(io)));
    });
  });

  const replay = filterOptions(
    dlq
      .command('replay')
      .summary('move matching messages back to the main queue')
      .description(
        'Moves matching messages back to the main queue (same message group, so each order keeps its order), ' +
          'then deletes them from the DLQ. Fix the cause first (dlq list shows the reason).',
      ),
  )
    .option('--dry-run', 'show what would be replayed; change nothing')
    .option('--yes', 'do not ask for confirmation')
    .option('--limit <n>', 'replay at most n messages', (v) => Number(v));
  settingOptions(replay, [...DLQ_SETTINGS, 'queueUrl']);
  replay
    .addHelpText(
      'after',
      `
Examples:
  $ npx connector dlq replay --reason "rate limit" --dry-run
  $ npx connector dlq replay --external-id 1001 --yes
  $ npx connector dlq replay --since 1h --limit 1

A replay stopped half-way loses nothing: a message is deleted from the DLQ only after the main queue
has it, so each one is in one queue or both (the ledger applies it once). Exit code 1 if any failed.`,
    )
    .action(async (options: FilterOptions & { dryRun?: boolean; yes?: boolean; limit?: number }) => {
      await withContext(io, options, (ctx) => replayCommand(ctx, options));
    });

  const discard = dlq
    .command('discard')
    .summary('delete one message, once settled by hand')
    .description(
      'Deletes one DLQ message for good: one whose reason asks to settle it by hand and then discard it, ' +
        'or one you decided to drop. A refund (or cancellation) the ledger still holds pending on an added ' +
        'conversion is recorded as settled by hand first (refund status "manual"), so that nothing waits for it; ' +
        "for an order's message, so are the refunds held for the order that only that message applies.",
    )
    .argument('<messageId>', 'message id, as dlq list shows it')
    .option('--yes', 'do not ask for confirmation')
    .option('--json', 'print JSON')
    .option('--source <id>', "the order's source, when its program cannot be told from the message")
    .option('--program <id>', "the order's program, when it cannot be told from the message");
  settingOptions(discard, [...DLQ_SETTINGS, 'ledgerTable', 'dynamoEndpoint']);
  discard
    .addHelpText(
      'after',
      `
Examples:
  $ npx connector dlq list --external-id 1001
  $ npx connector dlq discard 6c1f0b4e-8d2a-4c55-9f3e-2b7d1a0e9c41
  $ npx connector dlq discard 6c1f0b4e-8d2a-4c55-9f3e-2b7d1a0e9c41 --yes --json

A refund or cancellation the ledger holds pending on an added conversion (a partial refund on the
legacy interface, a change the platform refused for good) is recorded as settled by hand by an
operator (connector dlq discard, <time>), status manual: the worker never sends it, a delivery of
it again is a duplicate, the accept job and connector status stop waiting for it, and later refunds
of the order count it as made. Settle it on the platform first. An order's message parked applying
the refunds held for it (they came before the order) settles those the same way; a refund of the
order whose own message still applies it stays pending. Other messages (an accept the platform
refused, an order with nothing held pending, a refund already applied or held for its order) are
only deleted.
The DLQ is FIFO: a message behind an earlier one of its order is not reachable until that one is
replayed or discarded. Exit codes: 0 discarded; 1 not found or not reachable, not confirmed, or the
ledger or the queue changed meanwhile (nothing lost: run it again); 2 no --yes without a terminal,
a missing setting, or an order whose program neither the message nor the sources tell.`,
    )
    .action(async (messageId: string, options: DiscardOptions) => {
      await withContext(io, options, (ctx) => discardCommand(ctx, messageId, options));
    });

  const purge = dlq
    .command('purge')
    .description('delete every message of the DLQ, for good')
    .option('--yes', 'do not ask to type the queue name');
  settingOptions(purge, [...DLQ_SETTINGS, 'queueUrl']);
  purge.addHelpText(
    'after',
    `
Examples:
  $ npx connector dlq purge                 # asks you to type the queue's name
  $ npx connector dlq purge --yes

It first checks that the queue is a dead-letter queue (ListDeadLetterSourceQueues, else the main
queue's RedrivePolicy, QUEUE_URL), so a wrong --dlq-url cannot empty the main queue. SQS allows one
purge a minute. Exit codes: 0 purged; 2 not a dead-letter queue, no --yes without a terminal, or a
missing setting; 1 otherwise (the name typed does not match, SQS refused the purge).`,
  );
  purge.action(async (options: { yes?: boolean }) => {
    await withContext(io, options, async (ctx) => {
      const dlqUrl = ctx.require('dlqUrl');
      const name = queueName(dlqUrl);
      // A wrong --dlq-url must not empty the main queue, or anyone else's.
      await confirmDeadLetterQueue(ctx.sqs(), dlqUrl, ctx.get('queueUrl'));
      const counts = await queueCounts(ctx.sqs(), dlqUrl);
      const total = counts.visible + counts.inFlight;
      if (!options.yes) {
        const answer = await ask(
          io,
          `This deletes all ${total} message${total === 1 ? '' : 's'} of ${name} for good.\nType the queue name to confirm: `,
        );
        if (answer === undefined)
          throw new CliError('no confirmation could be read: pass --yes to purge without a prompt');
        if (answer.trim() !== name) throw new CliError('the name does not match; nothing deleted', 1);
      }
      await purgeQueue(ctx.sqs(), dlqUrl);
      writeLine(
        io.stdout,
        `purged ${name} (${total} message${total === 1 ? '' : 's'}); SQS may take up to 60 s to finish`,
      );
    });
  });
}

async function replayCommand(
  ctx: CliContext,
  options: FilterOptions & { dryRun?: boolean; yes?: boolean; limit?: number },
): Promise<void> {
  const { io } = ctx;
  if (options.limit !== undefined && !(Number.isSafeInteger(options.limit) && options.limit > 0)) {
    throw new CliError('--limit: must be a positive integer');
  }
  const filter = filterOf(io, options);
  const dlqUrl = ctx.require('dlqUrl');
  const queueUrl = options.dryRun ? ctx.get('queueUrl') : ctx.require('queueUrl');
  const target = queueUrl ? queueName(queueUrl) : 'the main queue';
  // A main queue URL that names no queue fails here, naming its setting, before any message is taken.
  if (!options.dryRun && queueUrl !== undefined) await queueCounts(ctx.sqs(), queueUrl);
  const { entries, hidden } = await scanQueue(ctx.sqs(), dlqUrl);
  const candidates = entries.filter((e) => matches(e, filter)).slice(0, options.limit);
  if (candidates.length === 0) {
    writeLine(io.stdout, `nothing to replay: no message matches (${entries.length + hidden} in the DLQ)`);
    if (hidden > 0) writeLine(io.stdout, behindNote(hidden));
    return;
  }
  const warnings = candidates.flatMap((e) => replayWarning(e) ?? []);
  if (options.dryRun) {
    writeLine(io.stdout, tableOf(candidates, nowOf(io)));
    for (const warning of warnings) writeLine(io.stdout, `warning: ${visibleText(warning)}`);
    writeLine(io.stdout, `dry run: ${plural(candidates.length, 'message')} would be replayed to ${target}`);
    if (hidden > 0) writeLine(io.stdout, behindNote(hidden));
    return;
  }
  for (const warning of warnings) writeLine(io.stderr, `warning: ${visibleText(warning)}`);
  if (!options.yes) {
    const answer = await ask(
      io,
      `Replay ${candidates.length} message${candidates.length === 1 ? '' : 's'} (and matching ones behind them) to ${target}? [y/N] `,
    );
    if (answer === undefined)
      throw new CliError('no confirmation could be read: pass --yes to replay without a prompt');
    if (!/^y(es)?$/i.test(answer.trim())) throw new CliError('not confirmed; nothing replayed', 1);
  }

  // Messages behind the ones read come up as those leave: the total so far is then a lower bound.
  const more = hidden > 0 && (options.limit === undefined || candidates.length < options.limit);
  const progress = rowProgress(io, candidates.length, 'replay', 'text', { more });
  let stopRequested = false;
  // Ctrl-C finishes the message in hand (sent and deleted) instead of leaving it half-way.
  const onSigint = () => {
    stopRequested = true;
  };
  const interactive = io.stdin === process.stdin;
  if (interactive) process.once('SIGINT', onSigint);
  let result: { replayed: number; failed: number };
  try {
    result = await replayQueue(ctx.sqs(), dlqUrl, queueUrl ?? '', {
      filter,
      limit: options.limit,
      now: () => nowOf(io),
      stopRequested: () => stopRequested,
      onEvent: (event) => {
        const head = `${event.entry.messageId}  ${event.entry.externalId ?? '?'}  ${event.entry.eventType ?? '?'}`;
        const text =
          event.status === 'replayed'
            ? `replayed as ${event.newMessageId ?? '?'}${event.warning ? `  warning: ${event.warning}` : ''}`
            : `failed: ${event.error ?? ''}`;
        progress.row(`${head}  ${text}`);
      },
    });
  } finally {
    progress.stop();
    if (interactive) process.off('SIGINT', onSigint);
  }
  writeLine(
    io.stdout,
    `replayed ${result.replayed}, failed ${result.failed}${stopRequested ? ' (stopped)' : ''}`,
  );
  if (result.failed > 0) throw new CliError('', 1);
}

function showText(entry: DlqEntry, now: Date): string {
  const rows: [string, string][] = [
    ['message id', entry.messageId],
    ['external id', entry.externalId ?? '?'],
    ['event', entry.eventType ?? '?'],
    ['source', entry.source ?? '?'],
    ['failure class', entry.failureClass],
    ['reason', entry.reason],
    ['attempts', attemptsText(entry)],
    ['group id', entry.groupId ?? '-'],
    ['dedup id', entry.deduplicationId ?? '-'],
    [
      'queued',
      entry.sentAt
        ? `${entry.sentAt.toISOString()} (${formatAge(now.getTime() - entry.sentAt.getTime())} ago)`
        : '?',
    ],
  ];
  const attributes = Object.entries(entry.attributes).sort(([a], [b]) => a.localeCompare(b));
  // The body holds what shops wrote: escaped, not dropped, so it stays the JSON that was queued.
  let body: string;
  try {
    body = terminalJson(JSON.parse(entry.body));
  } catch {
    body = visibleText(entry.body);
  }
  return [
    formatTable(['FIELD', 'VALUE'], rows),
    '',
    'Message attributes:',
    attributes.length > 0 ? formatTable(['NAME', 'VALUE'], attributes) : '(none)',
    '',
    'Body:',
    body,
  ].join('\n');
}

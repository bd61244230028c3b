import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { Command } from 'commander';
import type { Conversion } from '../shared/affiliate/schemas.ts';
import {
  awaitsAccept,
  ledgerKey,
  type OrderRecord,
  type RefundReservation,
  unrecordedReservations,
} from '../shared/ledger.ts';
import { compareOrder, type Difference, failedOrderWayOut, money } from './compare.ts';
import { awsCall, type CliContext, settingOptions, withContext } from './context.ts';
import { CliError, type CliIo, cell, formatTable, nowOf, terminalJson, writeLine } from './io.ts';
import { reservedAmount } from './reservations.ts';
import { addLeftAt, STUCK_ADD_AFTER_MS } from './stuck.ts';

interface StatusOptions {
  source?: string;
  program?: string;
  json?: boolean;
}

export interface OrderStatus {
  readonly program: string;
  readonly externalId: string;
  readonly record: OrderRecord | undefined;
  readonly conversion: Conversion | undefined;
  readonly differences: Difference[];
  /**
   * Refunds `POST /refunds` reserved for the order that its record does not hold yet: a partial one
   * counts against what remains, a full one (`full`) leaves nothing, until the worker records them.
   * None when absent.
   */
  readonly unrecordedReservations?: readonly RefundReservation[];
}

/** What `status` learnt beside the order, for an add without a clear answer. */
export interface StatusNotes {
  /** The worker's verification window, when the CLI is told it (ADD_VERIFY_SECONDS). */
  readonly verifyWindowSeconds?: number;
  /** Messages in the main queue (visible, in flight, delayed), when it could be read. */
  readonly queuedMessages?: number;
}

/** `connector status <externalId>`: the ledger record and the platform's conversion side by side. */
export function registerStatus(program: Command, io: CliIo): void {
  const command = program
    .command('status')
    .summary("an order's ledger record and its conversion on the platform")
    .description(
      "Shows what the connector recorded for an order (ledger) next to the platform's conversion, with its " +
        'refunds and those POST /refunds reserved that the worker has not recorded yet. Exit code 0 when both agree, 1 when they differ, the order is unknown, its add was left ' +
        'unfinished long ago (stuck_add: see connector reconcile --repair), or the ledger holds it failed with no ' +
        'conversion on the platform (failed_add: replay its message if parked, else send the order again).',
    )
    .argument('<externalId>', "the shop's order id")
    .option('--source <id>', "look in this source's program")
    .option('--program <id>', 'look in this program (default: every configured source program)')
    .option('--json', 'print JSON');
  settingOptions(command, [
    'ledgerTable',
    'dynamoEndpoint',
    'region',
    'affiliateBaseUrl',
    'queueUrl',
    'sqsEndpoint',
  ]);
  command
    .addHelpText(
      'after',
      `
Examples:
  $ npx connector status 1001
  $ npx connector status 1001 --source shopify --json

The platform token comes from AFFILIATE_TOKEN (or .local-stack.json), else from the Secrets Manager
secret AFFILIATE_TOKEN_SECRET names. For an add without a clear answer, the main queue (QUEUE_URL,
optional) tells whether a message is left to retry it, and ADD_VERIFY_SECONDS, when set as for the
worker (against the local stack, .local-stack.json holds it), the verification window in effect.`,
    )
    .action(async (externalId: string, options: StatusOptions) => {
      await withContext(io, options, async (ctx) => {
        const programs = ctx.programs(options.program, options.source);
        const ledger = ctx.ledger();
        const client = await ctx.affiliate();
        let found: OrderStatus | undefined;
        // Refunds reserved for an order that neither the ledger nor the platform knows: the worker
        // never handled them (still queued, or their request failed), and they still count.
        let reservedOnly: { program: string; reservations: RefundReservation[] } | undefined;
        for (const program of programs) {
          const key = ledgerKey(program, externalId);
          const [record, conversion, reservations] = await Promise.all([
            ledger.get(key),
            client.conversionInfo({ program, externalId }),
            ledger.reservationsOf(key),
          ]);
          if (record || conversion) {
            const differences = compareOrder(
              program,
              externalId,
              record,
              conversion ? [conversion] : [],
              nowOf(io).getTime(),
            );
            found = {
              program,
              externalId,
              record,
              conversion,
              differences,
              unrecordedReservations: unrecordedReservations(record, reservations),
            };
            break;
          }
          const unrecorded = unrecordedReservations(record, reservations);
          if (!reservedOnly && unrecorded.length > 0) reservedOnly = { program, reservations: unrecorded };
        }
        if (options.json) {
          writeLine(
            io.stdout,
            terminalJson(
              found
                ? {
                    found: true,
                    ...found,
                    record: found.record ?? null,
                    conversion: found.conversion ?? null,
                  }
                : {
                    found: false,
                    externalId,
                    programs,
                    ...(reservedOnly
                      ? { program: reservedOnly.program, unrecordedReservations: reservedOnly.reservations }
                      : {}),
                  },
            ),
          );
        } else if (found) {
          writeLine(io.stdout, statusText(found, await notesOf(ctx, found)));
        } else if (reservedOnly) {
          writeLine(
            io.stdout,
            [
              `Order ${externalId} in program ${reservedOnly.program}: not in the ledger, no conversion on the platform`,
              ...reservedLines(externalId, reservedOnly.reservations, undefined),
            ].join('\n'),
          );
        }
        if (!found) {
          throw new CliError(
            `order ${externalId}: not in the ledger and no conversion on the platform (program${programs.length === 1 ? '' : 's'} ${programs.join(', ')})`,
            1,
          );
        }
        if (found.differences.length > 0) throw new CliError('', 1);
      });
    });
}

/**
 * For an add without a clear answer only: the window the worker waits out, and whether the main queue
 * holds any message at all (it cannot be searched for the order's without delaying it). Nothing when
 * it cannot be read: the text then says what it does not know.
 */
async function notesOf(ctx: CliContext, status: OrderStatus): Promise<StatusNotes> {
  const record = status.record;
  if (record?.state !== 'adding' || record.unclearAddAt === undefined) return {};
  const setting = ctx.io.env['ADD_VERIFY_SECONDS']?.trim();
  // As the other settings: the environment, else the local stack's file (its worker's window).
  const fromFile = ctx.localState()?.['addVerifySeconds'];
  const seconds = setting ? Number(setting) : typeof fromFile === 'number' ? fromFile : Number.NaN;
  const queueUrl = ctx.get('queueUrl');
  let queuedMessages: number | undefined;
  if (queueUrl !== undefined) {
    try {
      const out = await ctx.sqs().send(
        new GetQueueAttributesCommand({
          QueueUrl: queueUrl,
          AttributeNames: [
            'ApproximateNumberOfMessages',
            'ApproximateNumberOfMessagesNotVisible',
            'ApproximateNumberOfMessagesDelayed',
          ],
        }),
        awsCall(),
      );
      const a = out.Attributes ?? {};
      queuedMessages =
        (Number(a.ApproximateNumberOfMessages) || 0) +
        (Number(a.ApproximateNumberOfMessagesNotVisible) || 0) +
        (Number(a.ApproximateNumberOfMessagesDelayed) || 0);
    } catch {
      // Not known: the text says what happens either way.
    }
  }
  return {
    ...(Number.isFinite(seconds) && seconds >= 0 ? { verifyWindowSeconds: seconds } : {}),
    ...(queuedMessages === undefined ? {} : { queuedMessages }),
  };
}

const dash = (v: unknown) => (v === undefined || v === null || v === '' ? '-' : String(v));

/** The side-by-side view of one order. */
export function statusText(status: OrderStatus, notes: StatusNotes = {}): string {
  const { record, conversion } = status;
  const currency = record?.currency ?? conversion?.currency;
  // A record made for refunds that came before their order holds no amount of the order yet.
  const orderKnown = record !== undefined && record.state !== 'awaiting';
  const rows: string[][] = [
    ['state', dash(record?.state), dash(conversion?.status)],
    ['conversion id', dash(record?.conversionId), dash(conversion?.id)],
    [
      'amount',
      orderKnown ? money(record.currentAmount, currency) : '-',
      money(conversion?.amount, conversion?.currency ?? currency),
    ],
    ['original amount', orderKnown ? money(record.originalAmount, currency) : '-', '-'],
    ['mode', dash(record?.kind), '-'],
    [
      'locked',
      '-',
      conversion?.isLocked === undefined
        ? '-'
        : conversion.isLocked
          ? `yes (${dash(conversion.lockedAt)})`
          : 'no',
    ],
    ['refuse reason', '-', dash(conversion?.refuseReason)],
    ['created', dash(record?.createdAt), dash(conversion?.createdAt)],
    ['updated', dash(record?.updatedAt), '-'],
  ];
  const accept = record ? acceptCell(record) : undefined;
  if (accept) rows.push(['accept', accept, '-']);
  const lines = [
    `Order ${status.externalId} in program ${status.program}${record ? ` (source ${record.source})` : ''}`,
    '',
    formatTable(['', 'LEDGER', 'PLATFORM'], rows),
  ];
  // Whole, on lines of their own: the part that matters (the platform's reason) comes last.
  if (record?.skipReason) lines.push('', `ledger skip reason: ${cell(record.skipReason, LONG_TEXT)}`);
  else if (record?.lastError) lines.push('', `ledger error: ${cell(record.lastError, LONG_TEXT)}`);
  if (record?.acceptError && !record.acceptedAt)
    lines.push(`ledger accept error: ${cell(record.acceptError, LONG_TEXT)}`);
  const refunds = Object.values(record?.refunds ?? {});
  if (refunds.length > 0) {
    lines.push(
      '',
      'Refunds (ledger):',
      formatTable(
        ['REFUND ID', 'ORIGIN', 'AMOUNT', 'STATUS', 'RESULTING', 'RECEIVED', 'NOTE'],
        refunds.map((r) => [
          r.refundId,
          r.origin,
          r.full ? 'full' : money(r.amount, r.currency ?? currency),
          r.status,
          r.resultingAmount === undefined ? '-' : money(r.resultingAmount, currency),
          r.receivedAt,
          cell([r.reason, r.outcome, netNote(r.amountFrom)].filter(Boolean).join('; '), LONG_TEXT),
        ]),
      ),
    );
  }
  lines.push(...reservedLines(status.externalId, status.unrecordedReservations ?? [], currency));
  lines.push('');
  const stuck = status.differences.some((d) => d.kind === 'stuck_add');
  if (record?.state === 'adding' && !stuck && record.unclearAddAt !== undefined)
    lines.push(...unclearLines(record, record.unclearAddAt, notes));
  else if (record?.state === 'adding' && !stuck)
    lines.push('… a Conversion Add is in flight; look again in a moment');
  else if (record?.shadow)
    lines.push(
      '… recorded in shadow mode: nothing was sent to the platform (connector shadow-report compares)',
    );
  else if (status.differences.length === 0) lines.push('✓ ledger and platform agree');
  for (const d of status.differences) lines.push(`✗ ${d.kind}: ${d.detail}`);
  const waiting = record ? waitingLine(record) : undefined;
  const pending = refunds.filter((r) => r.status === 'pending').length;
  if (waiting) {
    lines.push(waiting);
  } else if (pending > 0) {
    lines.push(
      `… ${pending} refund${pending === 1 ? '' : 's'} pending: being applied, or parked (connector dlq list --external-id ${status.externalId})`,
    );
  }
  return lines.join('\n');
}

/** The refunds `POST /refunds` reserved that the worker has not recorded, when there are any. */
function reservedLines(
  externalId: string,
  reserved: readonly RefundReservation[],
  currency: string | undefined,
): string[] {
  if (reserved.length === 0) return [];
  return [
    '',
    'Refunds reserved, counted against what remains:',
    formatTable(
      ['REFUND ID', 'AMOUNT', 'RESERVED'],
      reserved.map((r) => [r.refundId, reservedAmount(r, currency), r.reservedAt]),
    ),
    '… requested through POST /refunds, not yet recorded by the worker: in the queue, or its request ' +
      'failed — send it again to settle it, or, if finance will not make it, drop it ' +
      `(connector reservations ${externalId} --drop <refundId>)`,
  ];
}

/**
 * Sources with a return window (acceptAfterDays): when the accept job is due, did, or gave up. Nothing
 * for a record the job never accepts (shadowed, refused, skipped: see `awaitsAccept`).
 */
function acceptCell(record: OrderRecord): string | undefined {
  if (record.acceptDueAt === undefined) return undefined;
  const due = `(due ${record.acceptDueAt})`;
  if (record.acceptedAt) return `accepted ${record.acceptedAt} ${due}`;
  if (record.acceptError) return 'not accepted (see the ledger accept error below)';
  return awaitsAccept(record) ? `waiting ${due}` : undefined;
}

/** A refund's net amount worth a look: by the rules of before the ledger kept lines, or approximate. */
function netNote(amountFrom: string | undefined): string | undefined {
  if (amountFrom?.startsWith('current rules'))
    return 'net by the current rules (no order lines in the ledger)';
  if (amountFrom?.startsWith('approximate')) return 'net approximate (gross × order net/gross)';
  return undefined;
}

/**
 * The line for refunds the ledger holds until their order is added: the order has not arrived
 * (`awaiting`), or its add failed (`failed`): its message replayed if it is parked, else the order
 * sent again, applies them. Whether a message is parked the ledger cannot tell (discarded, expired,
 * or a stuck add `reconcile --repair` turned failed, which has none), so both ways are given.
 */
function waitingLine(record: OrderRecord): string | undefined {
  if (record.state !== 'awaiting' && record.state !== 'failed') return undefined;
  const n = Object.values(record.refunds).filter((r) => r.status === 'pending').length;
  if (n === 0) return undefined;
  const what = `… ${n} refund${n === 1 ? '' : 's'} waiting for the order since ${record.awaitingSince ?? record.createdAt}`;
  return record.state === 'awaiting'
    ? `${what}: applied when order ${record.externalId} arrives (if it never does, check the shop sent it)`
    : `${what}: applied once order ${record.externalId} is added: ${failedOrderWayOut(record.externalId)}`;
}

/**
 * An add that got no clear answer: no new add until the platform has shown nothing for the worker's
 * verification window. Only a delivery of the order's message looks it up again; with none left
 * (parked, purged), `reconcile --repair` settles the add once it counts as stuck.
 */
function unclearLines(record: OrderRecord, at: number, notes: StatusNotes): string[] {
  const seconds = notes.verifyWindowSeconds;
  const window =
    seconds === undefined
      ? "the worker's verification window after it (its setting ADD_VERIFY_SECONDS)"
      : `the verification window after it (ADD_VERIFY_SECONDS: ${seconds} s), until ${new Date(at + seconds * 1000).toISOString()}`;
  const parked = `connector dlq list --external-id ${record.externalId}`;
  const repair =
    `connector reconcile --from ${record.createdAt.slice(0, 10)} --repair settles the add from ` +
    `${new Date(addLeftAt(record) + STUCK_ADD_AFTER_MS).toISOString()} (the platform's Conversion info decides)`;
  const head =
    `… the Conversion Add of ${new Date(at).toISOString()} got no clear answer: no new add is sent for the order ` +
    `until the platform has shown nothing for ${window}`;
  if (notes.queuedMessages === 0) {
    return [
      head,
      `… no message in the main queue can retry it now: if the order's message is parked, replay it once its cause is fixed (${parked}); otherwise ${repair}`,
    ];
  }
  return [
    head,
    `… when the order's message comes back from the queue, the worker first asks the platform (Conversion info) whether the add went through; if that message is gone (parked: ${parked}), ${repair}`,
  ];
}

/** The most of a reason printed on its own line; `--json` has it all. */
const LONG_TEXT = 2000;

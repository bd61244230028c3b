import type { Command } from 'commander';
import type { Conversion } from '../shared/affiliate/schemas.ts';
import {
  awaitsAccept,
  ledgerKey,
  type OrderRecord,
  type RefundReservation,
  unrecordedReservations,
} from '../shared/ledger.ts';
import { compareOrder, type Difference, money } from './compare.ts';
import { settingOptions, withContext } from './context.ts';
import { CliError, type CliIo, cell, formatTable, nowOf, terminalJson, writeLine } from './io.ts';

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

/** `connector status <externalId>`: the ledger record and the platform's conversion side by side. */
export function registerStatus(program: Command, io: CliIo): void {
  const command = program
    .command('status')
    .summary("an order's ledger record and its conversion on the platform")
    .description(
      "Shows what the connector recorded for an order (ledger) next to the platform's conversion, with its " +
        'refunds and those POST /refunds reserved that the worker has not recorded yet. Exit code 0 when both agree, 1 when they differ, the order is unknown, or its add was left ' +
        'unfinished long ago (stuck_add: see connector reconcile --repair).',
    )
    .argument('<externalId>', "the shop's order id")
    .option('--source <id>', "look in this source's program")
    .option('--program <id>', 'look in this program (default: every configured source program)')
    .option('--json', 'print JSON');
  settingOptions(command, ['ledgerTable', 'dynamoEndpoint', 'region', 'affiliateBaseUrl']);
  command
    .addHelpText(
      'after',
      `
Examples:
  $ npx connector status 1001
  $ npx connector status 1001 --source shopify --json

The platform token comes from AFFILIATE_TOKEN (or .local-stack.json), else from the Secrets Manager
secret AFFILIATE_TOKEN_SECRET names.`,
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
          writeLine(io.stdout, statusText(found));
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

const dash = (v: unknown) => (v === undefined || v === null || v === '' ? '-' : String(v));

/** The side-by-side view of one order. */
export function statusText(status: OrderStatus): string {
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
    ['skip reason / error', cell(record?.skipReason ?? record?.lastError, 50) || '-', '-'],
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
          cell([r.reason, r.outcome, netNote(r.amountFrom)].filter(Boolean).join('; '), 50),
        ]),
      ),
    );
  }
  lines.push(...reservedLines(status.externalId, status.unrecordedReservations ?? [], currency));
  lines.push('');
  const stuck = status.differences.some((d) => d.kind === 'stuck_add');
  if (record?.state === 'adding' && !stuck && record.unclearAddAt !== undefined)
    lines.push(unclearLine(record.unclearAddAt));
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
      reserved.map((r) => [r.refundId, r.full ? 'full' : money(r.amount, currency), r.reservedAt]),
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
  if (record.acceptError) return `not accepted: ${cell(record.acceptError, 50)}`;
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
 * (`awaiting`), or it is parked in the DLQ (`failed`) and its replay applies them.
 */
function waitingLine(record: OrderRecord): string | undefined {
  if (record.state !== 'awaiting' && record.state !== 'failed') return undefined;
  const n = Object.values(record.refunds).filter((r) => r.status === 'pending').length;
  if (n === 0) return undefined;
  const what = `… ${n} refund${n === 1 ? '' : 's'} waiting for the order since ${record.awaitingSince ?? record.createdAt}`;
  return record.state === 'awaiting'
    ? `${what}: applied when order ${record.externalId} arrives (if it never does, check the shop sent it)`
    : `${what}: applied when the parked order is replayed (connector dlq list --external-id ${record.externalId})`;
}

/** An add that got no clear answer: no new add until the platform has shown nothing for a while. */
function unclearLine(at: number): string {
  return (
    `… the Conversion Add of ${new Date(at).toISOString()} got no clear answer: the worker asks the platform ` +
    'again and sends no new add until it has shown nothing for the verification window (10 minutes by default)'
  );
}

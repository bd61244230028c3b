import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { Command } from 'commander';
import {
  ledgerKey,
  type RefundReservation,
  type RefundReservations,
  refundOf,
  unrecordedReservations,
} from '../shared/ledger.ts';
import type { Ledger, ReservationLedger } from '../shared/ports.ts';
import { messageGroupId } from '../shared/queueing.ts';
import { longestQueueStaySeconds } from '../shared/worker/batch.ts';
import { money } from './compare.ts';
import { awsCall, type CliContext, settingOptions, withContext } from './context.ts';
import { scanQueue } from './dlq-reader.ts';
import {
  CliError,
  type CliIo,
  cell,
  explain,
  formatAge,
  formatTable,
  nowOf,
  terminalJson,
  writeLine,
} from './io.ts';

interface ReservationsOptions {
  source?: string;
  program?: string;
  json?: boolean;
  drop?: string;
  yes?: boolean;
}

/**
 * Youngest a reservation may be to be dropped, whatever the queue: the oldest-message alarm fires at
 * 30 minutes (a stalled worker). A queue that retries a message for longer sets a later floor
 * (`dropFloorOf`). Past it, a refund that was queued is recorded by the worker or parked in the DLQ,
 * unless the worker is stalled (that alarm).
 */
export const DROP_AFTER_MS = 30 * 60_000;

/**
 * Added to the longest a refund can stay in the main queue: its request's own time between the
 * reservation and the queue, the clocks of this machine and AWS, waits the platform asks for beyond
 * the worker's backoffs.
 */
export const DROP_MARGIN_MS = 10 * 60_000;

/** How young a reservation may not be dropped, as the main queue sets it; or why that is not known. */
export type DropFloor =
  | {
      readonly ms: number;
      /** What sets it, for the refusal: the queue's maxReceiveCount and how long it retries. */
      readonly why: string;
    }
  | { readonly unknown: string };

/** `30 minutes`: a floor as the messages and the help say it. */
function minutesText(ms: number): string {
  return `${Math.ceil(ms / 60_000)} minutes`;
}

/**
 * The floor the main queue sets, from its attributes (`RedrivePolicy`, `VisibilityTimeout`): the
 * longest a refund failing transiently stays in it (`longestQueueStaySeconds`, the worker's own
 * backoff schedule) plus `DROP_MARGIN_MS`, and never under `DROP_AFTER_MS`. Unknown without a redrive
 * policy: that is not the connector's main queue (its DLQ has none), and a queue without one keeps a
 * message for its whole retention.
 */
export function dropFloorOf(
  queueUrl: string,
  attributes: Readonly<Partial<Record<string, string>>> | undefined,
): DropFloor {
  const queue = `the queue ${cell(queueUrl, 200)}`;
  const policy = attributes?.['RedrivePolicy'];
  if (!policy) {
    return {
      unknown: `${queue} has no redrive policy: is it the connector's main queue (QUEUE_URL), not its DLQ?`,
    };
  }
  let maxReceiveCount = Number.NaN;
  try {
    // SQS gives the count as a number or as a string, depending on how the policy was set.
    const parsed: unknown = JSON.parse(policy);
    const raw =
      typeof parsed === 'object' && parsed !== null
        ? (parsed as { maxReceiveCount?: unknown }).maxReceiveCount
        : undefined;
    maxReceiveCount = typeof raw === 'number' || typeof raw === 'string' ? Number(raw) : Number.NaN;
  } catch {
    // Not JSON: unknown, below.
  }
  const visibilityTimeoutSeconds = Number(attributes?.['VisibilityTimeout'] ?? Number.NaN);
  if (!Number.isInteger(maxReceiveCount) || maxReceiveCount < 1) {
    return { unknown: `${queue} has a redrive policy without a maxReceiveCount this command can read` };
  }
  if (!Number.isFinite(visibilityTimeoutSeconds) || visibilityTimeoutSeconds < 0) {
    return { unknown: `${queue} did not give its visibility timeout` };
  }
  const stayMs = longestQueueStaySeconds({ maxReceiveCount, visibilityTimeoutSeconds }) * 1000;
  return {
    ms: Math.max(DROP_AFTER_MS, stayMs + DROP_MARGIN_MS),
    why: `the main queue's maxReceiveCount ${maxReceiveCount}: a refund failing transiently may stay in it up to ${minutesText(stayMs)}`,
  };
}

/** What the DLQ holds of one refund. */
export interface ParkedLookup {
  /** The DLQ message carrying the refund, when found. */
  readonly messageId?: string;
  /** Why the DLQ could not tell (some of the order's messages could not be read). */
  readonly unsure?: string;
}

/** What `dropReservation` reads and writes. */
export interface DropPorts {
  readonly ledger: Pick<Ledger, 'get'> & ReservationLedger;
  /** How young a reservation may not be dropped (the main queue's redrive policy); asked once it is found. */
  readonly floor: () => Promise<DropFloor>;
  /** Looks for the refund's message in the dead-letter queue; asked once every other check passed. */
  readonly parked: (
    order: { program: string; externalId: string },
    refundId: string,
  ) => Promise<ParkedLookup>;
}

export interface DropRequest {
  readonly program: string;
  readonly externalId: string;
  readonly refundId: string;
  /** `--yes`: without it nothing is written and the result says what dropping would mean. */
  readonly confirmed: boolean;
  readonly now: Date;
}

export type DropResult =
  | { readonly kind: 'dropped'; readonly reservation: RefundReservation; readonly currency?: string }
  | {
      readonly kind: 'unconfirmed';
      readonly reservation: RefundReservation;
      readonly currency?: string;
      /** The floor it is past. */
      readonly dropAfterMs: number;
    }
  | { readonly kind: 'refused'; readonly message: string; readonly exitCode: 1 | 2 };

const refused = (message: string, exitCode: 1 | 2 = 2): DropResult => ({
  kind: 'refused',
  message,
  exitCode,
});

/**
 * Drops the reservation of `refundId` from its order, only when the connector sees no sign that its
 * refund was queued: not recorded by the worker, reserved longer ago than its main queue may retry
 * it (`ports.floor`; without knowing that, nothing is dropped), not in the DLQ, and confirmed. The
 * write is conditional on the version read: a refund of the order reserved meanwhile leaves
 * everything as it is (exit 1), for the operator to look again.
 */
export async function dropReservation(ports: DropPorts, request: DropRequest): Promise<DropResult> {
  const { program, externalId, refundId } = request;
  const key = ledgerKey(program, externalId);
  const [record, reservations] = await Promise.all([ports.ledger.get(key), ports.ledger.reservationsOf(key)]);
  const recorded = record ? refundOf(record, refundId) : undefined;
  if (recorded) {
    return refused(
      `refund ${refundId} of order ${externalId} is recorded in the ledger (${recorded.status}): its reservation ` +
        'no longer counts, nothing to drop (connector status shows the refund)',
    );
  }
  const unrecorded = unrecordedReservations(record, reservations);
  const reservation = unrecorded.find((r) => r.refundId === refundId);
  if (!reservation || !reservations) {
    const others = unrecorded.map((r) => r.refundId).join(', ');
    return refused(
      `refund ${refundId} is not reserved for order ${externalId} in program ${program} ` +
        `(${others ? `reserved: ${others}` : 'it has no reservation'})`,
    );
  }
  const floor = await ports.floor();
  if ('unknown' in floor) {
    return refused(
      `cannot tell how long the worker may still be retrying refund ${refundId}: ${floor.unknown}. ` +
        'Without that, nothing is dropped: its refund may still be in the queue',
    );
  }
  const age = request.now.getTime() - Date.parse(reservation.reservedAt);
  if (!(age >= floor.ms)) {
    return refused(
      `refund ${refundId} was reserved ${formatAge(age)} ago: its request may still be queueing it, or the worker ` +
        `retrying it (${floor.why}); a reservation is dropped only ${minutesText(floor.ms)} after it was made ` +
        '(look again then)',
    );
  }
  const parked = await ports.parked({ program, externalId }, refundId);
  if (parked.messageId) {
    return refused(
      `refund ${refundId} is parked in the DLQ (message ${parked.messageId}): it was queued, and replaying it ` +
        `applies it. Keep the reservation; settle the refund with connector dlq replay --external-id ${externalId}`,
    );
  }
  if (parked.unsure) return refused(`cannot tell whether refund ${refundId} is in the DLQ: ${parked.unsure}`);
  const currency = record?.currency;
  if (!request.confirmed) {
    return { kind: 'unconfirmed', reservation, dropAfterMs: floor.ms, ...(currency ? { currency } : {}) };
  }

  const next: RefundReservations = {
    ...reservations,
    refunds: reservations.refunds.filter((r) => r.refundId !== refundId),
  };
  if (!(await ports.ledger.saveReservations(next))) {
    return refused(
      `the reservations of order ${externalId} changed while dropping (a refund of it was just requested): ` +
        `nothing dropped; look again (connector reservations ${externalId}) before dropping`,
      1,
    );
  }
  return { kind: 'dropped', reservation, ...(currency ? { currency } : {}) };
}

/** A reservation's amount as the table shows it: `full` for a full refund's. */
export function reservedAmount(reservation: RefundReservation, currency: string | undefined): string {
  return reservation.full ? 'full' : money(reservation.amount, currency);
}

/** What the reservation is, for a sentence: `EUR 10.00` or `full refund`. */
function reservedWhat(reservation: RefundReservation, currency: string | undefined): string {
  return reservation.full ? 'full refund' : money(reservation.amount, currency);
}

/** What dropping means, shown before `--yes` is given. */
function dropWarning(
  externalId: string,
  reservation: RefundReservation,
  currency: string | undefined,
  dropAfterMs: number,
): string {
  const what = reservedWhat(reservation, currency);
  const gives = reservation.full
    ? `lets partial refunds of order ${externalId} be requested again`
    : `gives ${what} back to the other partial refunds of order ${externalId}`;
  const ifQueued = reservation.full
    ? 'it refuses the conversion, and the partial refunds requested meanwhile are not applied.'
    : 'with the refunds requested meanwhile it may take more than is left of the order, and the worker then ' +
      'refuses the whole conversion, which cannot be undone.';
  return [
    `Refund ${reservation.refundId} (${what}, reserved ${reservation.reservedAt}): not recorded by the worker, ` +
      `not in the DLQ, reserved over ${minutesText(dropAfterMs)} ago.`,
    'Most likely its POST /refunds failed (503) and it was never queued.',
    `Dropping its reservation ${gives}: do it only if finance will not make this refund and will not send it again.`,
    `If it was in fact queued (a stalled worker), or finance sends it again, the worker still applies it: ${ifQueued}`,
  ].join('\n');
}

const EXAMPLES = `
Examples:
  $ npx connector reservations 1001
  $ npx connector reservations 1001 --drop RF-1001-2            # shows what dropping means
  $ npx connector reservations 1001 --drop RF-1001-2 --yes

POST /refunds reserves a refund before it queues it, until the worker records the refund: a partial
refund's reservation counts against what is left of the order; a full refund's (AMOUNT "full") leaves
nothing, and further partial refunds of the order are refused. A request answered 503 keeps its reservation:
sending it again (same refund id) settles it. When finance decides not to make that refund, --drop
removes its reservation, with --yes, and only if its refund was never queued as far as the connector
can tell: not recorded by the worker, not in the DLQ (DLQ_URL), and reserved longer ago than the main
queue (QUEUE_URL) may retry it: ${minutesText(DROP_AFTER_MS)}, or, when its redrive maxReceiveCount keeps a failing
message longer, that longest stay plus ${minutesText(DROP_MARGIN_MS)} (read from the queue with GetQueueAttributes). A queued refund is recorded or parked by then, unless the worker is stalled. When
the queue cannot be read, nothing is dropped. A refund that was queued after all is still applied by
the worker, and may then refuse the whole conversion.
Exit codes: 0 listed (an order the ledger does not know says so) or dropped; 1 the reservations
changed meanwhile (nothing dropped: look again);
2 not dropped: unknown or recorded refund id, too recent, the main queue unreadable, in the DLQ, no --yes,
or a missing setting.`;

/** `connector reservations <externalId>`: an order's finance refund reservations, and dropping one. */
export function registerReservations(program: Command, io: CliIo): void {
  const command = program
    .command('reservations')
    .summary("an order's refunds reserved by POST /refunds and not recorded; drop one never queued")
    .description(
      'Lists the refunds POST /refunds reserved for an order that the worker has not recorded: each partial ' +
        'one counts against what is left of the order, a full one leaves nothing for further partial refunds. ' +
        '--drop removes one whose refund finance will not make.',
    )
    .argument('<externalId>', "the shop's order id")
    .option('--source <id>', "look in this source's program")
    .option('--program <id>', 'look in this program (default: every configured source program)')
    .option('--drop <refundId>', 'remove the reservation of this refund (with --yes)')
    .option('--yes', 'confirm the drop: the refund was never queued and will not be sent again')
    .option('--json', 'print JSON (amounts in minor units)');
  settingOptions(command, ['ledgerTable', 'dynamoEndpoint', 'queueUrl', 'dlqUrl', 'sqsEndpoint', 'region']);
  command.addHelpText('after', EXAMPLES).action(async (externalId: string, options: ReservationsOptions) => {
    await withContext(io, options, async (ctx) => {
      if (options.yes && options.drop === undefined) throw new CliError('--yes: only with --drop <refundId>');
      if (options.drop === undefined) await list(ctx, externalId, options);
      else await drop(ctx, externalId, options.drop, options);
    });
  });
}

async function list(ctx: CliContext, externalId: string, options: ReservationsOptions): Promise<void> {
  const { io } = ctx;
  const programs = ctx.programs(options.program, options.source);
  const ledger = ctx.ledger();
  const now = nowOf(io).getTime();
  const found: { program: string; currency?: string; reservation: RefundReservation }[] = [];
  // Neither a record nor reservations in any program: most likely a mistyped order id.
  let known = false;
  for (const program of programs) {
    const key = ledgerKey(program, externalId);
    const [record, reservations] = await Promise.all([ledger.get(key), ledger.reservationsOf(key)]);
    if (record || reservations) known = true;
    for (const reservation of unrecordedReservations(record, reservations))
      found.push({ program, ...(record?.currency ? { currency: record.currency } : {}), reservation });
  }
  if (options.json) {
    const unrecorded = found.map(({ program, currency, reservation }) => ({
      program,
      ...reservation,
      currency: currency ?? null,
    }));
    writeLine(io.stdout, terminalJson({ externalId, programs, known, unrecordedReservations: unrecorded }));
    return;
  }
  const where = `program${programs.length === 1 ? '' : 's'} ${programs.join(', ')}`;
  if (!known) {
    writeLine(
      io.stdout,
      `order ${externalId} is not in the ledger and has no refund reserved (${where}): check the order id (and --source or --program)`,
    );
    return;
  }
  if (found.length === 0) {
    writeLine(
      io.stdout,
      `order ${externalId}: no refund reserved that the worker has not recorded (${where})`,
    );
    return;
  }
  const several = new Set(found.map((f) => f.program)).size > 1;
  writeLine(
    io.stdout,
    [
      `Order ${externalId}: refunds reserved by POST /refunds, not yet recorded by the worker`,
      '',
      formatTable(
        [...(several ? ['PROGRAM'] : []), 'REFUND ID', 'AMOUNT', 'RESERVED', 'AGE'],
        found.map(({ program, currency, reservation: r }) => [
          ...(several ? [program] : []),
          r.refundId,
          reservedAmount(r, currency),
          r.reservedAt,
          formatAge(now - Date.parse(r.reservedAt)),
        ]),
      ),
      '',
      '… each counts against what is left of the order (a full one leaves nothing for partial refunds). In the',
      'queue, or its request failed: sending it again settles it. One finance will not make, never queued',
      '(a 503): --drop <refundId> (see --help)',
    ].join('\n'),
  );
}

async function drop(
  ctx: CliContext,
  externalId: string,
  refundId: string,
  options: ReservationsOptions,
): Promise<void> {
  const { io } = ctx;
  const ledger = ctx.ledger();
  const program = await programOf(ctx, ledger, externalId, refundId, options);
  const result = await dropReservation(
    { ledger, floor: () => queueFloor(ctx), parked: (order, id) => parkedRefund(ctx, order, id) },
    { program, externalId, refundId, confirmed: options.yes === true, now: nowOf(io) },
  );
  if (result.kind === 'refused') throw new CliError(result.message, result.exitCode);
  if (result.kind === 'unconfirmed') {
    writeLine(io.stdout, dropWarning(externalId, result.reservation, result.currency, result.dropAfterMs));
    throw new CliError(`not dropped: pass --yes to drop the reservation of refund ${refundId}`);
  }
  const { reservation, currency } = result;
  if (options.json) {
    writeLine(io.stdout, terminalJson({ dropped: { program, externalId, ...reservation } }));
    return;
  }
  writeLine(
    io.stdout,
    `✓ dropped the reservation of refund ${refundId} (${reservedWhat(reservation, currency)}, reserved ` +
      `${reservation.reservedAt}): it no longer ${reservation.full ? 'holds back partial refunds of' : 'counts against what is left of'} order ${externalId}`,
  );
}

/** The program whose ledger holds the refund id for the order: the one given, else the one that knows it. */
async function programOf(
  ctx: CliContext,
  ledger: Pick<Ledger, 'get'> & ReservationLedger,
  externalId: string,
  refundId: string,
  options: ReservationsOptions,
): Promise<string> {
  const programs = ctx.programs(options.program, options.source);
  if (programs.length === 1) return programs[0] as string;
  const holding: string[] = [];
  for (const program of programs) {
    const key = ledgerKey(program, externalId);
    const [record, reservations] = await Promise.all([ledger.get(key), ledger.reservationsOf(key)]);
    const known =
      (record && refundOf(record, refundId)) || reservations?.refunds.some((r) => r.refundId === refundId);
    if (known) holding.push(program);
  }
  if (holding.length > 1) {
    throw new CliError(
      `refund ${refundId} of order ${externalId} is known in programs ${holding.join(', ')}: give --source or --program`,
    );
  }
  return holding[0] ?? (programs[0] as string);
}

/** The floor the main queue sets (`dropFloorOf`), read with GetQueueAttributes; unknown when it cannot be read. */
async function queueFloor(ctx: CliContext): Promise<DropFloor> {
  const url = ctx.require('queueUrl');
  try {
    const out = await ctx.sqs().send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ['RedrivePolicy', 'VisibilityTimeout'],
      }),
      awsCall(),
    );
    return dropFloorOf(url, out.Attributes);
  } catch (error) {
    return {
      unknown:
        `the main queue ${cell(url, 200)} could not be read (${explain(error)}): check QUEUE_URL or --queue-url, ` +
        'the region or endpoint, and sqs:GetQueueAttributes on it',
    };
  }
}

/**
 * The refund's message in the DLQ, read without consuming it (as `dlq list`). A FIFO DLQ hands out
 * one message of an order at a time: when one of this order's is there and others could not be
 * read, the refund may be behind it, and the lookup cannot tell.
 */
async function parkedRefund(
  ctx: CliContext,
  order: { program: string; externalId: string },
  refundId: string,
): Promise<ParkedLookup> {
  const group = messageGroupId(order.program, order.externalId);
  const { entries, hidden } = await scanQueue(ctx.sqs(), ctx.require('dlqUrl'));
  const ofOrder = entries.filter((e) =>
    e.groupId === undefined ? e.externalId === order.externalId : e.groupId === group,
  );
  const found = ofOrder.find((e) => e.eventType === 'OrderRefunded' && refundIdOf(e.body) === refundId);
  if (found) return { messageId: found.messageId };
  if (ofOrder.length > 0 && hidden > 0) {
    return {
      unsure: `the order has messages there and ${hidden} could not be read (behind another of the same order); replay or look at them first (connector dlq list --external-id ${order.externalId})`,
    };
  }
  return {};
}

function refundIdOf(body: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body);
    const id =
      typeof parsed === 'object' && parsed !== null ? (parsed as { refundId?: unknown }).refundId : undefined;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

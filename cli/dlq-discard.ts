import {
  confirmSends,
  countedRefunds,
  ledgerKey,
  type OrderRecord,
  type RefundRecord,
  refundOf,
} from '../shared/ledger.ts';
import type { Ledger } from '../shared/ports.ts';
import { messageGroupId } from '../shared/queueing.ts';
import { CANCELLATION_REFUND_ID } from '../shared/worker/flow.ts';
import type { CliContext } from './context.ts';
import { deleteMessage, queueName, release, scanQueue, takeMessage } from './dlq-reader.ts';
import { ask, CliError, cell, explain, nowOf, terminalJson, writeLine } from './io.ts';

/**
 * `connector dlq discard <messageId>`: deletes one DLQ message, the one an operator has settled by
 * hand as its reason asked ("… then discard it"). A refund or cancellation the ledger still holds
 * `pending` on an added conversion is recorded as settled by hand (`manual`, see `RefundStatus`)
 * first: left pending, nothing would ever settle it once its message is gone, and the accept job
 * would hold the conversion for ever (AcceptBacklog), `status` would call it in flight. So are, for
 * an order's message, the refunds held for that order which only its message applies (`heldRefunds`).
 */

/** What `planDiscard` reads of a DLQ message (a `DlqEntry` is one). */
export interface DiscardedMessage {
  readonly groupId?: string;
  /** The shop's order id, as the event carries it (without the source's `externalIdPrefix`). */
  readonly externalId?: string;
  /** The source the event came in on. */
  readonly source?: string;
  readonly eventType?: string;
  readonly body: string;
}

/** Where `planDiscard` looks; asked only for an order, refund or cancellation message. */
export interface DiscardPorts {
  readonly ledger: () => Pick<Ledger, 'get'>;
  /** The programs the order may be in (`--program`, `--source`, else every configured source's). */
  readonly programs: () => readonly string[];
  /**
   * The configured source a message came in on: its program's ledger holds the order under the
   * source's `externalIdPrefix` and the shop's id, as does its message group.
   */
  readonly source?: (
    id: string,
  ) => { readonly program: string; readonly externalIdPrefix?: string | undefined } | undefined;
}

export interface SettleTarget {
  readonly key: string;
  readonly refundId: string;
}

/** The refunds held for an order that discarding its message settles (`settleHeldByHand`). */
export interface SettleHeldTarget {
  readonly key: string;
  readonly refundIds: readonly string[];
}

export type DiscardPlan =
  | ({
      readonly kind: 'settle';
      readonly program: string;
      readonly externalId: string;
      readonly refund: RefundRecord;
    } & SettleTarget)
  /**
   * An order's message: the refunds held for it that only it applies are settled; `stayPending`
   * names the order's pending refunds that their own messages still apply (left as they are).
   */
  | ({
      readonly kind: 'settleHeld';
      readonly program: string;
      readonly externalId: string;
      readonly stayPending: readonly string[];
    } & SettleHeldTarget)
  /** The message is only deleted; `why` says why the ledger is left as it is. */
  | { readonly kind: 'delete'; readonly why: string };

export type SettleResult =
  | { readonly kind: 'settled'; readonly record: OrderRecord; readonly refund: RefundRecord }
  | { readonly kind: 'unchanged'; readonly why: string }
  /** The record kept changing under the write: nothing written. */
  | { readonly kind: 'conflict' };

export type SettleHeldResult =
  | { readonly kind: 'settled'; readonly record: OrderRecord; readonly refunds: readonly RefundRecord[] }
  | { readonly kind: 'unchanged'; readonly why: string }
  | { readonly kind: 'conflict' };

/** How long the message is held (invisible) between being taken and being deleted. */
const HOLD_SECONDS = 30;
const WRITE_ROUNDS = 3;

/** `refund r-1`, or `the cancellation`: ids are shop text, shown printable. */
function refundName(refundId: string): string {
  return refundId === CANCELLATION_REFUND_ID ? 'the cancellation' : `refund ${cell(refundId, 80)}`;
}

/** `refund r-1, refund r-2`; the verb agrees (`stays` or `stay`). */
function refundNames(refundIds: readonly string[]): string {
  return refundIds.map(refundName).join(', ');
}

function stays(refundIds: readonly string[]): string {
  return refundIds.length === 1 ? 'stays' : 'stay';
}

/** The ledger id of the refund a message carries: its `refundId`, or the cancellation's. */
function refundIdOf(message: DiscardedMessage): string | undefined {
  if (message.eventType === 'OrderCancelled') return CANCELLATION_REFUND_ID;
  try {
    const parsed: unknown = JSON.parse(message.body);
    const id =
      typeof parsed === 'object' && parsed !== null ? (parsed as { refundId?: unknown }).refundId : undefined;
    return typeof id === 'string' && id !== '' ? id : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Why the refund is not for `discard` to settle, or undefined when it is: pending on an added
 * conversion. Held for an order not added yet (awaiting, failed, shadowed), it is the order's arrival
 * or replay that applies it, so it stays pending.
 */
function whyNotSettled(record: OrderRecord, refundId: string): string | undefined {
  const order = `order ${cell(record.externalId, 80)}`;
  const refund = refundOf(record, refundId);
  if (!refund) return `the ledger has no ${refundName(refundId)} of ${order}`;
  if (refund.status !== 'pending') {
    return `${refundName(refundId)} of ${order} is already ${refund.status} in the ledger: nothing waits for it`;
  }
  if (record.state === 'awaiting' || record.state === 'failed' || record.state === 'shadowed') {
    return `${refundName(refundId)} is held until ${order} is added (ledger state ${record.state}): the order's arrival or replay applies it`;
  }
  if (record.state !== 'added') {
    return `${refundName(refundId)} of ${order} stays pending: the ledger state is ${record.state}`;
  }
  return undefined;
}

/**
 * The pending refunds of an added conversion, split by who applies them. `held`: only the order's
 * own message does; `own`: a message of the refund's own still does.
 *
 * The split is the refund's `unconfirmedSend` mark. `refundOrder` writes it on a refund it records
 * pending on an added conversion, in that first write, and it goes only in the write that records
 * the refund no longer pending (applied, or late; `confirmSends` clears no pending refund's). So a
 * pending refund with the mark has a message of its own that a worker took and has not finished:
 * in flight, waiting for SQS to deliver it again, or parked in the DLQ, where its discard settles it.
 * A refund that came before its order (state `awaiting`, `failed` or `shadowed`, or a shadow
 * source's) is recorded by `heldEntry`/`recordShadowRefund` without the mark and its message ends
 * there (`refund_waiting`, `refund_shadowed`): once the order is added, its add, adoption or retry
 * applies it, and when that message is parked (an update the legacy interface cannot make, a 422)
 * nothing else ever will. Edges where an unmarked one has a message too, which this reads as held:
 * a held refund's message parked anyway (a shadow source's order whose platform conversion is in
 * another currency), or delivered again by its shop once the order is added, and records written
 * before the mark existed. Settling it here is then what that message's own discard would do; a
 * later delivery of it is a duplicate.
 */
function heldRefunds(record: OrderRecord): { held: RefundRecord[]; own: RefundRecord[] } {
  const pending = Object.values(record.refunds).filter((r) => r.status === 'pending');
  return {
    held: pending.filter((r) => r.unconfirmedSend !== true),
    own: pending.filter((r) => r.unconfirmedSend === true),
  };
}

/** Why discarding the order's message settles nothing, or undefined when it settles `held`. */
function whyNoneHeld(record: OrderRecord): string | undefined {
  const order = `order ${cell(record.externalId, 80)}`;
  const pending = Object.values(record.refunds)
    .filter((r) => r.status === 'pending')
    .map((r) => r.refundId);
  if (record.state !== 'added') {
    if (pending.length === 0) {
      return `${order} is ${record.state} in the ledger, with no refund pending: nothing to settle`;
    }
    if (record.state === 'awaiting' || record.state === 'failed' || record.state === 'shadowed') {
      return `${refundNames(pending)} ${stays(pending)} held until ${order} is added (ledger state ${record.state}): the order's next delivery or replay applies ${pending.length === 1 ? 'it' : 'them'}`;
    }
    return `${refundNames(pending)} of ${order} ${stays(pending)} pending: the ledger state is ${record.state}`;
  }
  const { held, own } = heldRefunds(record);
  if (held.length > 0) return undefined;
  if (own.length === 0) return `${order} has no refund pending in the ledger: nothing to settle`;
  return ownPending(
    order,
    own.map((r) => r.refundId),
  );
}

/** What is said of the order's refunds that their own messages apply. */
function ownPending(order: string, refundIds: readonly string[]): string {
  const where = '(in the queue, or parked in the DLQ)';
  const whose =
    refundIds.length === 1
      ? `its own message ${where} applies it`
      : `each has its own message ${where} that applies it`;
  return `${refundNames(refundIds)} of ${order} ${stays(refundIds)} pending: ${whose}, or settles it when discarded`;
}

/** Which program's ledger holds the message's order, and the order's ledger id there. */
function orderOf(ports: DiscardPorts, message: DiscardedMessage & { readonly externalId: string }) {
  // The order's ledger id: the shop's id after its source's prefix (shared/worker/process-event.ts).
  const from = message.source === undefined ? undefined : ports.source?.(message.source);
  const externalId = `${from?.externalIdPrefix ?? ''}${message.externalId}`;
  const programs = ports.programs();
  const fitting =
    message.groupId === undefined
      ? programs
      : programs.filter((p) => messageGroupId(p, externalId) === message.groupId);
  const [program, ...more] = fitting;
  if (program === undefined || more.length > 0) {
    const why =
      program === undefined
        ? `its message group is not the order's in ${programs.length === 1 ? 'program' : 'programs'} ${programs.join(', ')}`
        : `it may be in programs ${fitting.join(', ')}`;
    throw new CliError(
      `cannot tell which program's ledger holds order ${cell(externalId, 80)} (${why}): pass --program or --source; nothing discarded`,
    );
  }
  return { program, externalId, key: ledgerKey(program, externalId) };
}

/**
 * What discarding `message` does to the ledger, read without writing: `settle` for a refund or
 * cancellation the ledger holds pending on an added conversion; `settleHeld` for an order's message
 * whose added conversion has refunds pending that only that message applies (`heldRefunds`); else
 * `delete` with the reason. The order's program is the one whose message group (program + order)
 * is the message's.
 *
 * @throws CliError (exit 2) when no configured program, or more than one, fits the message
 */
export async function planDiscard(ports: DiscardPorts, message: DiscardedMessage): Promise<DiscardPlan> {
  const type = message.eventType ?? 'unreadable';
  if (type === 'OrderPlaced') return planOrder(ports, message);
  if (type !== 'OrderRefunded' && type !== 'OrderCancelled') {
    return {
      kind: 'delete',
      why: `${cell(type, 40)} is no order, refund or cancellation: the ledger has nothing to settle`,
    };
  }
  const refundId = refundIdOf(message);
  if (message.externalId === undefined || refundId === undefined) {
    return { kind: 'delete', why: 'the message names no order or refund: the ledger has nothing to settle' };
  }
  const { program, externalId, key } = orderOf(ports, { ...message, externalId: message.externalId });
  const record = await ports.ledger().get(key);
  if (!record) {
    return {
      kind: 'delete',
      why: `the ledger has no record of order ${cell(externalId, 80)} in program ${program}`,
    };
  }
  const why = whyNotSettled(record, refundId);
  const refund = refundOf(record, refundId);
  if (why !== undefined || !refund) return { kind: 'delete', why: why ?? 'no refund' };
  return { kind: 'settle', program, externalId, key, refundId, refund };
}

async function planOrder(ports: DiscardPorts, message: DiscardedMessage): Promise<DiscardPlan> {
  if (message.externalId === undefined) {
    return { kind: 'delete', why: 'the message names no order: the ledger has nothing to settle' };
  }
  const { program, externalId, key } = orderOf(ports, { ...message, externalId: message.externalId });
  const record = await ports.ledger().get(key);
  if (!record) {
    return {
      kind: 'delete',
      why: `the ledger has no record of order ${cell(externalId, 80)} in program ${program}`,
    };
  }
  const why = whyNoneHeld(record);
  if (why !== undefined) return { kind: 'delete', why };
  const { held, own } = heldRefunds(record);
  return {
    kind: 'settleHeld',
    program,
    externalId,
    key,
    refundIds: held.map((r) => r.refundId),
    stayPending: own.map((r) => r.refundId),
  };
}

/** Status `manual`, with when and how in `outcome`. */
function markManual(refund: RefundRecord, iso: string): void {
  refund.status = 'manual';
  refund.appliedAt = iso;
  refund.outcome = `settled by hand by an operator (connector dlq discard, ${iso})`;
}

/**
 * Whether the refunds done with (applied, or settled by hand) refund the added order in full: a full
 * refund or the cancellation among them, or their amounts reaching the order's. The worker refuses
 * the conversion then, and so has the operator who settled such a refund by hand; a refund still
 * pending is its own worker's to apply.
 */
function refundedInFull(record: OrderRecord): boolean {
  const done = countedRefunds(record).filter((r) => r.status !== 'pending');
  if (done.some((r) => r.full)) return true;
  return done.length > 0 && done.reduce((sum, r) => sum + r.amount, 0) >= record.originalAmount;
}

/**
 * Records refunds as settled by hand (status `manual`, with when and how in `outcome`), the ones
 * `pick` chooses on the record as read, or why none. The write is conditional on the version read;
 * when another writer got there first the record is read again and `pick` judges again, so a refund
 * a worker applied meanwhile stays applied. The marks of sends left unconfirmed are cleared
 * (`confirmSends`): the operator's settling is what the platform holds now, and a later delivery
 * repeating a send from before it would set the ledger's amount from before it. An order the
 * settling refunds in full is recorded `refused`, as the worker records the conversion it refuses:
 * left `added`, the accept job would try to accept the conversion the operator refused, and park it.
 */
async function settleRecord(
  ledger: Pick<Ledger, 'get' | 'update'>,
  key: string,
  at: Date,
  pick: (record: OrderRecord) => { readonly why: string } | { readonly refunds: RefundRecord[] },
): Promise<SettleHeldResult> {
  const iso = at.toISOString();
  for (let round = 0; round < WRITE_ROUNDS; round++) {
    const record = await ledger.get(key);
    if (!record) return { kind: 'unchanged', why: 'the ledger no longer has a record of the order' };
    const picked = pick(record);
    if ('why' in picked) return { kind: 'unchanged', why: picked.why };
    for (const refund of picked.refunds) markManual(refund, iso);
    if (!Object.values(record.refunds).some((r) => r.status === 'pending')) record.awaitingSince = undefined;
    if (record.state === 'added' && refundedInFull(record)) record.state = 'refused';
    confirmSends(record);
    if (await ledger.update(record)) return { kind: 'settled', record, refunds: picked.refunds };
  }
  return { kind: 'conflict' };
}

/** Records the refund `target` names as settled by hand (`settleRecord`), while it is pending. */
export async function settleByHand(
  ledger: Pick<Ledger, 'get' | 'update'>,
  target: SettleTarget,
  at: Date,
): Promise<SettleResult> {
  const settled = await settleRecord(ledger, target.key, at, (record) => {
    const why = whyNotSettled(record, target.refundId);
    const refund = refundOf(record, target.refundId);
    return why !== undefined || !refund ? { why: why ?? 'no refund' } : { refunds: [refund] };
  });
  if (settled.kind !== 'settled') return settled;
  return { kind: 'settled', record: settled.record, refund: settled.refunds[0] as RefundRecord };
}

/**
 * Records the refunds `target` names that are still held for the order (`heldRefunds`: pending on
 * the added conversion, applied only by the order's own message) as settled by hand
 * (`settleRecord`): one a worker applied meanwhile stays applied, one that now has a message of its
 * own stays pending. Clearing the marks takes the order's own too, which its parked message set and
 * that a new delivery of the order would repeat.
 */
export async function settleHeldByHand(
  ledger: Pick<Ledger, 'get' | 'update'>,
  target: SettleHeldTarget,
  at: Date,
): Promise<SettleHeldResult> {
  return settleRecord(ledger, target.key, at, (record) => {
    const why = record.state === 'added' ? undefined : whyNoneHeld(record);
    if (why !== undefined) return { why };
    const refunds = heldRefunds(record).held.filter((r) => target.refundIds.includes(r.refundId));
    if (refunds.length > 0) return { refunds };
    return {
      why: `order ${cell(record.externalId, 80)} has no refund held for it pending in the ledger any more: nothing waits for it`,
    };
  });
}

export interface DiscardOptions {
  readonly yes?: boolean;
  readonly json?: boolean;
  readonly program?: string;
  readonly source?: string;
}

/** The refund ids a settling wrote `manual`. */
function settledIds(settled: Extract<SettleResult | SettleHeldResult, { kind: 'settled' }>): string[] {
  return 'refund' in settled ? [settled.refund.refundId] : settled.refunds.map((r) => r.refundId);
}

function them(refundIds: readonly string[]): string {
  return refundIds.length === 1 ? 'it' : 'them';
}

/** The refunds still pending in the record a settling wrote: their own messages apply them. */
function stillPending(record: OrderRecord): string[] {
  return Object.values(record.refunds)
    .filter((r) => r.status === 'pending')
    .map((r) => r.refundId);
}

/** `refund r-1 of order 1001 (held for the order: only this message applies it)`. */
function heldText(plan: Extract<DiscardPlan, { kind: 'settleHeld' }>): string {
  return (
    `${refundNames(plan.refundIds)} of order ${cell(plan.externalId, 80)} (held for the order: only this ` +
    `message applies ${them(plan.refundIds)})`
  );
}

/** The prompt's note on the order's refunds that their own messages apply, if any. */
function stayText(plan: Extract<DiscardPlan, { kind: 'settleHeld' }>): string {
  if (plan.stayPending.length === 0) return '';
  return ` Not settled here: ${ownPending(`order ${cell(plan.externalId, 80)}`, plan.stayPending)}.`;
}

function notReachable(messageId: string, hidden: number): string {
  const id = cell(messageId, 100);
  if (hidden === 0) return `message ${id} is not in the DLQ`;
  return (
    `message ${id} is not in the DLQ, or not reachable now: ${hidden} message${hidden === 1 ? ' is' : 's are'} ` +
    "not shown (behind an earlier message of the same order, as a FIFO queue hands out one order's messages " +
    'in turn, or being read elsewhere); discard or replay the ones ahead of it first (dlq list), then run this again'
  );
}

/** The `dlq discard` command: find, confirm, hold the message, settle the ledger, then delete. */
export async function discardCommand(
  ctx: CliContext,
  messageId: string,
  options: DiscardOptions,
): Promise<void> {
  const { io } = ctx;
  const dlqUrl = ctx.require('dlqUrl');
  const name = queueName(dlqUrl);
  const { entries, hidden } = await scanQueue(ctx.sqs(), dlqUrl);
  const entry = entries.find((e) => e.messageId === messageId);
  if (!entry) throw new CliError(notReachable(messageId, hidden), 1);
  const plan = await planDiscard(
    {
      ledger: () => ctx.ledger(),
      programs: () => ctx.programs(options.program, options.source),
      source: (id) => ctx.sources().find((s) => s.id === id),
    },
    entry,
  );
  const what = `${entry.eventType ?? '?'} of order ${cell(entry.externalId ?? '?', 80)}`;

  if (!options.yes) {
    const ledgerText =
      plan.kind === 'settle'
        ? `The ledger records ${refundName(plan.refundId)} of order ${cell(plan.externalId, 80)} as settled by hand ` +
          '(status manual): the connector will never apply it, and later refunds of the order count it as made. ' +
          'Settle it on the platform first.'
        : plan.kind === 'settleHeld'
          ? `The ledger records ${heldText(plan)} as settled by hand (status manual): the connector will never ` +
            `apply ${them(plan.refundIds)}, and later refunds of the order count ${them(plan.refundIds)} as made. ` +
            `Settle ${them(plan.refundIds)} on the platform first.${stayText(plan)}`
          : `The ledger is not changed: ${plan.why}.`;
    const answer = await ask(
      io,
      [
        `Message ${cell(messageId, 100)}: ${what}, ${entry.failureClass}: ${cell(entry.reason, 200)}`,
        `It is deleted from ${name} for good. ${ledgerText}`,
        'Discard it? [y/N] ',
      ].join('\n'),
    );
    if (answer === undefined)
      throw new CliError('no confirmation could be read: pass --yes to discard without a prompt');
    if (!/^y(es)?$/i.test(answer.trim())) throw new CliError('not confirmed; nothing discarded', 1);
  }

  const taken = await takeMessage(ctx.sqs(), dlqUrl, messageId, HOLD_SECONDS);
  if (!taken) {
    throw new CliError(
      `message ${cell(messageId, 100)} is no longer reachable (replayed or discarded meanwhile, or being read elsewhere): nothing discarded`,
      1,
    );
  }
  // The ledger first, then the message: killed in between, the message is still there and a second
  // discard only deletes it; the other way round would leave a pending refund no message settles.
  let settled: SettleResult | SettleHeldResult | undefined;
  if (plan.kind !== 'delete') {
    try {
      settled =
        plan.kind === 'settle'
          ? await settleByHand(ctx.ledger(), plan, nowOf(io))
          : await settleHeldByHand(ctx.ledger(), plan, nowOf(io));
    } catch (error) {
      await release(ctx.sqs(), dlqUrl, [taken.receiptHandle]);
      throw error;
    }
    if (settled.kind === 'conflict') {
      await release(ctx.sqs(), dlqUrl, [taken.receiptHandle]);
      throw new CliError(
        `the ledger record of order ${cell(plan.externalId, 80)} kept changing (workers are applying its events): nothing discarded; look again (connector status ${cell(plan.externalId, 80)}), then run this again`,
        1,
      );
    }
  }
  try {
    await deleteMessage(ctx.sqs(), dlqUrl, taken.receiptHandle);
  } catch (error) {
    const done =
      settled?.kind === 'settled'
        ? `${refundNames(settledIds(settled))} ${settledIds(settled).length === 1 ? 'is' : 'are'} recorded as settled by hand, but `
        : '';
    throw new CliError(
      `${done}message ${cell(messageId, 100)} is still in the DLQ (delete failed: ${explain(error)}): run dlq discard again`,
      1,
    );
  }

  const unchanged =
    settled?.kind === 'unchanged' ? settled.why : plan.kind === 'delete' ? plan.why : undefined;
  if (options.json) {
    writeLine(
      io.stdout,
      terminalJson({
        discarded: {
          messageId,
          externalId: entry.externalId ?? null,
          eventType: entry.eventType ?? null,
          source: entry.source ?? null,
          failureClass: entry.failureClass,
          reason: entry.reason,
        },
        ledger:
          settled?.kind === 'settled' && plan.kind !== 'delete'
            ? {
                settled: true,
                program: plan.program,
                externalId: plan.externalId,
                ...('refund' in settled ? { refundId: settled.refund.refundId } : {}),
                refundIds: settledIds(settled),
                status: 'manual',
                outcome: ('refund' in settled ? settled.refund : settled.refunds[0])?.outcome ?? null,
                ...(plan.kind === 'settleHeld' ? { stillPending: stillPending(settled.record) } : {}),
              }
            : { settled: false, why: unchanged ?? null },
      }),
    );
    return;
  }
  writeLine(io.stdout, `discarded ${cell(messageId, 100)} (${what}) from ${name}`);
  if (settled?.kind === 'settled' && plan.kind === 'settle') {
    writeLine(
      io.stdout,
      `${refundName(plan.refundId)} of order ${cell(plan.externalId, 80)}: recorded as settled by hand in the ledger ` +
        '(status manual); the worker will not send it, nothing waits for it any more, and later refunds of the order count it',
    );
  } else if (settled?.kind === 'settled' && plan.kind === 'settleHeld') {
    const ids = settledIds(settled);
    writeLine(
      io.stdout,
      `${refundNames(ids)} of order ${cell(plan.externalId, 80)}: recorded as settled by hand in the ledger (status manual), ` +
        `held for the order and applied only by its message; the worker will not send ${them(ids)}, nothing waits ` +
        `for ${them(ids)} any more, and later refunds of the order count ${them(ids)}`,
    );
    const pending = stillPending(settled.record);
    if (pending.length > 0) writeLine(io.stdout, ownPending(`order ${cell(plan.externalId, 80)}`, pending));
  } else {
    writeLine(io.stdout, `ledger unchanged: ${unchanged ?? 'nothing to settle'}`);
  }
}

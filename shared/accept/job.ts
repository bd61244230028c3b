import type { SourceConfig } from '../config/sources.ts';
import { describeError, failureClassOf, isConnectorError, PermanentError } from '../errors.ts';
import { awaitsAccept, confirmSends, type OrderRecord } from '../ledger.ts';
import { formatMinor } from '../money.ts';
import type {
  AcceptIndex,
  CallOptions,
  ConversionBackend,
  FailureQueue,
  Ledger,
  PlatformConversion,
} from '../ports.ts';
import { messageGroupId } from '../queueing.ts';
import { DAY_MS } from './due.ts';

/**
 * The accept job (issue 17, part 2): accepts on the platform the conversions whose order is past its
 * source's return window (`acceptAfterDays`), once each. The scheduled function (functions/accept.ts)
 * and `connector accept` both run it.
 *
 * Exactly once: the job finds due records through the ledger's sparse index, reads each record again
 * (the index lags), takes a lease on it with a conditional write, calls accept, and writes
 * `acceptedAt`, which takes the record out of the index. A run that died mid-call leaves a lease that
 * expires; the next run accepts again, which the platform may answer as a no-op or refuse (the legacy
 * API refuses it, the sandbox on both; then the conversion is looked up: accepted already is success;
 * a lookup that fails transiently leaves the order to the next run, not parked).
 *
 * Refunds: a record with a refund pending (recorded by the worker and not applied yet) is held, and
 * a refused one has left the index. A refund still in the queue, not yet recorded, is invisible here:
 * the worker records every refund in the ledger before it calls the platform, and the lease write
 * is conditional on the version the job read, so a refund recorded between the read and the lease
 * makes the job skip the order. What remains is a refund that reaches the worker after the accept
 * call: a full refund still refuses the accepted conversion (it locks only later); a partial one
 * cannot update an accepted conversion's amount and is recorded as a late refund for finance.
 *
 * Sends left unconfirmed: a refund recorded applied by another worker while its own worker's call
 * is unconfirmed (`RefundRecord.unconfirmedSend`; the order's own message, `OrderRecord.
 * unconfirmedSend`) means that worker died after a call whose stale target may have reached the
 * platform last, and only its message's next delivery sends the ledger's target again. Accepting
 * first would fix the stale amount for good, so such an order is held while the refunds were
 * recorded applied less than `UNCONFIRMED_SETTLE_MS` ago (that worker may still be sending), then
 * looked up: accepted when the platform shows the ledger's amount (the lease write clears the marks,
 * so a late delivery sends nothing to the accepted conversion), else held, saying what each shows.
 * Held for ever only while the platform stays off: a message parked in the DLQ is replayed, or the
 * amount set by hand.
 */

/** What the job needs; the functions and the CLI wire it, tests hand in fakes or the local stack. */
export interface AcceptDeps {
  readonly ledger: Pick<Ledger, 'get' | 'update'> & AcceptIndex;
  readonly sources: ReadonlyMap<string, SourceConfig>;
  readonly backendFor: (source: SourceConfig) => ConversionBackend;
  /** Where a conversion the platform will not accept is parked, with the reason. */
  readonly failures: Pick<FailureQueue, 'park'>;
  /** Epoch ms. */
  readonly now: () => number;
  /** How long an accept call holds its lease; it must outlast the call (the client's timeout). */
  readonly leaseMs: number;
}

export interface AcceptOptions {
  /**
   * At most this many orders taken to the platform in one run (an accept call, or a lookup of an
   * unconfirmed send that then holds the order); the rest waits for the next run.
   */
  readonly limit: number;
  /**
   * Accept orders older than this instead of each source's `acceptAfterDays` (the CLI's
   * `--older-than`), still only among sources that have a return window.
   */
  readonly olderThanMs?: number;
  /** Only these sources (default: every source with `acceptAfterDays`). */
  readonly sources?: readonly string[];
  /** Read and decide, change nothing. */
  readonly dryRun?: boolean;
  /** Epoch ms after which no accept call starts (the Lambda's remaining time). */
  readonly deadline?: number;
  /** Told each order's outcome as it happens (the CLI's progress). */
  readonly onItem?: (item: AcceptItem) => void;
}

export type AcceptResult =
  | 'accepted'
  | 'would_accept'
  /** Not accepted this run: a refund pending, an accept in flight, or the record changed meanwhile. */
  | 'held'
  /** The platform will not accept it (refused, locked): parked in the DLQ with the reason. */
  | 'failed'
  /** A transient failure: the next run tries again. */
  | 'retry';

export interface AcceptItem {
  readonly source: string;
  readonly externalId: string;
  readonly conversionId?: string;
  readonly acceptDueAt?: string;
  readonly result: AcceptResult;
  readonly detail?: string;
}

export interface AcceptSummary {
  readonly accepted: number;
  /** Parked (permanent) and transient failures alike: the alarm's metric. */
  readonly failed: number;
  readonly held: number;
  /** Due conversions not accepted by this run (held, failed transiently, or past the run's bound). */
  readonly dueLeft: number;
  readonly items: readonly AcceptItem[];
}

/** Index reads per page: keys only, so a page is small whatever the records hold. */
const PAGE_SIZE = 100;
const COUNT_PAGE_SIZE = 1000;

/**
 * How long after its refunds were last recorded applied an order whose send is unconfirmed stays held
 * whatever the platform shows: the worker that left the mark may still be sending until its
 * invocation ends (the worker function times out after 30 s; its message comes back after the
 * queue's visibility timeout, 3 minutes). Past this it is gone. test/infra/accept-stack.test.ts checks
 * that the stack keeps both well inside it.
 */
export const UNCONFIRMED_SETTLE_MS = 15 * 60_000;

/** The event type the DLQ shows for a conversion the platform would not accept. */
export const ACCEPT_EVENT_TYPE = 'ConversionAccept';

/** Runs the job over every source with a return window. Never throws for one order's failure. */
export async function runAccept(deps: AcceptDeps, options: AcceptOptions): Promise<AcceptSummary> {
  const items: AcceptItem[] = [];
  const counts = { accepted: 0, failed: 0, held: 0, dueLeft: 0 };
  let calls = 0;
  const report = (item: AcceptItem) => {
    items.push(item);
    if (item.result === 'accepted') counts.accepted++;
    else if (item.result === 'failed' || item.result === 'retry') counts.failed++;
    else if (item.result === 'held') counts.held++;
    if (item.result === 'held' || item.result === 'retry' || item.result === 'would_accept') counts.dueLeft++;
    options.onItem?.(item);
  };
  const stopped = () =>
    calls >= options.limit || (options.deadline !== undefined && deps.now() >= options.deadline);

  for (const source of deps.sources.values()) {
    if (source.acceptAfterDays === undefined) continue;
    if (options.sources && !options.sources.includes(source.id)) continue;
    const dueBy = new Date(
      options.olderThanMs === undefined
        ? deps.now()
        : deps.now() - options.olderThanMs + source.acceptAfterDays * DAY_MS,
    ).toISOString();
    let cursor: string | undefined;
    do {
      const page = await deps.ledger.dueForAccept(source.id, dueBy, {
        // Past the bound the keys are only counted: larger pages, fewer reads.
        limit: stopped() ? COUNT_PAGE_SIZE : PAGE_SIZE,
        ...(cursor ? { cursor } : {}),
      });
      for (const key of page.keys) {
        // Past the run's bound the rest is only counted: the next run takes it.
        if (stopped()) {
          counts.dueLeft++;
          continue;
        }
        let lookedUp = false;
        const item = await acceptOne(deps, options, source, key, dueBy, () => {
          lookedUp = true;
        });
        if (item === undefined) continue;
        if (item.result !== 'held' || lookedUp) calls++;
        report(item);
      }
      cursor = page.cursor;
    } while (cursor);
  }
  return { ...counts, items };
}

async function acceptOne(
  deps: AcceptDeps,
  options: AcceptOptions,
  source: SourceConfig,
  key: string,
  dueBy: string,
  /** Told when the platform is asked about an unconfirmed send: a held order then counts as a call. */
  lookingUp: () => void,
): Promise<AcceptItem | undefined> {
  const record = await deps.ledger.get(key);
  // The index lags behind the table: a record accepted, refused or moved meanwhile is not due.
  if (!record || !awaitsAccept(record) || (record.acceptDueAt ?? '') > dueBy) return undefined;
  const base = {
    source: source.id,
    externalId: record.externalId,
    conversionId: record.conversionId,
    acceptDueAt: record.acceptDueAt,
  };
  const pending = Object.values(record.refunds).find((r) => r.status === 'pending');
  if (pending) {
    return {
      ...base,
      result: 'held',
      detail:
        `refund ${pending.refundId} is pending: accepted once applied (its message is in the queue, or parked: ` +
        `connector dlq list --external-id ${record.externalId})`,
    };
  }
  if ((record.acceptLeaseUntil ?? 0) > deps.now()) {
    return { ...base, result: 'held', detail: 'an accept is in flight in another run' };
  }
  const unconfirmed = unconfirmedSends(record);
  const settledAt = lastAppliedAt(record) + UNCONFIRMED_SETTLE_MS;
  if (unconfirmed && settledAt > deps.now()) {
    return {
      ...base,
      result: 'held',
      detail:
        `the last call of ${unconfirmed} is unconfirmed and its worker may still be sending: ` +
        `looked up after ${new Date(settledAt).toISOString()}, accepted if the platform shows the ledger's amount`,
    };
  }
  // A dry run reads: the platform only when the ledger alone cannot tell (an unconfirmed send).
  if (options.dryRun && !unconfirmed) return { ...base, result: 'would_accept' };

  let backend: ConversionBackend;
  try {
    backend = deps.backendFor(source);
  } catch (error) {
    // A source whose platform interface is not configured here (legacy credentials): next run.
    return { ...base, result: 'retry', detail: describeError(error) };
  }
  const call: CallOptions = options.deadline === undefined ? {} : { deadline: options.deadline };
  // The platform answered that it has no conversion for the order: parked once leased, as below.
  let missing = false;
  if (unconfirmed) {
    let found: PlatformConversion | undefined;
    lookingUp();
    try {
      found = await backend.find(record.program, record.externalId, call);
    } catch (error) {
      // Nothing is leased yet: the next run looks again.
      return { ...base, result: 'retry', detail: describeError(error) };
    }
    missing = found === undefined;
    if (found) {
      const off = offLedger(record, found);
      if (off) {
        return {
          ...base,
          result: 'held',
          detail:
            `${off}: the last call of ${unconfirmed} is unconfirmed; its message's next delivery sends the ` +
            "ledger's amount (replay it if it is in the DLQ), or set it on the platform by hand; accepted then",
        };
      }
      record.conversionId ??= found.id;
      // Written with the lease, conditional on the version read before the lookup.
      confirmSends(record);
    }
  }
  if (options.dryRun) return { ...base, result: 'would_accept' };

  record.acceptLeaseUntil = deps.now() + deps.leaseMs;
  if (!(await deps.ledger.update(record))) {
    return { ...base, result: 'held', detail: 'the ledger record changed meanwhile: next run' };
  }
  let conversionId = missing ? undefined : record.conversionId;
  if (conversionId === undefined) {
    // Added without its id (the add's answer need not carry one): look it up now, once, and keep it.
    let found: PlatformConversion | undefined;
    try {
      found = missing ? undefined : await backend.find(record.program, record.externalId, call);
    } catch (error) {
      if (isFinal(error)) return park(deps, source, record, error, undefined);
      return retryNextRun(deps, record, base, error);
    }
    if (!found) {
      const none = new PermanentError(
        `the platform has no conversion with externalId ${record.externalId}, though the ledger holds the order as added`,
      );
      return park(deps, source, record, none, undefined);
    }
    conversionId = found.id;
    record.conversionId = conversionId;
  }
  const known = { ...base, conversionId };
  try {
    await backend.accept(record.program, conversionId, call);
  } catch (error) {
    if (isFinal(error)) {
      // Accepted already (a run that died after its call; a second accept may be refused)?
      let found: PlatformConversion | undefined;
      try {
        found = await backend.find(record.program, record.externalId, call);
      } catch (findError) {
        // Unknown whether it is accepted: parking now would give up on what may be done already.
        if (!isFinal(findError)) return retryNextRun(deps, record, known, findError);
      }
      if (found?.id === conversionId && found.status === 'accepted') {
        await settle(deps, record, (r) => {
          r.acceptedAt = new Date(deps.now()).toISOString();
        });
        return { ...known, result: 'accepted', detail: 'already accepted on the platform' };
      }
      return park(deps, source, record, error, found?.status);
    }
    return retryNextRun(deps, record, known, error);
  }
  await settle(deps, record, (r) => {
    r.acceptedAt = new Date(deps.now()).toISOString();
  });
  return { ...known, result: 'accepted' };
}

/**
 * What left its last call unconfirmed (`unconfirmedSend`): refunds recorded applied by another worker
 * than their own, or the order's own message; undefined when nothing did. A pending refund holds the
 * order already, so its mark is not counted here.
 */
function unconfirmedSends(record: OrderRecord): string | undefined {
  const names = Object.values(record.refunds)
    .filter((r) => r.status === 'applied' && r.unconfirmedSend === true)
    .map((r) => `refund ${r.refundId}`);
  if (record.unconfirmedSend === true) names.push(`order ${record.externalId}'s own message`);
  return names.length === 0 ? undefined : names.join(', ');
}

/** Epoch ms when the record's refunds were last recorded applied (0 when none says). */
function lastAppliedAt(record: OrderRecord): number {
  let last = 0;
  for (const refund of Object.values(record.refunds)) {
    const at = refund.status === 'applied' && refund.appliedAt ? Date.parse(refund.appliedAt) : 0;
    if (at > last) last = at;
  }
  return last;
}

/** How the platform's conversion differs from where the ledger says it is, if it does. */
function offLedger(record: OrderRecord, found: PlatformConversion): string | undefined {
  if (found.status === 'refused') return 'the platform shows the conversion refused, the ledger does not';
  if (found.amount === record.currentAmount) return undefined;
  const shown =
    found.amount === undefined || !Number.isSafeInteger(found.amount)
      ? 'no amount'
      : formatMinor(found.amount, record.currency);
  return `the platform shows ${shown}, the ledger ${formatMinor(record.currentAmount, record.currency)}`;
}

/** A failure the platform will give again (refused, locked, unknown): parked, not retried. */
function isFinal(error: unknown): boolean {
  const failureClass = failureClassOf(error);
  return failureClass === 'permanent' || failureClass === 'bad_input';
}

/** Ends the lease and leaves the order to the next run: a transient failure. */
async function retryNextRun(
  deps: AcceptDeps,
  record: OrderRecord,
  item: Omit<AcceptItem, 'result'>,
  error: unknown,
): Promise<AcceptItem> {
  await settle(deps, record, () => undefined);
  return { ...item, result: 'retry', detail: describeError(error) };
}

/**
 * Writes `change` and ends the lease, re-reading when a worker wrote the record meanwhile (a refund
 * recorded while the accept call ran): what the platform did must reach the ledger whatever else
 * changed.
 */
async function settle(
  deps: AcceptDeps,
  record: OrderRecord,
  change: (r: OrderRecord) => void,
): Promise<void> {
  // The conversion's id, when this run looked it up: kept whatever else changed.
  const conversionId = record.conversionId;
  let current: OrderRecord | undefined = record;
  for (let round = 0; round < 3 && current; round++) {
    change(current);
    current.conversionId ??= conversionId;
    current.acceptLeaseUntil = undefined;
    if (await deps.ledger.update(current)) return;
    current = await deps.ledger.get(record.key);
  }
  // The lease expires by itself; the next run sees the platform's state through `find`.
}

/**
 * Why the accept failed, in the platform's words when it answered (its status and message), else the
 * connector's own message; the class name tells an operator nothing.
 */
function refusal(error: unknown): string {
  if (!isConnectorError(error)) return describeError(error);
  const words =
    error.status !== undefined && error.status >= 400 && error.platformMessage
      ? `the platform answered ${error.status}: ${error.platformMessage}`
      : error.message || describeError(error);
  return words.replace(/\.+$/, '');
}

async function park(
  deps: AcceptDeps,
  source: SourceConfig,
  record: OrderRecord,
  error: unknown,
  platformStatus: string | undefined,
): Promise<AcceptItem> {
  const at = new Date(deps.now()).toISOString();
  const conversion = record.conversionId ? `Conversion ${record.conversionId}` : 'The conversion';
  // The platform's words first: `connector accept` shows the start of the reason on one line.
  const reason =
    `${refusal(error)}. ${conversion} of order ${record.externalId} is not accepted` +
    `${platformStatus ? ` (the platform shows it ${platformStatus})` : ''}. The connector will not try again: ` +
    'check the conversion on the platform (refused or locked there by hand?) and accept it there if it should ' +
    'be. Replaying this message does not accept it: it only records the failure; once handled, discard it: ' +
    'connector dlq discard <message id>';
  const base = {
    source: source.id,
    externalId: record.externalId,
    conversionId: record.conversionId,
    acceptDueAt: record.acceptDueAt,
  };
  try {
    await deps.failures.park(
      {
        body: JSON.stringify({
          type: ACCEPT_EVENT_TYPE,
          source: source.id,
          program: record.program,
          externalId: record.externalId,
          conversionId: record.conversionId,
        }),
        groupId: messageGroupId(record.program, record.externalId),
        deduplicationId: messageGroupId(ACCEPT_EVENT_TYPE, record.key),
      },
      {
        failureClass: 'permanent',
        reason,
        ...(isConnectorError(error) && error.status !== undefined
          ? { platformStatus: String(error.status) }
          : {}),
        ...(isConnectorError(error) && error.platformMessage
          ? { platformMessage: error.platformMessage }
          : {}),
        attempts: '1',
        firstFailureAt: at,
        lastFailureAt: at,
        eventType: ACCEPT_EVENT_TYPE,
        externalId: record.externalId,
        source: source.id,
      },
    );
  } catch (parkError) {
    // Not parked, so not given up on: the next run tries the order again.
    await settle(deps, record, () => undefined);
    return { ...base, result: 'retry', detail: `${reason}; parking it failed: ${describeError(parkError)}` };
  }
  await settle(deps, record, (r) => {
    r.acceptError = reason;
  });
  return { ...base, result: 'failed', detail: reason };
}

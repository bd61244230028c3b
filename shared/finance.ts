import { createHash } from 'node:crypto';
import * as z from 'zod/mini';
import type { SourceConfig } from './config/sources.ts';
import { ExternalRefundId, OrderRefunded } from './domain/events.ts';
import { CurrencyInput, freeText, idText } from './domain/limits.ts';
import { quoted } from './domain/text.ts';
import { BadInputError } from './errors.ts';
import { answerFor, type EdgeOutcome, type EdgeResult, outcomeOf, refusedBody } from './http/answers.ts';
import type { HttpAnswer } from './http/types.ts';
import { parseJsonBody } from './json.ts';
import {
  lateRefunds,
  ledgerKey,
  type OrderRecord,
  paidBackRefunds,
  type RefundReservation,
  type RefundReservations,
  refundOf,
  unrecordedReservations,
} from './ledger.ts';
import { formatMinor, parseMoney } from './money.ts';
import { safeEqual } from './platforms/signature.ts';
import type { EventQueue, Ledger, ReservationLedger, SecretStore } from './ports.ts';
import { deduplicationId, messageGroupId } from './queueing.ts';
import { firstIssue } from './validation.ts';

/**
 * `POST /refunds`, for finance staff: `{ externalId, refundId, amount | amountCents | full: true,
 * reason, source?, currency? }`. `amount` is a decimal string in the order's currency ("12.50");
 * `amountCents` the same in minor units. The refund joins the order's FIFO group, so it is applied
 * after the order, and a refund id already seen from the shop counts once. A refund is reserved in
 * the ledger before it is queued (`reserveRefund`), so that partial refunds of one order sent at the
 * same time cannot together take more than remains, nor a partial refund pass beside a full one. A
 * refund id the ledger holds already (recorded or reserved) at another amount or `full` flag is
 * refused (`refundIdConflict`).
 */
export const FinanceRefundRequest = z
  .strictObject({
    externalId: idText(),
    refundId: ExternalRefundId,
    amount: z.optional(z.string().check(z.minLength(1))),
    amountCents: z.optional(z.number().check(z.int(), z.positive(), z.maximum(Number.MAX_SAFE_INTEGER))),
    full: z.optional(z.literal(true)),
    reason: z.optional(freeText(500)),
    source: z.optional(z.string().check(z.minLength(1))),
    // Read like the webhooks read it: `eur` is EUR.
    currency: z.optional(CurrencyInput),
  })
  .check(
    z.superRefine((body, ctx) => {
      const given = [body.amount !== undefined, body.amountCents !== undefined, body.full === true].filter(
        Boolean,
      );
      if (given.length !== 1) {
        ctx.addIssue({
          code: 'custom',
          path: ['amount'],
          message: 'give exactly one of amount, amountCents or full: true',
        });
      }
    }),
  );
export type FinanceRefundRequest = z.infer<typeof FinanceRefundRequest>;

export interface FinanceDeps {
  readonly sources: ReadonlyMap<string, SourceConfig>;
  readonly ledger: Pick<Ledger, 'get'>;
  /** Where refunds are reserved before they are queued; the same table as `ledger`. */
  readonly reservations: ReservationLedger;
  readonly queue: EventQueue;
  readonly secrets: SecretStore;
  /** Reference of the finance API key in the secret store (its previous value also passes, for rotation). */
  readonly keyRef: string;
  readonly now: () => Date;
  /** Told about every outcome (for logs); never given the key or the body. */
  readonly observe?: (outcome: FinanceOutcome) => void;
}

export interface FinanceOutcome extends EdgeOutcome {
  /** The field a 400 or a 409 names. */
  readonly field?: string;
  /** What was queued (202). */
  readonly source?: string;
  readonly externalId?: string;
  readonly refundId?: string;
  readonly messageId?: string;
}

/**
 * Fewest characters a finance key may have. The key alone guards refunds that cost the affiliates
 * their commission: 32 random characters are out of reach of guessing at any request rate.
 */
export const MIN_FINANCE_KEY_LENGTH = 32;

// HTTP trims spaces and tabs around a header value and carries no control character (RFC 9110
// §5.5): a key holding one (a secret put from a file ends with a newline) could never be presented.
const UNPRESENTABLE = /^[ \t]|[ \t]$|\p{Cc}/u;

/**
 * Why a configured finance key cannot guard refunds (too short, or holding what no HTTP header
 * carries), or undefined when it can. The reason never quotes the key.
 */
export function weakFinanceKey(key: string): string | undefined {
  switch (keyFault(key)) {
    case 'short':
      return `the finance API key has ${key.length} characters, fewer than ${MIN_FINANCE_KEY_LENGTH}`;
    case 'unpresentable':
      return `the finance API key has ${UNPRESENTABLE_WHAT}`;
    case undefined:
      return undefined;
  }
}

const UNPRESENTABLE_WHAT =
  'white space at its start or end, or a control character, which no HTTP header carries';

function keyFault(key: string): 'short' | 'unpresentable' | undefined {
  if (key.length < MIN_FINANCE_KEY_LENGTH) return 'short';
  return UNPRESENTABLE.test(key) ? 'unpresentable' : undefined;
}

/**
 * Compares a presented key with every current key in constant time per key. Their SHA-256 digests
 * are compared, not the keys: `timingSafeEqual` needs equal lengths, and a comparison that returned
 * early on a length that differs would tell a caller the key's length by its time.
 */
export function keyMatches(presented: string | undefined, keys: readonly string[]): boolean {
  if (!presented) return false;
  const given = sha256(presented);
  let ok = false;
  // Every key is compared, a match or not, so the time taken does not tell which key matched.
  for (const key of keys) if (safeEqual(sha256(key), given)) ok = true;
  return ok;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

// `Authorization: Bearer <token>`: the scheme is case-insensitive (RFC 9110 §11.1) and followed by
// one or more spaces (`1*SP`), not tabs.
const BEARER = /^bearer +([^ ].*)$/is;

/**
 * The key a request presents: its `x-api-key` header, else the token of `Authorization: Bearer`
 * (`bearer` and `BEARER` too). Undefined when it presents none.
 */
export function presentedKey(headers: Readonly<Record<string, string | undefined>>): string | undefined {
  const direct = headers['x-api-key'];
  if (direct) return direct;
  const auth = headers['authorization'];
  return auth === undefined ? undefined : BEARER.exec(auth)?.[1];
}

const bad = (field: string, message: string): EdgeResult => ({ kind: 'bad_input', field, message });

/** A dependency failed (secret store, ledger, queue): nothing was queued, the caller may retry. */
const unavailable = (message: string, what: string, error?: unknown): EdgeResult => ({
  kind: 'unavailable',
  message,
  retryAfterSeconds: 5,
  detail: `${what}: ${error instanceof Error ? error.name : 'unavailable'}`,
});

interface Submitted {
  readonly result: EdgeResult;
  readonly event?: OrderRefunded;
  readonly messageId?: string;
}

/** Authenticates, validates and queues one finance refund. */
export async function submitFinanceRefund(
  deps: FinanceDeps,
  headers: Readonly<Record<string, string | undefined>>,
  rawBody: Buffer,
): Promise<HttpAnswer> {
  const { result, event, messageId } = await submit(deps, headers, rawBody);
  const answer = answerFor(result);
  deps.observe?.({
    ...outcomeOf(result, answer),
    ...((result.kind === 'bad_input' || result.kind === 'conflict') && result.field !== null
      ? { field: result.field }
      : {}),
    ...(event
      ? { source: event.source, externalId: event.externalId, refundId: event.refundId, messageId }
      : {}),
  });
  return answer;
}

async function submit(
  deps: FinanceDeps,
  headers: Readonly<Record<string, string | undefined>>,
  rawBody: Buffer,
): Promise<Submitted> {
  const refused = refusedBody({ headers, rawBody });
  if (refused) return { result: refused };
  let keys: readonly string[];
  try {
    keys = await deps.secrets.accepted(deps.keyRef);
  } catch (error) {
    return { result: unavailable('finance key not available, retry later', 'finance key', error) };
  }
  // A weak key (a previous one included) is a configuration fault: no key is accepted until it is replaced.
  // The answer goes to callers not yet authenticated: it says what is wrong, never the key's length.
  const fault = keys.map(keyFault).find((f) => f !== undefined);
  if (fault !== undefined) {
    const what =
      fault === 'short'
        ? `is shorter than ${MIN_FINANCE_KEY_LENGTH} characters`
        : `has ${UNPRESENTABLE_WHAT}`;
    const message = `the configured finance key ${what}; the operator must replace it`;
    return { result: { kind: 'unavailable', message, retryAfterSeconds: 5 } };
  }
  if (!keyMatches(presentedKey(headers), keys)) {
    return { result: { kind: 'unauthorized', message: 'missing or wrong API key (x-api-key header)' } };
  }

  let json: unknown;
  try {
    // As the webhooks read a body: a byte that is not UTF-8 would otherwise be queued as U+FFFD in an id.
    json = parseJsonBody(rawBody);
  } catch (error) {
    if (error instanceof BadInputError) return { result: bad('body', error.message) };
    throw error;
  }
  const parsed = FinanceRefundRequest.safeParse(json);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error);
    return { result: bad(field || 'body', message) };
  }
  const request = parsed.data;

  let located: Awaited<ReturnType<typeof locateOrder>>;
  try {
    located = await locateOrder(deps, request);
  } catch (error) {
    // A throttled, timed-out or unreachable ledger: the refund is fine, only this attempt is not.
    return { result: unavailable('ledger unavailable, retry later', 'ledger', error) };
  }
  if ('error' in located) return { result: located.error };
  const { source, record } = located;

  const read = refundAmountOf(record, request);
  if ('field' in read) return { result: bad(read.field, read.message) };
  const { currency } = read;
  const amount = read.amount === 'full' ? undefined : read.amount;

  // A refund is reserved before it is queued, and kept should the send fail: its retry (the same
  // refund id) is not counted against itself, and a send that failed after SQS stored the message
  // still counts for the order's other refunds (a full one refuses any further partial refund).
  let judged: EdgeResult | undefined;
  try {
    judged = await reserve(deps, record?.key ?? ledgerKey(source.program, request.externalId), {
      externalId: request.externalId,
      refundId: request.refundId,
      amount: amount ?? 'full',
      ...(currency ? { currency } : {}),
    });
  } catch (error) {
    return { result: unavailable('ledger unavailable, retry later', 'ledger', error) };
  }
  if (judged) return { result: judged };

  const now = deps.now();
  const event = OrderRefunded.parse({
    type: 'OrderRefunded',
    eventId: `finance:${request.refundId}`,
    source: source.id,
    platform: 'finance',
    externalId: request.externalId,
    receivedAt: now.toISOString(),
    refundId: request.refundId,
    amount,
    full: request.full === true,
    currency,
    reason: request.reason,
    origin: 'finance',
  });
  try {
    const messageId = await deps.queue.send(event, {
      // The ledger's id, which is the group of the order's webhooks too (`sendEvents`).
      groupId: messageGroupId(source.program, event.externalId),
      deduplicationId: deduplicationId(event),
    });
    const receipt = {
      messageId,
      source: source.id,
      externalId: event.externalId,
      refundId: event.refundId,
      amount: amount ?? null,
      currency: currency ?? null,
      full: event.full,
    };
    return { result: { kind: 'queued', receipt }, event, messageId };
  } catch (error) {
    return { result: unavailable('queue unavailable, retry later', 'queue', error) };
  }
}

/**
 * A refund's amount as `POST /refunds` reads it against the order's ledger record (undefined for an
 * order the ledger does not know): minor units of a partial refund, or `full`, and the currency (the
 * record's, else the request's). Or why it is a 400, naming `currency` (not the order's; missing for a
 * decimal `amount` of an order the ledger does not know, whose decimals depend on it) or `amount`
 * (more decimals than the currency has, or zero). Shared by `POST /refunds` and `connector refund`.
 */
export function refundAmountOf(
  record: OrderRecord | undefined,
  request: FinanceRefundRequest,
):
  | { readonly amount: number | 'full'; readonly currency?: string }
  | { readonly field: 'currency' | 'amount'; readonly message: string } {
  const currency = record?.currency ?? request.currency;
  const known = currency === undefined ? {} : { currency };
  if (request.currency && record?.currency && request.currency !== record.currency) {
    return { field: 'currency', message: `the order is in ${record.currency}, not ${request.currency}` };
  }
  if (request.amountCents !== undefined) return { amount: request.amountCents, ...known };
  if (request.amount === undefined) return { amount: 'full', ...known };
  if (!currency)
    return { field: 'currency', message: 'the ledger does not know this order: give its currency' };
  let amount: number;
  try {
    amount = parseMoney(request.amount, currency, { field: 'amount' });
  } catch (error) {
    if (error instanceof BadInputError) return { field: 'amount', message: error.message };
    throw error;
  }
  if (amount <= 0) return { field: 'amount', message: 'must be greater than zero' };
  return { amount, currency };
}

/** Ledger states whose `originalAmount` is the conversion's (added, being added, or to be replayed). */
const HAS_AMOUNT = new Set<OrderRecord['state']>(['adding', 'added', 'failed']);

/**
 * What partial refunds may still take from an order: its amount less every refund paid back
 * (`paidBackRefunds`: applied, pending, settled by hand, or late). Undefined when the ledger cannot tell: no
 * record, an amount-less import, or no conversion to lower (skipped, refused).
 */
export function remainingOf(record: OrderRecord | undefined): number | undefined {
  if (!record || !HAS_AMOUNT.has(record.state) || record.amountUnknown) return undefined;
  return record.originalAmount - paidBackRefunds(record).reduce((sum, r) => sum + r.amount, 0);
}

/** Partial refunds of the same order sent along with the one judged, which the ledger does not hold yet. */
export interface SentAlongside {
  /** Their sum, in minor units. */
  readonly amount: number;
  /** Where they are, for the message (`line 2 of this file`). */
  readonly what: string;
}

/**
 * The reason to refuse a partial refund of `amount` (minor units) that is larger than what remains:
 * the worker would refuse the whole conversion, which cannot be undone; or, past what late refunds
 * left, pay the buyer back more than the order (they are named: the platform's amount does not show
 * them). Undefined when it fits, when `refundId` is already recorded (a resend counts once), or when
 * the ledger cannot tell (the worker then decides). `alongside` are refunds of the order sent before this one and not recorded yet (the
 * earlier rows of a CSV, the refunds `POST /refunds` reserved): they take from what remains first.
 * Shared by `POST /refunds` and `connector refund`.
 */
export function overRefundMessage(
  record: OrderRecord | undefined,
  refundId: string,
  amount: number,
  alongside?: SentAlongside,
): string | undefined {
  if (record && refundOf(record, refundId)) return undefined;
  const left = remainingOf(record);
  if (left === undefined) return undefined;
  const remaining = left - (alongside?.amount ?? 0);
  if (amount <= remaining) return undefined;
  const currency = record?.currency;
  const after = alongside ? ` after ${alongside.what} (${formatMinor(alongside.amount, currency)})` : '';
  // Late refunds leave the platform's amount where it was: named, or what remains would look wrong.
  const late = record ? lateRefunds(record) : [];
  const them = late.length === 1 ? 'it' : 'them';
  const lateSum = late.reduce((sum, r) => sum + r.amount, 0);
  const lateText =
    late.length === 0
      ? ''
      : `, with ${namedRefunds('late refund', late)} (${formatMinor(lateSum, currency)}) counted: ` +
        `the buyer got ${them} back, though the platform could not apply ${them}`;
  const past =
    late.length === 0 ? 'refuse the conversion' : "pay the buyer back more than the order's amount";
  return (
    `${formatMinor(amount, currency)} is more than is left of order ${record?.externalId}: ` +
    `${formatMinor(Math.max(remaining, 0), currency)} remains${after}${lateText}. A partial refund past it would ${past}; ` +
    'to refund the whole order, send a full refund (full: true, or --full) instead'
  );
}

/** A refund as finance asks for it: of which order, under which id, and how much. */
export interface AskedRefund {
  readonly externalId: string;
  readonly refundId: string;
  /** Minor units of a partial refund, or `full`. */
  readonly amount: number | 'full';
  /** The order's currency, when known: what a message writes amounts in. */
  readonly currency?: string;
}

const COUNTS_ONCE = 'a refund id counts once; send another refund id for another refund';

/**
 * The reason to refuse `asked` because its refund id stands for another refund already: recorded in
 * the order's record, or (not recorded yet) reserved by `POST /refunds`, at another amount or `full`
 * flag. Undefined when the refund id is new, or holds this very refund (a resend counts once). The
 * worker records the first message of a refund id and drops the others as duplicates (SQS drops them
 * within 5 minutes: the deduplication id is the refund id's), so another amount would never be
 * applied. Shared by `POST /refunds` (a 409 naming `refundId`) and `connector refund`.
 */
export function refundIdConflict(
  record: OrderRecord | undefined,
  reservations: RefundReservations | undefined,
  asked: AskedRefund,
): string | undefined {
  const { externalId, refundId, amount } = asked;
  // Whether what the refund id holds is this refund; else how the refusal names it. A reservation
  // without `full` is a partial refund's (items written before full ones were reserved).
  const isAsked = (held: { readonly full?: boolean; readonly amount: number }) =>
    amount === 'full' ? held.full === true : held.full !== true && held.amount === amount;
  const heldAs = (
    held: { readonly full?: boolean; readonly amount: number },
    currency: string | undefined,
  ) => (held.full ? 'as a full refund' : `at ${formatMinor(held.amount, currency)}`);
  const refund = record ? refundOf(record, refundId) : undefined;
  if (refund) {
    if (isAsked(refund)) return undefined;
    const what = heldAs(refund, refund.currency ?? record?.currency ?? asked.currency);
    const from = refund.origin === 'shop' ? ', reported by the shop' : '';
    return `refund ${refundId} of order ${externalId} is recorded ${what} (${refund.status}${from}): ${COUNTS_ONCE}`;
  }
  const reserved = unrecordedReservations(record, reservations).find((r) => r.refundId === refundId);
  if (!reserved || isAsked(reserved)) return undefined;
  const what = heldAs(reserved, record?.currency ?? asked.currency);
  return `refund ${refundId} of order ${externalId} is reserved ${what} (requested, not yet applied): ${COUNTS_ONCE}`;
}

/**
 * The reason to refuse a partial refund of an order being refunded in full: a full refund of it
 * reserved (`reserved`, not yet recorded), or recorded and paid back (pending, applied, settled by
 * hand, or late; a cancellation too). The worker would never apply the partial refund: the full one
 * refuses the conversion, and a refund after that is recorded skipped ("conversion already
 * refused"), or, for an order not yet arrived, the order is never added; after a late one, the
 * conversion can no longer change, and the buyer has had all of it back. Undefined when no full
 * refund is held.
 */
export function refundedInFullMessage(
  record: OrderRecord | undefined,
  reserved: readonly RefundReservation[],
  externalId: string,
): string | undefined {
  const recorded = record ? paidBackRefunds(record).find((r) => r.full) : undefined;
  const pending = reserved.find((r) => r.full);
  let which: string;
  if (recorded) {
    const verb = recorded.status === 'pending' ? 'is being refunded' : 'is refunded';
    which = `${verb} in full (refund ${recorded.refundId}, ${recorded.status})`;
  } else if (pending) {
    which = `is being refunded in full (refund ${pending.refundId}, requested and not yet applied)`;
  } else {
    return undefined;
  }
  return `order ${externalId} ${which}: a partial refund of it would never be applied; the full refund gives back all of it`;
}

/**
 * Most rounds of `reserve`. A round is lost only to another request's reservation of the same order
 * written between this one's read and its write, and each request writes once: requests for one
 * order sent at the same time are all settled within as many rounds as there are of them.
 */
const RESERVE_ROUNDS = 8;

/** Most refund ids a refusal names among the reservations (or the late refunds) it counted. */
const NAMED_RESERVATIONS = 3;

/**
 * Reserves a refund, partial or full, for the order under `key`, judged against its record and the
 * refunds reserved for it; a lost write reads both again and judges again. Resolves with the refusal
 * (a 409 naming `refundId`, a 400 naming `amount`, or a 503 after too many lost rounds), or undefined
 * once reserved.
 */
async function reserve(deps: FinanceDeps, key: string, asked: AskedRefund): Promise<EdgeResult | undefined> {
  for (let round = 0; round < RESERVE_ROUNDS; round++) {
    // The reservations first, then the record. Each write drops the reservations the record holds,
    // and a record only ever gains refunds: one read after the reservations holds every refund
    // dropped from them. Read before (as the request located the order), it could miss a refund the
    // worker recorded since and another request dropped meanwhile, counted then nowhere.
    const reservations = (await deps.reservations.reservationsOf(key)) ?? { key, version: 0, refunds: [] };
    const record = await deps.ledger.get(key);
    const judged = reserveRefund(record, reservations, asked, deps.now());
    if ('conflict' in judged) return { kind: 'conflict', field: 'refundId', message: judged.conflict };
    if ('refused' in judged) return bad('amount', judged.refused);
    if (!judged.reservations || (await deps.reservations.saveReservations(judged.reservations))) {
      return undefined;
    }
  }
  return {
    kind: 'unavailable',
    message: 'other refunds of this order are being requested at the same time, retry later',
    retryAfterSeconds: 1,
    busy: true,
  };
}

/**
 * Judges a refund against what its refund id stands for already (`refundIdConflict`: `conflict`,
 * another amount or `full` flag under the same id) and a new partial refund against the order:
 * `refused` when a full refund of it is reserved or recorded (`refundedInFullMessage`), or when it
 * is more than remains: its record (`overRefundMessage`) less the partial refunds reserved for it
 * that the record does not hold yet, other than this refund id's own (a retry is not counted against
 * itself). Else the reservations to write: this refund's added (a full one with `full`), those the
 * record now holds dropped. None to write when the record holds the refund id already (it counts
 * once) or it is reserved already (as asked: another amount is a conflict). A full refund is taken
 * whatever the order's other refunds: it gives back all that is left.
 */
export function reserveRefund(
  record: OrderRecord | undefined,
  reservations: RefundReservations,
  asked: AskedRefund,
  now: Date,
):
  | { readonly conflict: string }
  | { readonly refused: string }
  | { readonly reservations?: RefundReservations } {
  const conflict = refundIdConflict(record, reservations, asked);
  if (conflict) return { conflict };
  const { refundId, amount } = asked;
  if (record && refundOf(record, refundId)) return {};
  const unrecorded = unrecordedReservations(record, reservations);
  const own = unrecorded.find((r) => r.refundId === refundId);
  const others = unrecorded.filter((r) => r.refundId !== refundId);
  if (amount !== 'full') {
    // A retry of a partial refund reserved before the full one is no further refund: it stays a 202.
    const inFull = own ? undefined : refundedInFullMessage(record, others, asked.externalId);
    if (inFull) return { refused: inFull };
    const refused = overRefundMessage(record, refundId, amount, reservedAlongside(others));
    if (refused) return { refused };
  }
  if (own) return {};
  const reservedAt = now.toISOString();
  const reservation: RefundReservation =
    amount === 'full' ? { refundId, amount: 0, full: true, reservedAt } : { refundId, amount, reservedAt };
  return { reservations: { ...reservations, refunds: [...others, reservation] } };
}

/** Reserved partial refunds as `overRefundMessage` counts them beside the one judged. */
export function reservedAlongside(all: readonly RefundReservation[]): SentAlongside | undefined {
  const reserved = all.filter((r) => !r.full);
  if (reserved.length === 0) return undefined;
  return {
    amount: reserved.reduce((sum, r) => sum + r.amount, 0),
    what: `${namedRefunds('refund', reserved)}, requested and not yet applied`,
  };
}

/** `refunds RF-a, RF-b, RF-c and 1 more`: at most `NAMED_RESERVATIONS` refund ids named. */
function namedRefunds(what: string, refunds: readonly { readonly refundId: string }[]): string {
  const named = refunds.slice(0, NAMED_RESERVATIONS).map((r) => r.refundId);
  const more = refunds.length - named.length;
  const ids = more > 0 ? `${named.join(', ')} and ${more} more` : named.join(', ');
  return `${what}${refunds.length > 1 ? 's' : ''} ${ids}`;
}

/**
 * Finds the order's source: the one named, or the one whose program's ledger knows the order, or the
 * only configured program. Rejects when the ledger cannot be read.
 */
async function locateOrder(
  deps: FinanceDeps,
  request: FinanceRefundRequest,
): Promise<{ source: SourceConfig; record: OrderRecord | undefined } | { error: EdgeResult }> {
  if (request.source) {
    const source = deps.sources.get(request.source);
    if (!source) return { error: bad('source', `unknown source "${quoted(request.source)}"`) };
    return { source, record: await deps.ledger.get(ledgerKey(source.program, request.externalId)) };
  }
  const byProgram = new Map<string, SourceConfig>();
  for (const source of deps.sources.values())
    if (!byProgram.has(source.program)) byProgram.set(source.program, source);
  for (const [program, fallback] of byProgram) {
    const record = await deps.ledger.get(ledgerKey(program, request.externalId));
    if (record) return { source: deps.sources.get(record.source) ?? fallback, record };
  }
  const only = [...byProgram.values()];
  if (only.length === 1 && only[0]) return { source: only[0], record: undefined };
  return {
    error: bad(
      'source',
      'the ledger does not know this order and several programs are configured: give source',
    ),
  };
}

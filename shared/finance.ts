import * as z from 'zod/mini';
import type { SourceConfig } from './config/sources.ts';
import { ExternalRefundId, OrderRefunded } from './domain/events.ts';
import { CurrencyInput, freeText, idText } from './domain/limits.ts';
import { BadInputError } from './errors.ts';
import { answerFor, type EdgeOutcome, type EdgeResult, outcomeOf, refusedBody } from './http/answers.ts';
import type { HttpAnswer } from './http/types.ts';
import { countedRefunds, ledgerKey, type OrderRecord, refundOf } from './ledger.ts';
import { formatMinor, parseMoney } from './money.ts';
import { safeEqual } from './platforms/signature.ts';
import type { EventQueue, Ledger, SecretStore } from './ports.ts';
import { deduplicationId, messageGroupId } from './queueing.ts';
import { firstIssue } from './validation.ts';

/**
 * `POST /refunds`, for finance staff: `{ externalId, refundId, amount | amountCents | full: true,
 * reason, source?, currency? }`. `amount` is a decimal string in the order's currency ("12.50");
 * `amountCents` the same in minor units. The refund joins the order's FIFO group, so it is applied
 * after the order, and a refund id already seen from the shop counts once.
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
  readonly queue: EventQueue;
  readonly secrets: SecretStore;
  /** Reference of the finance API key in the secret store (its previous value also passes, for rotation). */
  readonly keyRef: string;
  readonly now: () => Date;
  /** Told about every outcome (for logs); never given the key or the body. */
  readonly observe?: (outcome: FinanceOutcome) => void;
}

export interface FinanceOutcome extends EdgeOutcome {
  /** The field a 400 names. */
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

/** Why a configured finance key is too weak to guard refunds, or undefined when it is strong enough. */
export function weakFinanceKey(key: string): string | undefined {
  return key.length < MIN_FINANCE_KEY_LENGTH
    ? `the finance API key has ${key.length} characters, fewer than ${MIN_FINANCE_KEY_LENGTH}`
    : undefined;
}

/** Compares a presented key with every current key in constant time per key. */
export function keyMatches(presented: string | undefined, keys: readonly string[]): boolean {
  if (!presented) return false;
  const given = Buffer.from(presented);
  let ok = false;
  // Every key is compared, a match or not, so the time taken does not tell which key matched.
  for (const key of keys) if (safeEqual(Buffer.from(key), given)) ok = true;
  return ok;
}

export function presentedKey(headers: Readonly<Record<string, string | undefined>>): string | undefined {
  const direct = headers['x-api-key'];
  if (direct) return direct;
  const auth = headers['authorization'];
  return auth?.startsWith('Bearer ') ? auth.slice('Bearer '.length) : undefined;
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
    ...(result.kind === 'bad_input' && result.field !== null ? { field: result.field } : {}),
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
  if (keys.some((key) => weakFinanceKey(key) !== undefined)) {
    const message = `the configured finance key is shorter than ${MIN_FINANCE_KEY_LENGTH} characters; the operator must replace it`;
    return { result: { kind: 'unavailable', message, retryAfterSeconds: 5 } };
  }
  if (!keyMatches(presentedKey(headers), keys)) {
    return { result: { kind: 'unauthorized', message: 'missing or wrong API key (x-api-key header)' } };
  }

  let json: unknown;
  try {
    json = JSON.parse(rawBody.toString('utf8'));
  } catch {
    return { result: bad('body', 'body is not valid JSON') };
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

  const currency = record?.currency ?? request.currency;
  if (request.currency && record?.currency && request.currency !== record.currency) {
    return { result: bad('currency', `the order is in ${record.currency}, not ${request.currency}`) };
  }
  let amount: number | undefined;
  if (request.amountCents !== undefined) amount = request.amountCents;
  if (request.amount !== undefined) {
    if (!currency) {
      return { result: bad('currency', 'the ledger does not know this order: give its currency') };
    }
    try {
      amount = parseMoney(request.amount, currency, { field: 'amount' });
    } catch (error) {
      if (error instanceof BadInputError) return { result: bad('amount', error.message) };
      throw error;
    }
    if (amount <= 0) return { result: bad('amount', 'must be greater than zero') };
  }

  const overRefund = amount === undefined ? undefined : overRefundMessage(record, request.refundId, amount);
  if (overRefund) return { result: bad('amount', overRefund) };

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

/** Ledger states whose `originalAmount` is the conversion's (added, being added, or to be replayed). */
const HAS_AMOUNT = new Set<OrderRecord['state']>(['adding', 'added', 'failed']);

/**
 * What partial refunds may still take from an order's conversion: its amount less every counted
 * refund (applied or pending), as the worker computes it. Undefined when the ledger cannot tell: no
 * record, an amount-less import, or no conversion to lower (skipped, refused).
 */
export function remainingOf(record: OrderRecord | undefined): number | undefined {
  if (!record || !HAS_AMOUNT.has(record.state) || record.amountUnknown) return undefined;
  return record.originalAmount - countedRefunds(record).reduce((sum, r) => sum + r.amount, 0);
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
 * the worker would refuse the whole conversion, which cannot be undone. Undefined when it fits, when
 * `refundId` is already recorded (a resend counts once), or when the ledger cannot tell (the worker
 * then decides). `alongside` are refunds of the order sent before this one and not recorded yet (the
 * earlier rows of a CSV): they reach the worker first, so they take from what remains first. Shared
 * by `POST /refunds` and `connector refund`.
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
  return (
    `${formatMinor(amount, currency)} is more than is left of order ${record?.externalId}: ` +
    `${formatMinor(Math.max(remaining, 0), currency)} remains${after}. A partial refund past it would refuse the ` +
    'conversion; to refund the whole order, send a full refund (full: true, or --full) instead'
  );
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
    if (!source) return { error: bad('source', `unknown source "${request.source.slice(0, 64)}"`) };
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

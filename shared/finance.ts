import { timingSafeEqual } from 'node:crypto';
import * as z from 'zod';
import type { SourceConfig } from './config/sources.ts';
import { ExternalRefundId, OrderRefunded } from './domain/events.ts';
import { CurrencyInput, freeText, idText } from './domain/limits.ts';
import { BadInputError } from './errors.ts';
import { type HttpAnswer, MAX_BODY_BYTES, unsupportedEncoding } from './ingest.ts';
import { countedRefunds, type Ledger, ledgerKey, type OrderRecord, refundOf } from './ledger.ts';
import { formatMinor, parseMoney } from './money.ts';
import type { EventQueue } from './ports.ts';
import { deduplicationId, messageGroupId } from './queueing.ts';
import type { SecretStore } from './secrets.ts';

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
    amount: z.string().min(1).optional(),
    amountCents: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
    full: z.literal(true).optional(),
    reason: z.optional(freeText(500)),
    source: z.string().min(1).optional(),
    // Read like the webhooks read it: `eur` is EUR.
    currency: z.optional(CurrencyInput),
  })
  .superRefine((body, ctx) => {
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
  });
export type FinanceRefundRequest = z.infer<typeof FinanceRefundRequest>;

export interface FinanceDeps {
  readonly sources: ReadonlyMap<string, SourceConfig>;
  readonly ledger: Pick<Ledger, 'get'>;
  readonly queue: EventQueue;
  readonly secrets: SecretStore;
  /** Reference of the finance API key in the secret store (its previous value also passes, for rotation). */
  readonly keyRef: string;
  readonly now: () => Date;
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
  for (const key of keys) {
    const expected = Buffer.from(key);
    if (expected.length === given.length && timingSafeEqual(expected, given)) ok = true;
  }
  return ok;
}

export function presentedKey(headers: Readonly<Record<string, string | undefined>>): string | undefined {
  const direct = headers['x-api-key'];
  if (direct) return direct;
  const auth = headers['authorization'];
  return auth?.startsWith('Bearer ') ? auth.slice('Bearer '.length) : undefined;
}

const bad = (field: string, message: string): HttpAnswer => ({
  status: 400,
  body: { error: 'bad_request', field, message },
});

/** A dependency failed (secret store, ledger, queue): nothing was queued, the caller may retry. */
const unavailable = (message: string): HttpAnswer => ({
  status: 503,
  body: { error: 'unavailable', message },
  headers: { 'retry-after': '5' },
});

/** Authenticates, validates and queues one finance refund. */
export async function submitFinanceRefund(
  deps: FinanceDeps,
  headers: Readonly<Record<string, string | undefined>>,
  rawBody: Buffer,
): Promise<HttpAnswer> {
  if (rawBody.byteLength > MAX_BODY_BYTES) {
    return {
      status: 413,
      body: { error: 'payload_too_large', message: `body over ${MAX_BODY_BYTES} bytes` },
    };
  }
  const encoding = unsupportedEncoding(headers, rawBody);
  if (encoding) {
    return {
      status: 415,
      body: {
        error: 'unsupported_media_type',
        field: 'content-encoding',
        message: `${encoding} bodies are not supported: send the JSON uncompressed`,
      },
    };
  }
  let keys: readonly string[];
  try {
    keys = await deps.secrets.accepted(deps.keyRef);
  } catch {
    return unavailable('finance key not available, retry later');
  }
  // A weak key (a previous one included) is a configuration fault: no key is accepted until it is replaced.
  if (keys.some((key) => weakFinanceKey(key) !== undefined)) {
    return unavailable(
      `the configured finance key is shorter than ${MIN_FINANCE_KEY_LENGTH} characters; the operator must replace it`,
    );
  }
  if (!keyMatches(presentedKey(headers), keys)) {
    return {
      status: 401,
      body: { error: 'unauthorized', message: 'missing or wrong API key (x-api-key header)' },
    };
  }

  let json: unknown;
  try {
    json = JSON.parse(rawBody.toString('utf8'));
  } catch {
    return bad('body', 'body is not valid JSON');
  }
  const parsed = FinanceRefundRequest.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field =
      issue?.code === 'unrecognized_keys' ? (issue.keys[0] ?? '') : (issue?.path.map(String).join('.') ?? '');
    return bad(
      field,
      issue?.code === 'unrecognized_keys' ? `${field} is not allowed` : (issue?.message ?? 'invalid'),
    );
  }
  const request = parsed.data;

  let located: Awaited<ReturnType<typeof locateOrder>>;
  try {
    located = await locateOrder(deps, request);
  } catch {
    // A throttled, timed-out or unreachable ledger: the refund is fine, only this attempt is not.
    return unavailable('ledger unavailable, retry later');
  }
  if ('error' in located) return located.error;
  const { source, record } = located;

  const currency = record?.currency ?? request.currency;
  if (request.currency && record?.currency && request.currency !== record.currency) {
    return bad('currency', `the order is in ${record.currency}, not ${request.currency}`);
  }
  let amount: number | undefined;
  if (request.amountCents !== undefined) amount = request.amountCents;
  if (request.amount !== undefined) {
    if (!currency) return bad('currency', 'the ledger does not know this order: give its currency');
    try {
      amount = parseMoney(request.amount, currency, { field: 'amount' });
    } catch (error) {
      if (error instanceof BadInputError) return bad('amount', error.message);
      throw error;
    }
    if (amount <= 0) return bad('amount', 'must be greater than zero');
  }

  const overRefund = amount === undefined ? undefined : overRefundMessage(record, request.refundId, amount);
  if (overRefund) return bad('amount', overRefund);

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
      groupId: messageGroupId(source.program, event.externalId),
      deduplicationId: deduplicationId(event),
    });
    return {
      status: 202,
      body: {
        status: 'queued',
        messageId,
        source: source.id,
        externalId: event.externalId,
        refundId: event.refundId,
        amount: amount ?? null,
        currency: currency ?? null,
        full: event.full,
      },
    };
  } catch {
    return unavailable('queue unavailable, retry later');
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

/**
 * The reason to refuse a partial refund of `amount` (minor units) that is larger than what remains:
 * the worker would refuse the whole conversion, which cannot be undone. Undefined when it fits, when
 * `refundId` is already recorded (a resend counts once), or when the ledger cannot tell (the worker
 * then decides). Shared by `POST /refunds` and `connector refund`.
 */
export function overRefundMessage(
  record: OrderRecord | undefined,
  refundId: string,
  amount: number,
): string | undefined {
  if (record && refundOf(record, refundId)) return undefined;
  const remaining = remainingOf(record);
  if (remaining === undefined || amount <= remaining) return undefined;
  const currency = record?.currency;
  return (
    `${formatMinor(amount, currency)} is more than is left of order ${record?.externalId}: ` +
    `${formatMinor(Math.max(remaining, 0), currency)} remains. A partial refund past it would refuse the ` +
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
): Promise<{ source: SourceConfig; record: OrderRecord | undefined } | { error: HttpAnswer }> {
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

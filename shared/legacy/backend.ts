import type { LegacyCommission } from '../config/sources.ts';
import { PermanentError } from '../errors.ts';
import {
  currencyExponent,
  formatMoney,
  type Percentage,
  parseMoney,
  parsePercent,
  percentOfMinor,
} from '../money.ts';
import type { AddConversionInput, CallOptions, ConversionBackend, PlatformConversion } from '../ports.ts';
import type { LegacyClient } from './client.ts';
import type { LegacyConversion } from './schemas.ts';

export interface LegacyBackendOptions {
  /** @default Date.now (tells a past `locked_at` from a future one) */
  readonly now?: () => number;
  /**
   * The source's `legacyCommission`: what the add sends as `commission`.
   * @default 0, for the program's rule to compute (the legacy document does not say that it does)
   */
  readonly commission?: LegacyCommission;
}

/** Largest amount in minor units that survives the float of the legacy interface exactly. */
export const LEGACY_MAX_EXACT_MINOR = Math.floor(2 ** 53 / 100);

/** Why a click-attributed order cannot go to a legacy program. */
export const LEGACY_NO_TRACKING_MODE =
  'legacy 2.0 interface has no tracking mode with click ids: configure manual attribution for this source ' +
  '(orders carrying an affiliate tracking id in one of its trackingIdAttributes), or move the program to the ' +
  'current API; then replay this message';

/** Why a partial refund of a legacy conversion is parked. */
export const LEGACY_NO_AMOUNT_UPDATE =
  'legacy 2.0 interface cannot change a conversion amount (it has no update route): this partial refund ' +
  'was not applied; adjust the commission in the platform dashboard, or refund the order in full to ' +
  'refuse the conversion, then discard this message: connector dlq discard <message id>';

/**
 * The worker's view of a program on the legacy 2.0 interface, over `LegacyClient`.
 *
 * Amounts: the worker speaks integer minor units, the legacy interface floats of major units. The
 * conversion happens here only, through strings: `Number(formatMoney(minor, currency))`, the double
 * nearest to the exact decimal (what a JSON encoder of that decimal would send). Below
 * `LEGACY_MAX_EXACT_MINOR` (2^53 / 100 minor units, about 900 billion in major units) that double lies
 * within far less than half a cent of the decimal, so on the way back `toFixed(exponent)` then
 * `parseMoney` recovers the integer exactly; larger amounts are refused rather than rounded.
 */
export class LegacyBackend implements ConversionBackend {
  readonly #client: LegacyClient;
  readonly #now: () => number;
  /** The commission's share of the amount; undefined: send 0 and leave it to the rule. */
  readonly #commissionPercent: Percentage | undefined;
  /** Partnership ids by program and tracking id: they do not change while a Lambda is warm. */
  readonly #partnerships = new Map<string, string>();

  constructor(client: LegacyClient, options: LegacyBackendOptions = {}) {
    this.#client = client;
    this.#now = options.now ?? Date.now;
    const percent = options.commission?.percent;
    this.#commissionPercent =
      percent === undefined ? undefined : parsePercent(percent, 'legacyCommission.percent');
  }

  /**
   * Adds a manual conversion: the partnership found by the affiliate tracking id, and `commission`
   * the source's `legacyCommission` percentage of the amount sent (half a minor unit rounded up), or
   * 0 without one, for the program's rule to compute (the document does not say that 0 means that).
   * The commission only counts here: the interface has no amount update, so it is never sent again.
   * The answer has no id; the worker then finds it by identifier.
   *
   * @throws PermanentError for an order with click ids and no affiliate tracking id (the interface
   * has no tracking mode), or a tracking id
   * that is no partnership of the program
   */
  async add(input: AddConversionInput, call?: CallOptions): Promise<{ id: string | undefined }> {
    // A tracking-mode order is accepted only when it also names its affiliate: crediting anyone
    // else (a house affiliate) would take the commission from the affiliate whose click it was.
    const trackingId = input.affiliateTrackingId;
    if (trackingId === undefined) throw new PermanentError(LEGACY_NO_TRACKING_MODE);
    const partnership = await this.#partnershipOf(input.program, trackingId, call);
    await this.#client.addConversion(
      input.program,
      {
        identifier: input.externalId,
        partnership_id: partnership,
        amount: toLegacyAmount(input.amount, input.currency),
        commission: this.#commissionOf(input.amount, input.currency),
        rule_id: input.rule,
        custom_var: input.subId ? input.subId : null,
      },
      call,
    );
    return { id: undefined };
  }

  /** The oldest conversion of the program with `identifier` = externalId. */
  async find(
    program: string,
    externalId: string,
    call?: CallOptions,
  ): Promise<PlatformConversion | undefined> {
    const [found] = await this.#client.listConversions(
      program,
      { identifier: externalId, orderBy: 'asc', limit: 1 },
      call,
    );
    if (!found) return undefined;
    return this.#toPlatform(found);
  }

  /**
   * Always fails: the legacy interface has no amount update, so a partial refund reaches the DLQ
   * with a reason an operator can act on. Full refunds and cancellations refuse instead.
   */
  async updateAmount(
    _program: string,
    id: string,
    _amount: number,
    reason: string,
    _call?: CallOptions,
  ): Promise<void> {
    // The reason states the wanted amount in the currency's decimals; the amount alone has no currency.
    throw new PermanentError(`${LEGACY_NO_AMOUNT_UPDATE} (conversion ${id}; ${reason})`);
  }

  async refuse(program: string, id: string, reason: string, call?: CallOptions): Promise<void> {
    await this.#client.refuseConversion(program, id, { refuse_reason: reason }, call);
  }

  async accept(program: string, id: string, call?: CallOptions): Promise<void> {
    await this.#client.acceptConversion(program, id, call);
  }

  /** The `commission` of an add of `amount`: converted like the amount, through the exact decimal. */
  #commissionOf(amount: number, currency: string): number {
    if (this.#commissionPercent === undefined) return 0;
    return toLegacyAmount(percentOfMinor(amount, this.#commissionPercent), currency);
  }

  async #partnershipOf(program: string, trackingId: number, call?: CallOptions): Promise<string> {
    const key = `${program}\n${trackingId}`;
    const cached = this.#partnerships.get(key);
    if (cached) return cached;
    const list = await this.#client.listPartnerships(program, { trackingId, limit: 1 }, call);
    const partnership = list.find((p) => p.tracking_id === trackingId);
    if (!partnership) {
      throw new PermanentError(
        `affiliate tracking id ${trackingId} is not the tracking id of a partnership of program ${program}`,
        { field: 'affiliateTrackingId' },
      );
    }
    this.#partnerships.set(key, partnership.id);
    return partnership.id;
  }

  #toPlatform(c: LegacyConversion): PlatformConversion {
    const lockedAt = c.locked_at ? Date.parse(c.locked_at) : Number.NaN;
    const status = c.refused_at ? 'refused' : c.is_pending === 1 ? 'pending' : 'accepted';
    return {
      id: c.id,
      externalId: c.identifier,
      ...(c.currency ? { amount: fromLegacyAmount(c.amount, c.currency), currency: c.currency } : {}),
      status,
      // `locked_at` is the date the conversion will be locked: it may lie in the future.
      isLocked: !Number.isNaN(lockedAt) && lockedAt <= this.#now(),
    };
  }
}

/**
 * Minor units → the float the legacy interface takes, via the exact decimal string
 * (`1999` EUR → `"19.99"` → `19.99`). See `LegacyBackend` for why this is exact enough.
 */
export function toLegacyAmount(minor: number, currency: string): number {
  if (!Number.isSafeInteger(minor) || minor < 0 || minor > LEGACY_MAX_EXACT_MINOR) {
    throw new PermanentError(
      `amount of ${minor} minor units cannot be sent exactly as a float to the legacy 2.0 interface`,
    );
  }
  return Number(formatMoney(minor, currency));
}

/**
 * A float of major units → minor units: `toFixed` rounds away the float's binary noise to the
 * currency's decimals, then `parseMoney` reads the decimal string exactly.
 *
 * @throws PermanentError for a negative, non-finite or too large amount
 */
export function fromLegacyAmount(amount: number, currency: string): number {
  if (!Number.isFinite(amount) || amount < 0 || amount >= Number.MAX_SAFE_INTEGER) {
    throw new PermanentError(`legacy conversion amount ${amount} is not a usable amount`);
  }
  try {
    return parseMoney(amount.toFixed(currencyExponent(currency)), currency);
  } catch (error) {
    throw new PermanentError(`legacy conversion amount ${amount} ${currency} cannot be read as money`, {
      cause: error,
    });
  }
}

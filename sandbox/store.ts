import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import * as z from 'zod';
import type { Currency } from '../shared/affiliate/schemas.ts';
import { prorateMinor } from '../shared/money.ts';
import type {
  AmountChange,
  ConversionKind,
  ConversionStatusValue,
  StoredCommissionAdjustment,
  StoredConversion,
} from './types.ts';

/** A conversion as kept: the raw state from which status and lock are computed on read. */
export interface ConversionRecord {
  seq: number;
  id: string;
  program: string;
  rule: string;
  kind: ConversionKind;
  externalId: string;
  amount: number;
  currency: Currency;
  status: ConversionStatusValue;
  refuseReason: string | null;
  refusedAt: string | null;
  acceptedAt: string | null;
  /** Set by the control route `lock`: locked from this date whatever the clock says. */
  forcedLockedAt: string | null;
  /** Set by the control route `unlock`: never locked until `lock` is called again. */
  lockSuspended: boolean;
  customerId: string | null;
  subId: string;
  createdAt: string;
  date: string;
  cids: string[] | null;
  ip: string | null;
  voucher: string;
  product: string[] | null;
  paymentMethod: string | null;
  affiliateTrackingId: number | null;
  partnership: string | null;
  bonus: number | null;
  notify: boolean;
  amountHistory: AmountChange[];
  /**
   * A commission given when seeding (`control.seedConversion`) or by a legacy add (its `commission`);
   * otherwise `defaultCommission(amount)`.
   */
  commission?: number | null;
}

/**
 * The sandbox's commission rule, the same for every program and rule: 10 % of the amount, rounded
 * half away from zero to the minor unit. (The platform computes commissions from the program's rules.)
 */
export const SANDBOX_COMMISSION_PERCENT = 10;

export function defaultCommission(amount: number): number {
  return prorateMinor(amount, SANDBOX_COMMISSION_PERCENT, 100);
}

/** Settings that the computed view depends on. */
export interface LockSettings {
  lockAfterMs: number;
  autoAcceptAfterMs?: number;
}

/** Status, acceptance and lock of a record at time `now`. */
export function effectiveState(
  record: ConversionRecord,
  now: number,
  settings: LockSettings,
): Pick<StoredConversion, 'status' | 'acceptedAt' | 'isLocked' | 'lockedAt'> {
  let { status, acceptedAt } = record;
  if (status === 'pending' && settings.autoAcceptAfterMs !== undefined) {
    const autoAt = Date.parse(record.createdAt) + settings.autoAcceptAfterMs;
    if (autoAt <= now) {
      status = 'accepted';
      acceptedAt = new Date(autoAt).toISOString();
    }
  }
  let lockedAt: string | null = null;
  if (record.lockSuspended) lockedAt = null;
  else if (record.forcedLockedAt !== null) lockedAt = record.forcedLockedAt;
  else if (status === 'accepted' && acceptedAt !== null) {
    const lockAt = Date.parse(acceptedAt) + settings.lockAfterMs;
    if (lockAt <= now) lockedAt = new Date(lockAt).toISOString();
  }
  return { status, acceptedAt, isLocked: lockedAt !== null, lockedAt };
}

/** The JSON the API answers for a record. */
export function viewConversion(
  record: ConversionRecord,
  now: number,
  settings: LockSettings,
): StoredConversion {
  const {
    seq: _seq,
    forcedLockedAt: _forced,
    lockSuspended: _suspended,
    commission: given,
    ...fields
  } = record;
  return structuredClone({
    ...fields,
    commission: given ?? defaultCommission(record.amount),
    ...effectiveState(record, now, settings),
  });
}

const PersistedState = z.object({
  version: z.literal(1),
  seq: z.number().int().nonnegative(),
  conversions: z.array(z.looseObject({ id: z.string(), seq: z.number() })),
  adjustments: z.array(z.looseObject({ id: z.string() })),
});

/**
 * Conversions and adjustments of the sandbox, optionally mirrored to a JSON file. The file is
 * replaced atomically (temp file + rename) after every change, so a crash never leaves half a file.
 * Conversions are indexed by id and by program + externalId, the keys every write and Conversion
 * info look up: scanning them all made each call cost as much as the conversions stored (a sandbox
 * that ran for a day, or the bench's 2,000 orders, where three scans per order took a quarter of the
 * sandbox's CPU).
 */
export class SandboxStore {
  #conversions: ConversionRecord[] = [];
  readonly #byId = new Map<string, ConversionRecord>();
  /** By `externalKey`, oldest first. */
  readonly #byExternalId = new Map<string, ConversionRecord[]>();
  adjustments: StoredCommissionAdjustment[] = [];
  private seq = 0;
  private readonly persistPath: string | undefined;
  private tempCounter = 0;

  constructor(persistPath?: string) {
    this.persistPath = persistPath;
    if (persistPath !== undefined) this.load(persistPath);
  }

  nextSeq(): number {
    this.seq += 1;
    return this.seq;
  }

  /** Every conversion, in the order stored. */
  get conversions(): readonly ConversionRecord[] {
    return this.#conversions;
  }

  findConversion(id: string): ConversionRecord | undefined {
    return this.#byId.get(id.toLowerCase());
  }

  /** The conversions of `program` with `externalId`, oldest first. */
  withExternalId(program: string, externalId: string): readonly ConversionRecord[] {
    return this.#byExternalId.get(externalKey(program, externalId)) ?? [];
  }

  hasId(id: string): boolean {
    return this.findConversion(id) !== undefined || this.adjustments.some((a) => a.id === id);
  }

  /** Stores a conversion (the caller calls `changed` once it is complete). */
  addConversion(record: ConversionRecord): void {
    this.#conversions.push(record);
    this.#index(record);
  }

  removeConversion(id: string): boolean {
    const record = this.findConversion(id);
    if (record === undefined) return false;
    this.#conversions = this.#conversions.filter((c) => c !== record);
    this.#reindex();
    return true;
  }

  clear(): void {
    this.#conversions = [];
    this.#reindex();
    this.adjustments = [];
    this.seq = 0;
    this.changed();
  }

  /** Call after every mutation. */
  changed(): void {
    if (this.persistPath === undefined) return;
    const state = {
      version: 1,
      seq: this.seq,
      conversions: this.#conversions,
      adjustments: this.adjustments,
    };
    this.tempCounter += 1;
    const temp = `${this.persistPath}.${process.pid}.${this.tempCounter}.tmp`;
    writeFileSync(temp, `${JSON.stringify(state, null, 2)}\n`);
    renameSync(temp, this.persistPath);
  }

  private load(path: string): void {
    mkdirSync(dirname(path), { recursive: true });
    if (!existsSync(path)) return;
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(path, 'utf8'));
    } catch (error) {
      const detail = error instanceof Error ? error.message : 'unreadable';
      throw new Error(`sandbox persistence file ${path} is not valid JSON (${detail}); fix or delete it`);
    }
    const parsed = PersistedState.safeParse(raw);
    if (!parsed.success) {
      throw new Error(`sandbox persistence file ${path} is not a sandbox state file; fix or delete it`);
    }
    this.seq = parsed.data.seq;
    this.#conversions = parsed.data.conversions as unknown as ConversionRecord[];
    this.#reindex();
    this.adjustments = parsed.data.adjustments as unknown as StoredCommissionAdjustment[];
  }

  #index(record: ConversionRecord): void {
    this.#byId.set(record.id, record);
    const key = externalKey(record.program, record.externalId);
    const same = this.#byExternalId.get(key);
    if (same === undefined) this.#byExternalId.set(key, [record]);
    else {
      same.push(record);
      same.sort((a, b) => a.seq - b.seq);
    }
  }

  #reindex(): void {
    this.#byId.clear();
    this.#byExternalId.clear();
    for (const record of this.#conversions) this.#index(record);
  }
}

function externalKey(program: string, externalId: string): string {
  return `${program}\n${externalId}`;
}

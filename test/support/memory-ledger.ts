import {
  awaitsAccept,
  type OrderRecord,
  type RefundReservations,
  storableRecord,
} from '../../shared/ledger.ts';
import type { AcceptIndex, DuePage, Ledger, ReservationLedger } from '../../shared/ports.ts';

/**
 * The Ledger port in memory, with DynamoLedger's contract: `create` only when absent (at version 1),
 * `update` only when the stored version is the one read, then bumping `version` and `updatedAt` on
 * the caller's record. Records are copied in and out, so no caller aliases the stored one. Finance
 * refund reservations are kept apart from the records, as DynamoLedger keeps them in items of their
 * own: `list` never yields them, and writing them never changes a record's version.
 */
export class MemoryLedger implements Ledger, AcceptIndex, ReservationLedger {
  readonly #records = new Map<string, OrderRecord>();
  readonly #reservations = new Map<string, RefundReservations>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  async get(key: string): Promise<OrderRecord | undefined> {
    const stored = this.#records.get(key);
    return stored ? structuredClone(stored) : undefined;
  }

  async create(record: OrderRecord): Promise<boolean> {
    if (this.#records.has(record.key)) return false;
    record.version = 1;
    this.#records.set(record.key, structuredClone(storableRecord(record)));
    return true;
  }

  async update(record: OrderRecord): Promise<boolean> {
    if (this.#records.get(record.key)?.version !== record.version) return false;
    record.version += 1;
    record.updatedAt = new Date(this.#now()).toISOString();
    this.#records.set(record.key, structuredClone(storableRecord(record)));
    return true;
  }

  async reservationsOf(key: string): Promise<RefundReservations | undefined> {
    const stored = this.#reservations.get(key);
    return stored ? structuredClone(stored) : undefined;
  }

  async saveReservations(reservations: RefundReservations): Promise<boolean> {
    if ((this.#reservations.get(reservations.key)?.version ?? 0) !== reservations.version) return false;
    reservations.version += 1;
    this.#reservations.set(reservations.key, structuredClone(reservations));
    return true;
  }

  async *list(program?: string): AsyncIterable<OrderRecord> {
    for (const record of this.#records.values()) {
      if (program === undefined || record.program === program) yield structuredClone(record);
    }
  }

  /**
   * DynamoLedger's due-date index: records that `awaitsAccept`, oldest due first. Paged by key, as a
   * DynamoDB Query is (`ExclusiveStartKey`): the cursor is the last key returned, and the next page
   * starts after it whatever left the index meanwhile (an order accepted in the same run). Like
   * dynalite, a full page carries a cursor even when nothing follows.
   */
  async dueForAccept(
    source: string,
    dueBy: string,
    page: { readonly limit: number; readonly cursor?: string },
  ): Promise<DuePage> {
    const after = page.cursor === undefined ? undefined : parseDueCursor(page.cursor);
    const keys = [...this.#records.values()]
      .filter((r) => r.source === source && awaitsAccept(r) && (r.acceptDueAt ?? '') <= dueBy)
      .map((r) => ({ acceptDueAt: r.acceptDueAt ?? '', key: r.key }))
      .filter((k) => after === undefined || compareDue(k, after) > 0)
      .sort(compareDue)
      .slice(0, page.limit);
    const last = keys.at(-1);
    return {
      keys: keys.map((k) => k.key),
      ...(last && keys.length === page.limit ? { cursor: JSON.stringify(last) } : {}),
    };
  }
}

/** A record's place in the due-date index: its due date, then (for equal dates) its key. */
interface DueKey {
  readonly acceptDueAt: string;
  readonly key: string;
}

/** In code units, not the locale's order: DynamoDB sorts strings by their bytes. */
function compareDue(a: DueKey, b: DueKey): number {
  return compareText(a.acceptDueAt, b.acceptDueAt) || compareText(a.key, b.key);
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function parseDueCursor(cursor: string): DueKey {
  try {
    const parsed = JSON.parse(cursor) as Partial<DueKey>;
    if (typeof parsed.acceptDueAt === 'string' && typeof parsed.key === 'string') {
      return { acceptDueAt: parsed.acceptDueAt, key: parsed.key };
    }
  } catch {
    // Reported below, as DynamoLedger does.
  }
  throw new Error('not a cursor of dueForAccept');
}

import { awaitsAccept, type OrderRecord, storableRecord } from '../../shared/ledger.ts';
import type { AcceptIndex, DuePage, Ledger } from '../../shared/ports.ts';

/**
 * The Ledger port in memory, with DynamoLedger's contract: `create` only when absent (at version 1),
 * `update` only when the stored version is the one read, then bumping `version` and `updatedAt` on
 * the caller's record. Records are copied in and out, so no caller aliases the stored one.
 */
export class MemoryLedger implements Ledger, AcceptIndex {
  readonly #records = new Map<string, OrderRecord>();
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

  async *list(program?: string): AsyncIterable<OrderRecord> {
    for (const record of this.#records.values()) {
      if (program === undefined || record.program === program) yield structuredClone(record);
    }
  }

  /** DynamoLedger's due-date index: records that `awaitsAccept`, oldest due first; the cursor an offset. */
  async dueForAccept(
    source: string,
    dueBy: string,
    page: { readonly limit: number; readonly cursor?: string },
  ): Promise<DuePage> {
    const due = [...this.#records.values()]
      .filter((r) => r.source === source && awaitsAccept(r) && (r.acceptDueAt ?? '') <= dueBy)
      .sort((a, b) => (a.acceptDueAt ?? '').localeCompare(b.acceptDueAt ?? '') || a.key.localeCompare(b.key));
    const from = Number(page.cursor ?? 0);
    const keys = due.slice(from, from + page.limit).map((r) => r.key);
    return from + page.limit < due.length ? { keys, cursor: String(from + page.limit) } : { keys };
  }
}

import { type OrderRecord, storableRecord } from '../../shared/ledger.ts';
import type { Ledger } from '../../shared/ports.ts';

/**
 * The Ledger port in memory, with DynamoLedger's contract: `create` only when absent (at version 1),
 * `update` only when the stored version is the one read, then bumping `version` and `updatedAt` on
 * the caller's record. Records are copied in and out, so no caller aliases the stored one.
 */
export class MemoryLedger implements Ledger {
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
}

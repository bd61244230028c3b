import type { OrderRecord } from '../../shared/ledger.ts';
import type { Ledger } from '../../shared/ports.ts';

/**
 * A worker's ledger port that dies on `kill()`: from then on every call throws, as a worker killed
 * mid-message (a Lambda timeout, a crash) makes no further write. Other workers share `inner`.
 */
export class KillableLedger implements Ledger {
  readonly #inner: Ledger;
  #dead = false;

  constructor(inner: Ledger) {
    this.#inner = inner;
  }

  kill(): void {
    this.#dead = true;
  }

  async get(key: string): Promise<OrderRecord | undefined> {
    this.#alive();
    return this.#inner.get(key);
  }

  async create(record: OrderRecord): Promise<boolean> {
    this.#alive();
    return this.#inner.create(record);
  }

  async update(record: OrderRecord): Promise<boolean> {
    this.#alive();
    return this.#inner.update(record);
  }

  list(program?: string): AsyncIterable<OrderRecord> {
    this.#alive();
    return this.#inner.list(program);
  }

  #alive(): void {
    if (this.#dead) throw new Error('worker killed (Lambda timeout)');
  }
}

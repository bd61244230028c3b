import { PermanentError } from '../../shared/errors.ts';
import type { AddConversionInput, ConversionBackend, PlatformConversion } from '../../shared/ports.ts';

/**
 * The platform's conversions in memory, as the worker's `ConversionBackend` sees them: one per
 * externalId, set by absolute amounts as Update conversion amount does; an add of an externalId it
 * has is answered 409, as the platform answers it.
 */
export class MemoryPlatform implements ConversionBackend {
  /** Every call, in order: `add 1001 5000`, `find 1001`, `update 3000`, `refuse`, `accept`. */
  readonly calls: string[] = [];
  readonly conversions = new Map<string, PlatformConversion>();
  /** Errors the next Update conversion amount calls throw, first in, first out. */
  readonly updateFaults: Error[] = [];

  /** A conversion recorded by another path (the shop's pixel, an earlier add). */
  has(externalId: string, amount: number, currency = 'EUR'): void {
    const id = `c${String(this.conversions.size + 1).padStart(23, '0')}`;
    this.conversions.set(externalId, { id, externalId, amount, currency, status: 'pending' });
  }

  async add(input: AddConversionInput): Promise<{ id: string }> {
    this.calls.push(`add ${input.externalId} ${input.amount}`);
    if (this.conversions.has(input.externalId)) {
      throw new PermanentError(`conversions.add answered 409: externalId ${input.externalId} exists`, {
        status: 409,
      });
    }
    this.has(input.externalId, input.amount, input.currency);
    return { id: this.conversions.get(input.externalId)?.id ?? '' };
  }

  async find(_program: string, externalId: string): Promise<PlatformConversion | undefined> {
    this.calls.push(`find ${externalId}`);
    const found = this.conversions.get(externalId);
    return found ? { ...found } : undefined;
  }

  async updateAmount(_program: string, id: string, amount: number): Promise<void> {
    this.calls.push(`update ${amount}`);
    const fault = this.updateFaults.shift();
    if (fault) throw fault;
    for (const [externalId, c] of this.conversions) {
      if (c.id === id) this.conversions.set(externalId, { ...c, amount });
    }
  }

  async refuse(_program: string, id: string): Promise<void> {
    this.calls.push('refuse');
    for (const [externalId, c] of this.conversions) {
      if (c.id === id) this.conversions.set(externalId, { ...c, status: 'refused' });
    }
  }

  async accept(_program: string, id: string): Promise<void> {
    this.calls.push('accept');
    const found = [...this.conversions].find(([, c]) => c.id === id);
    if (!found)
      throw new PermanentError(`conversions.accept answered 404: no conversion ${id}`, { status: 404 });
    this.conversions.set(found[0], { ...found[1], status: 'accepted' });
  }

  amountOf(externalId: string): number | undefined {
    return this.conversions.get(externalId)?.amount;
  }
}

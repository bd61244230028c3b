import type { ConversionBackend, PlatformConversion } from '../../shared/ports.ts';

/** A platform whose accept answers as scripted per conversion id (default: accepted). */
export class ScriptedPlatform implements ConversionBackend {
  readonly accepts: string[] = [];
  readonly finds: string[] = [];
  readonly status = new Map<string, string>();
  readonly #answer: (id: string, attempt: number) => Error | undefined;
  /** What Conversion info answers for an order: `undefined` (the default) finds `conv-<externalId>`. */
  readonly #lookup: (externalId: string, attempt: number) => Error | 'none' | undefined;

  constructor(
    answer: (id: string, attempt: number) => Error | undefined = () => undefined,
    lookup: (externalId: string, attempt: number) => Error | 'none' | undefined = () => undefined,
  ) {
    this.#answer = answer;
    this.#lookup = lookup;
  }

  async accept(_program: string, id: string): Promise<void> {
    this.accepts.push(id);
    const failure = this.#answer(id, this.accepts.filter((a) => a === id).length);
    if (failure) throw failure;
    this.status.set(id, 'accepted');
  }

  async find(_program: string, externalId: string): Promise<PlatformConversion | undefined> {
    this.finds.push(externalId);
    const scripted = this.#lookup(externalId, this.finds.filter((f) => f === externalId).length);
    if (scripted instanceof Error) throw scripted;
    if (scripted === 'none') return undefined;
    const id = `conv-${externalId}`;
    return { id, externalId, status: this.status.get(id) ?? 'pending' };
  }

  async add(): Promise<{ id: string | undefined }> {
    throw new Error('not used');
  }

  async updateAmount(): Promise<void> {
    throw new Error('not used');
  }

  async refuse(): Promise<void> {
    throw new Error('not used');
  }
}

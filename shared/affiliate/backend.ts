import type { AddConversionInput, CallOptions, ConversionBackend, PlatformConversion } from '../ports.ts';
import type { AffiliateClient } from './client.ts';
import type { ConversionAddBody, Currency } from './schemas.ts';

/** The worker's view of the current API (4.93), over the typed client. */
export class CurrentApiBackend implements ConversionBackend {
  readonly #client: AffiliateClient;

  constructor(client: AffiliateClient) {
    this.#client = client;
  }

  async add(input: AddConversionInput, call?: CallOptions): Promise<{ id: string | undefined }> {
    const common = {
      program: input.program,
      rule: input.rule,
      externalId: input.externalId,
      amount: input.amount,
      currency: input.currency as Currency,
      ...(input.customerId ? { customerId: input.customerId } : {}),
      ...(input.voucher ? { voucher: input.voucher } : {}),
      ...(input.products ? { product: input.products } : {}),
      ...(input.paymentMethod ? { paymentMethod: input.paymentMethod } : {}),
      ...(input.date ? { date: input.date } : {}),
      ...(input.subId ? { subId: input.subId } : {}),
    };
    const body: ConversionAddBody =
      input.kind === 'tracking'
        ? { kind: 'tracking', ...common, cids: input.cids ?? [], ip: input.ip ?? '' }
        : { kind: 'manual', ...common, affiliateTrackingId: input.affiliateTrackingId ?? 0 };
    return this.#client.addConversion(body, call);
  }

  async find(
    program: string,
    externalId: string,
    call?: CallOptions,
  ): Promise<PlatformConversion | undefined> {
    const found = await this.#client.conversionInfo({ program, externalId }, call);
    if (!found) return undefined;
    return {
      id: found.id,
      externalId: found.externalId,
      amount: found.amount,
      currency: found.currency,
      status: String(found.status),
      isLocked: found.isLocked,
      ...(Number.isSafeInteger(found.commission) ? { commission: found.commission } : {}),
    };
  }

  async updateAmount(
    _program: string,
    id: string,
    amount: number,
    reason: string,
    call?: CallOptions,
  ): Promise<void> {
    await this.#client.updateConversionAmount({ id, amount, reason }, call);
  }

  async refuse(program: string, id: string, reason: string, call?: CallOptions): Promise<void> {
    await this.#client.refuseConversion({ program, id, reason }, call);
  }

  async accept(program: string, id: string, call?: CallOptions): Promise<void> {
    await this.#client.acceptConversion({ program, id }, call);
  }
}

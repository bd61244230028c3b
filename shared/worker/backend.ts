/**
 * What the worker needs of the affiliate platform, whichever interface the program lives on (the
 * current API, or the legacy 2.0 one). Amounts are minor units; `find` looks a conversion up by the
 * shop's order id.
 */
export interface CallOptions {
  /** Epoch ms after which no request may start nor wait: the Lambda's remaining time. */
  readonly deadline?: number;
}

export interface AddConversionInput {
  readonly program: string;
  readonly rule: string;
  readonly externalId: string;
  readonly kind: 'tracking' | 'manual';
  readonly amount: number;
  readonly currency: string;
  readonly cids?: string[];
  readonly ip?: string;
  readonly affiliateTrackingId?: number;
  readonly customerId?: string;
  readonly voucher?: string;
  readonly products?: string[];
  readonly paymentMethod?: string;
  /** UTC, `YYYY-MM-DDTHH:mm:ss.sssZ`. */
  readonly date?: string;
  readonly subId?: string;
}

export interface PlatformConversion {
  readonly id: string;
  readonly externalId: string;
  readonly amount?: number;
  readonly currency?: string;
  readonly status: string;
  readonly isLocked?: boolean;
}

export interface ConversionBackend {
  /** Adds a conversion; the answer may lack the id (then `find` gets it). */
  add(input: AddConversionInput, call?: CallOptions): Promise<{ id: string | undefined }>;
  find(program: string, externalId: string, call?: CallOptions): Promise<PlatformConversion | undefined>;
  /** Sets the conversion's amount to an absolute value (repeating it is harmless). */
  updateAmount(
    program: string,
    id: string,
    amount: number,
    reason: string,
    call?: CallOptions,
  ): Promise<void>;
  refuse(program: string, id: string, reason: string, call?: CallOptions): Promise<void>;
}

import type { ConnectorEvent } from './domain/events.ts';
import type { OrderRecord, RefundReservations } from './ledger.ts';

/**
 * The ports: what the use cases (ingest, finance, the worker) need of the world, as small
 * interfaces. The adapters implement them (shared/adapters/ over SQS and DynamoDB, shared/secrets.ts,
 * the two platform backends in shared/affiliate/ and shared/legacy/); the functions and the local
 * stack pick the adapters and hand them in, and tests hand in fakes (test/support/).
 */

// The queue.

/** Attributes an operator reads on a parked message (SQS message attributes, all strings). */
export interface FailureAttributes {
  readonly failureClass: string;
  readonly reason: string;
  readonly platformStatus?: string;
  readonly platformMessage?: string;
  readonly attempts: string;
  readonly firstFailureAt: string;
  readonly lastFailureAt: string;
  readonly eventType?: string;
  readonly externalId?: string;
  readonly source?: string;
}

/** Sends events to the FIFO queue. */
export interface EventQueue {
  /** Resolves with the queue's message id once SQS has stored the message durably. */
  send(event: ConnectorEvent, options: { groupId: string; deduplicationId: string }): Promise<string>;
}

/** What the worker needs of SQS besides the event source mapping: park and back off. */
export interface FailureQueue {
  /** Sends the message, unchanged, to the DLQ with the failure as message attributes. */
  park(
    message: { body: string; groupId: string; deduplicationId: string },
    failure: FailureAttributes,
  ): Promise<void>;
  /** Hides a message for `seconds` more, so its next receive comes after a backoff. */
  delay(receiptHandle: string, seconds: number): Promise<void>;
}

// The ledger (its records and their rules are in ledger.ts).

export interface Ledger {
  get(key: string): Promise<OrderRecord | undefined>;
  /** Creates the record unless one exists; false when it does. */
  create(record: OrderRecord): Promise<boolean>;
  /**
   * Writes the record with `version` incremented, only if the stored version is still the one read;
   * false when another writer got there first. Mutates `record.version` on success.
   */
  update(record: OrderRecord): Promise<boolean>;
  /** Every record of a program (reconciliation). */
  list(program?: string): AsyncIterable<OrderRecord>;
}

/**
 * Where `POST /refunds` reserves refunds, partial or full, before it queues them
 * (`RefundReservations`): an item per order beside its record, with the record's optimistic concurrency.
 */
export interface ReservationLedger {
  /** The order's reservations (`key` is its ledger key); undefined when none was ever written. */
  reservationsOf(key: string): Promise<RefundReservations | undefined>;
  /**
   * Writes them: creates them when `version` is 0, else only if the stored version is still the one
   * read; false when another request got there first. Increments `reservations.version` on success.
   */
  saveReservations(reservations: RefundReservations): Promise<boolean>;
}

/** One page of the ledger's due-date index: the keys of records due, and where the next page starts. */
export interface DuePage {
  readonly keys: readonly string[];
  /** Opaque; absent on the last page. */
  readonly cursor?: string;
}

/**
 * The ledger's sparse index of conversions waiting for acceptance (`awaitsAccept`), by source and
 * due date: the accept job reads it instead of scanning the table. Eventually consistent: read each
 * record again (`Ledger.get`) before acting on it.
 */
export interface AcceptIndex {
  /** Keys of `source`'s records due at or before `dueBy` (ISO), oldest first. */
  dueForAccept(
    source: string,
    dueBy: string,
    page: { readonly limit: number; readonly cursor?: string },
  ): Promise<DuePage>;
}

// Secrets.

/**
 * Where secret values come from: Secrets Manager in AWS, env or `.env` locally. A value is one
 * secret whatever characters it holds (WooCommerce's generated secrets contain commas); rotation
 * keeps a second, previous value beside it instead of packing two into one.
 */
export interface SecretStore {
  /**
   * The current value of a reference (a secret name or ARN in AWS, an env variable name locally).
   * `fresh` skips the cache: for a credential the other side has just refused.
   */
  get(ref: string, options?: { readonly fresh?: boolean }): Promise<string>;
  /**
   * Every value to accept while a secret is rotated: the current one, then the previous one when
   * there is one. For verifying what others sign or present, never for signing.
   */
  accepted(ref: string): Promise<readonly string[]>;
}

// Outbound HTTP.

/** What the platform clients read of an answer's headers: fetch's `Headers` has it. */
export interface ResponseHeaders extends Iterable<[string, string]> {
  /** The header's value (names are case-insensitive), repeated ones joined by ", "; null when absent. */
  get(name: string): string | null;
}

/** An answer, as the platform clients read it: fetch's `Response` is one. */
export interface HttpAnswer {
  readonly status: number;
  readonly headers: ResponseHeaders;
  /** The body as UTF-8 text; rejects when the signal aborts before it has all come. */
  text(): Promise<string>;
}

/** One request: a redirect is never followed (it comes back as the 3xx it is). */
export interface HttpRequestInit {
  readonly method: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string | undefined;
  /** Ends the request, and the reading of its answer, when it aborts. */
  readonly signal: AbortSignal;
  readonly redirect?: 'manual';
}

/**
 * Sends one HTTP request: fetch-shaped, so `globalThis.fetch` is one. The platform clients use
 * `nodeHttpFetch` (shared/adapters/node-http-transport.ts).
 */
export type HttpFetch = (url: URL, init: HttpRequestInit) => Promise<HttpAnswer>;

// The affiliate platform.

/** Bounds of one call to the platform. */
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
  /** The conversion's commission in minor units, when the platform gives it (late refunds). */
  readonly commission?: number;
}

/**
 * What the worker needs of the affiliate platform, whichever interface the program lives on (the
 * current API, or the legacy 2.0 one). Amounts are minor units; `find` looks a conversion up by the
 * shop's order id.
 */
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
  /**
   * Accepts a pending conversion. A refused or locked one is a `PermanentError` (422 on the current
   * API; on the legacy one an already accepted conversion is refused too: look it up to tell).
   */
  accept(program: string, id: string, call?: CallOptions): Promise<void>;
}

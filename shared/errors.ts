/**
 * The connector's failure taxonomy. Every failure is one of these classes so that the worker knows
 * whether to retry (transient), park the message in the DLQ with a reason (permanent, configuration),
 * reject the caller with a 4xx (bad input), or leave a refund the platform can no longer apply to
 * finance (late refund: recorded in the ledger, never retried, not parked).
 */
export type FailureClass = 'transient' | 'permanent' | 'bad_input' | 'configuration' | 'late_refund';

export interface ConnectorErrorDetails {
  /** HTTP status the platform answered, when the failure came from an HTTP call. */
  readonly status?: number;
  /** The platform's own message, safe to show an operator (never contains our secrets). */
  readonly platformMessage?: string;
  /** Field that failed validation, as a dotted path (`cids`, `line_items.0.price`). */
  readonly field?: string;
  /** Milliseconds the platform asked us to wait before retrying. */
  readonly retryAfterMs?: number;
  /**
   * The request failed after it may have reached the platform (no answer in time, the connection lost
   * after sending, a 500/502/504): the platform may have carried it out.
   */
  readonly ambiguous?: boolean;
  readonly cause?: unknown;
}

export abstract class ConnectorError extends Error {
  abstract readonly failureClass: FailureClass;
  readonly status?: number;
  readonly platformMessage?: string;
  readonly field?: string;
  readonly retryAfterMs?: number;
  /** See `ConnectorErrorDetails.ambiguous`. */
  readonly ambiguous: boolean;

  constructor(message: string, details: ConnectorErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.status = details.status;
    this.platformMessage = details.platformMessage;
    this.field = details.field;
    this.retryAfterMs = details.retryAfterMs;
    this.ambiguous = details.ambiguous ?? false;
  }
}

/** Worth retrying with backoff: 429, 5xx, network errors, timeouts, a lease held by another worker. */
export class TransientError extends ConnectorError {
  override readonly name = 'TransientError';
  readonly failureClass = 'transient';
}

/** Will fail again the same way: a business refusal or a 4xx. Goes to the DLQ with its reason. */
export class PermanentError extends ConnectorError {
  override readonly name = 'PermanentError';
  readonly failureClass = 'permanent';
}

/**
 * A refund the platform no longer lets the connector apply: the conversion is locked (accepted and
 * past its waiting period), or accepted and the refund is partial (only a pending conversion's amount
 * can change). Thrown once the ledger holds it as a late refund: retrying changes nothing, and the DLQ
 * is no place for it either; finance settles it with a commission adjustment (`connector late-refunds`).
 */
export class LateRefundError extends ConnectorError {
  override readonly name = 'LateRefundError';
  readonly failureClass = 'late_refund';
}

/** Wrong credentials or settings (401/403, unknown program): an operator must fix configuration. */
export class ConfigurationError extends ConnectorError {
  override readonly name = 'ConfigurationError';
  readonly failureClass = 'configuration';
}

/** The caller sent something invalid: answered with a 4xx naming the field, never queued. */
export class BadInputError extends ConnectorError {
  override readonly name = 'BadInputError';
  readonly failureClass = 'bad_input';
}

export function isConnectorError(error: unknown): error is ConnectorError {
  return error instanceof ConnectorError;
}

/** Classifies anything thrown; unknown errors count as transient so nothing is dropped on a bug. */
export function failureClassOf(error: unknown): FailureClass {
  return isConnectorError(error) ? error.failureClass : 'transient';
}

/** The most of a message the connector did not write that a log line, a reason or the CLI quotes. */
const MAX_FOREIGN_MESSAGE = 300;

/**
 * A message the connector did not write (an AWS service's, a library's) as a log line, a DLQ
 * reason or the CLI may quote it: its first line, anything shaped like a credential or a signature
 * redacted, cut at `max` characters (300). AWS's answer to a request whose signature it cannot check echoes
 * the request: SignatureDoesNotMatch goes on after a blank line with the canonical request (the
 * session token in `x-amz-security-token` among its headers), IncompleteSignatureException quotes the
 * Authorization header on its one line.
 */
export function foreignMessage(message: string, max = MAX_FOREIGN_MESSAGE): string {
  const line = message.split(/\r?\n/, 1)[0] ?? '';
  const redacted = line
    .replace(/\b(Credential|Signature|SignedHeaders)=[^\s,]+/gi, '$1=[redacted]')
    .replace(/\b(x-amz-security-token|x-amz-credential|x-amz-signature)([=:])[^\s&,']+/gi, '$1$2[redacted]')
    .replace(/\b(Bearer|Basic)\s+[\w.~+/=-]{8,}/g, '$1 [redacted]');
  return redacted.length > max ? `${redacted.slice(0, max)}…` : redacted;
}

/**
 * A short, log-safe description of any thrown value (no stack, no request bodies): the connector's
 * own errors with their message, any other with its name and `foreignMessage`.
 */
export function describeError(error: unknown): string {
  if (error instanceof ConnectorError) return `${error.name}: ${error.message}`;
  if (error instanceof Error) return `${error.name}: ${foreignMessage(error.message)}`;
  return foreignMessage(String(error));
}

/** Missing or wrong webhook signature or API key: answered 401, never queued. */
export class UnauthorizedError extends ConnectorError {
  override readonly name = 'UnauthorizedError';
  readonly failureClass = 'bad_input';
}

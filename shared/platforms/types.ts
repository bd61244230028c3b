import type { SourceConfig } from '../config/sources.ts';
import type { ConnectorEventInput } from '../domain/events.ts';

/** An HTTP delivery as the ingest handler sees it: header names lower-cased, body untouched. */
export interface WebhookRequest {
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The exact bytes received: signatures are computed over these, never over re-serialized JSON. */
  readonly rawBody: Buffer;
}

export interface AdapterContext {
  readonly source: SourceConfig;
  /** Current signing secrets of the source; several at once during rotation. */
  readonly secrets: readonly string[];
  readonly now: Date;
}

export type AdapterResult =
  /** Verified and mapped: queue these (usually one). */
  | { readonly kind: 'events'; readonly events: ConnectorEventInput[] }
  /** Verified, but a topic or state we do not act on: answer 200 so the platform does not retry. */
  | { readonly kind: 'ignored'; readonly reason: string }
  /** An unsigned handshake the platform needs answered with 200 (WooCommerce `webhook_id=` ping). */
  | { readonly kind: 'ping' };

/**
 * One per shop platform. `handle` verifies the signature on the raw body first (throws
 * `UnauthorizedError`), then maps (throws `BadInputError` naming the field).
 */
export interface PlatformAdapter {
  readonly platform: SourceConfig['platform'];
  handle(request: WebhookRequest, context: AdapterContext): AdapterResult;
}

import type { SourceConfig } from '../config/sources.ts';
import type { ConnectorEvent } from '../domain/events.ts';
import type { HttpRequest } from '../http/types.ts';

export interface AdapterContext {
  readonly source: SourceConfig;
  /** Current signing secrets of the source; several at once during rotation. */
  readonly secrets: readonly string[];
  readonly now: Date;
}

export type AdapterResult =
  /**
   * Verified, mapped and checked against the queue's contract (`mapped`): queue these (usually one).
   * `skippedFields`: the payload fields of attribute values left out as invalid (`extractAttribution`),
   * for the operator's log line; paths only, as the values are the buyer's and may be anything.
   */
  | { readonly kind: 'events'; readonly events: ConnectorEvent[]; readonly skippedFields?: string[] }
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
  handle(request: HttpRequest, context: AdapterContext): AdapterResult;
  /**
   * `handle` without the signature check, for a delivery whose origin is established otherwise: the
   * backfill rebuilds it from what it read from the shop's own API with the shop's credentials.
   * Never for anything that came in over the webhook door.
   */
  map(request: HttpRequest, context: AdapterContext): AdapterResult;
}

/** The adapter of a platform, loaded on first use (shared/platforms/registry.ts). */
export type AdapterLoader = (platform: SourceConfig['platform']) => Promise<PlatformAdapter>;

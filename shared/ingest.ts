import type { SourceConfig } from './config/sources.ts';
import type { ConnectorEvent } from './domain/events.ts';
import { quoted } from './domain/text.ts';
import { ConfigurationError } from './errors.ts';
import {
  answerFor,
  type EdgeOutcome,
  type EdgeResult,
  outcomeOf,
  refusalOf,
  refusedBody,
} from './http/answers.ts';
import type { HttpAnswer, HttpRequest } from './http/types.ts';
import type { AdapterLoader, AdapterResult } from './platforms/types.ts';
import type { EventQueue, SecretStore } from './ports.ts';
import { MAX_EVENT_BYTES, oversizedEvent, sendEvents } from './queueing.ts';

/**
 * The most events one delivery may queue. Each is one SQS send (tens of milliseconds), one after
 * another to keep an order's events in order: thousands (a WooCommerce `refunds[]` or a Stripe
 * charge's `refunds.data` a plugin filled) would outlast the function's 10 s, and every retry of the
 * shop would get a 5xx after queueing part of them again. Real deliveries carry one, or a few refunds.
 */
export const MAX_EVENTS_PER_DELIVERY = 100;

export interface IngestDeps {
  readonly sources: ReadonlyMap<string, SourceConfig>;
  readonly adapterFor: AdapterLoader;
  readonly secrets: SecretStore;
  readonly queue: EventQueue;
  readonly now: () => Date;
  /** Told about every outcome (for logs and metrics); never given secrets or bodies. */
  readonly observe?: (outcome: IngestOutcome) => void;
}

export interface IngestOutcome extends EdgeOutcome {
  readonly source: string;
  readonly externalIds?: string[];
  readonly messageIds?: string[];
}

/**
 * Verifies a webhook, maps it to connector events and queues them, answering only once SQS has the
 * messages: 202 queued, 200 ignored/ping, 401 bad signature, 404 unknown source, 400 naming the field,
 * 413 too large (the body, an event once queued, or more than `MAX_EVENTS_PER_DELIVERY` events), 415
 * compressed, 503 when the queue is unavailable (so the platform retries).
 */
export async function ingestWebhook(
  deps: IngestDeps,
  sourceId: string,
  request: HttpRequest,
): Promise<HttpAnswer> {
  const { result, events = [], messageIds } = await ingest(deps, sourceId, request);
  const answer = answerFor(result);
  deps.observe?.({
    // An unknown source is what the caller wrote in the path (the local stack's catch-all route).
    source: deps.sources.has(sourceId) ? sourceId : quoted(sourceId),
    ...outcomeOf(result, answer),
    ...(messageIds ? { externalIds: events.map((e) => e.externalId), messageIds } : {}),
  });
  return answer;
}

async function ingest(
  deps: IngestDeps,
  sourceId: string,
  request: HttpRequest,
): Promise<{ result: EdgeResult; events?: readonly ConnectorEvent[]; messageIds?: string[] }> {
  const source = deps.sources.get(sourceId);
  if (!source) {
    return {
      result: {
        kind: 'not_found',
        message: `unknown source "${quoted(sourceId)}"`,
        detail: 'unknown source',
      },
    };
  }
  const refused = refusedBody(request);
  if (refused) return { result: refused };

  let secrets: readonly string[];
  try {
    secrets = await deps.secrets.accepted(source.secretRef);
  } catch (error) {
    // A missing secret is our configuration, not the caller's fault: 503 keeps the platform retrying.
    if (error instanceof ConfigurationError) return { result: refusalOf(error) };
    const detail = 'secret store unavailable';
    return { result: { kind: 'unavailable', message: 'try again later', retryAfterSeconds: 30, detail } };
  }

  let mapped: AdapterResult;
  try {
    mapped = (await deps.adapterFor(source.platform)).handle(request, { source, secrets, now: deps.now() });
  } catch (error) {
    return { result: refusalOf(error) };
  }
  if (mapped.kind !== 'events') return { result: mapped };
  const events = mapped.events;
  if (events.length > MAX_EVENTS_PER_DELIVERY) {
    return {
      result: {
        kind: 'too_large',
        message: `this body maps to ${events.length} events, over the ${MAX_EVENTS_PER_DELIVERY} one delivery may queue`,
        detail: 'too many events for one delivery',
      },
    };
  }

  // SQS cannot hold it, now or later: 413, like a body over the limit, rather than 503 forever.
  const oversized = oversizedEvent(events);
  if (oversized) {
    return {
      result: {
        kind: 'too_large',
        message: `the ${oversized.type} event mapped from this body is over ${MAX_EVENT_BYTES} bytes once queued`,
        detail: 'event too large for the queue',
      },
    };
  }

  try {
    const messageIds = await sendEvents(deps.queue, source, events);
    const detail = skippedDetail(mapped.skippedFields);
    return {
      result: { kind: 'queued', receipt: { messageIds }, ...(detail ? { detail } : {}) },
      events,
      messageIds,
    };
  } catch (error) {
    return {
      result: {
        kind: 'unavailable',
        message: 'queue unavailable, retry later',
        retryAfterSeconds: 5,
        detail: `queue: ${(error as Error).name}`,
      },
    };
  }
}

/** Fields named in a log line's detail at most: a cart can hold any number of junk attributes. */
const MAX_SKIPPED_NAMED = 10;

/**
 * The log line's note of attribute values the adapter skipped as invalid (`AdapterResult`): their
 * fields only, since the values are the buyer's and may be anything. The shop still gets its 202.
 */
function skippedDetail(fields: readonly string[] | undefined): string | undefined {
  if (!fields || fields.length === 0) return undefined;
  const named = fields.slice(0, MAX_SKIPPED_NAMED).join(', ');
  const more = fields.length - MAX_SKIPPED_NAMED;
  return `skipped invalid attributes: ${named}${more > 0 ? ` (+${more} more)` : ''}`;
}

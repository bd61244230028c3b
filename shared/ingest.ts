import type { SourceConfig } from './config/sources.ts';
import type { ConnectorEvent } from './domain/events.ts';
import { BadInputError, ConfigurationError, UnauthorizedError } from './errors.ts';
import { checkEvents } from './platforms/mapping.ts';
import type { PlatformAdapter, WebhookRequest } from './platforms/types.ts';
import type { EventQueue, SecretStore } from './ports.ts';
import { deduplicationId, encodeEvent, MAX_EVENT_BYTES, messageGroupId } from './queueing.ts';

/** Bodies above this are refused with 413 before any parsing (API Gateway's own limit is 10 MiB). */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * The encoding of a compressed body (`content-encoding` other than identity, or gzip's magic bytes,
 * which no JSON or form body starts with): signatures are over the JSON, so it could only fail as a
 * "bad signature" that sends the operator looking at secrets.
 */
export function unsupportedEncoding(
  headers: Readonly<Record<string, string | undefined>>,
  rawBody: Buffer,
): string | undefined {
  const declared = headers['content-encoding']?.trim().toLowerCase();
  if (declared && declared !== 'identity') return declared.slice(0, 32);
  if (rawBody[0] === 0x1f && rawBody[1] === 0x8b) return 'gzip';
  return undefined;
}

export interface IngestDeps {
  readonly sources: ReadonlyMap<string, SourceConfig>;
  readonly adapterFor: (platform: SourceConfig['platform']) => PlatformAdapter;
  readonly secrets: SecretStore;
  readonly queue: EventQueue;
  readonly now: () => Date;
  /** Told about every outcome (for logs and metrics); never given secrets or bodies. */
  readonly observe?: (outcome: IngestOutcome) => void;
}

export interface HttpAnswer {
  readonly status: number;
  readonly body: Record<string, unknown>;
  readonly headers?: Record<string, string>;
}

export interface IngestOutcome {
  readonly source: string;
  readonly status: number;
  readonly result: 'queued' | 'ignored' | 'ping' | 'rejected' | 'unavailable';
  readonly detail?: string;
  readonly externalIds?: string[];
  readonly messageIds?: string[];
}

/**
 * Verifies a webhook, maps it to connector events and queues them, answering only once SQS has the
 * messages: 202 queued, 200 ignored/ping, 401 bad signature, 404 unknown source, 400 naming the field,
 * 413 too large (the body, or the event once queued), 415 compressed, 503 when the queue is
 * unavailable (so the platform retries).
 */
export async function ingestWebhook(
  deps: IngestDeps,
  sourceId: string,
  request: WebhookRequest,
): Promise<HttpAnswer> {
  const answer = (outcome: Omit<IngestOutcome, 'source'>, http: HttpAnswer): HttpAnswer => {
    deps.observe?.({ source: sourceId, ...outcome });
    return http;
  };

  const source = deps.sources.get(sourceId);
  if (!source) {
    return answer(
      { status: 404, result: 'rejected', detail: 'unknown source' },
      { status: 404, body: { error: 'not_found', message: `unknown source "${sourceId.slice(0, 64)}"` } },
    );
  }
  if (request.rawBody.byteLength > MAX_BODY_BYTES) {
    return answer(
      { status: 413, result: 'rejected', detail: 'body too large' },
      { status: 413, body: { error: 'payload_too_large', message: `body over ${MAX_BODY_BYTES} bytes` } },
    );
  }

  const encoding = unsupportedEncoding(request.headers, request.rawBody);
  if (encoding) {
    return answer(
      { status: 415, result: 'rejected', detail: `content-encoding ${encoding}` },
      {
        status: 415,
        body: {
          error: 'unsupported_media_type',
          field: 'content-encoding',
          message: `${encoding} bodies are not supported: send the JSON uncompressed`,
        },
      },
    );
  }

  let secrets: readonly string[];
  try {
    secrets = await deps.secrets.accepted(source.secretRef);
  } catch (error) {
    // A missing secret is our configuration, not the caller's fault: 503 keeps the platform retrying.
    const detail = error instanceof ConfigurationError ? error.message : 'secret store unavailable';
    return answer(
      { status: 503, result: 'unavailable', detail },
      {
        status: 503,
        body: { error: 'unavailable', message: 'try again later' },
        headers: { 'retry-after': '30' },
      },
    );
  }

  let events: ConnectorEvent[];
  try {
    const result = deps.adapterFor(source.platform).handle(request, { source, secrets, now: deps.now() });
    if (result.kind === 'ping') {
      return answer({ status: 200, result: 'ping' }, { status: 200, body: { status: 'ok' } });
    }
    if (result.kind === 'ignored') {
      return answer(
        { status: 200, result: 'ignored', detail: result.reason },
        { status: 200, body: { status: 'ignored', reason: result.reason } },
      );
    }
    // The adapters check their events; this names the field of any that slipped through.
    events = checkEvents(result.events);
  } catch (error) {
    if (error instanceof UnauthorizedError) {
      return answer(
        { status: 401, result: 'rejected', detail: error.message },
        { status: 401, body: { error: 'unauthorized', message: error.message } },
      );
    }
    if (error instanceof BadInputError) {
      return answer(
        { status: 400, result: 'rejected', detail: `${error.field ?? ''}: ${error.message}` },
        { status: 400, body: { error: 'bad_request', field: error.field ?? null, message: error.message } },
      );
    }
    if (error instanceof ConfigurationError) {
      return answer(
        { status: 503, result: 'unavailable', detail: error.message },
        {
          status: 503,
          body: { error: 'unavailable', message: 'try again later' },
          headers: { 'retry-after': '30' },
        },
      );
    }
    // A RangeError is arithmetic on the payload's numbers gone past what an amount can be (the money
    // helpers name the field; this is the net for any that does not): the body is at fault, not us.
    if (error instanceof RangeError) {
      return answer(
        { status: 400, result: 'rejected', detail: `out of range: ${error.message}` },
        {
          status: 400,
          body: { error: 'bad_request', field: null, message: 'a value in the payload is out of range' },
        },
      );
    }
    if (error instanceof Error && error.name === 'ZodError') {
      return answer(
        { status: 400, result: 'rejected', detail: 'mapped event invalid' },
        {
          status: 400,
          body: { error: 'bad_request', field: null, message: 'the payload does not map to a valid event' },
        },
      );
    }
    throw error;
  }

  // SQS cannot hold it, now or later: 413, like a body over the limit, rather than 503 forever.
  const oversized = events.find((e) => encodeEvent(e).length > MAX_EVENT_BYTES);
  if (oversized) {
    return answer(
      { status: 413, result: 'rejected', detail: 'event too large for the queue' },
      {
        status: 413,
        body: {
          error: 'payload_too_large',
          message: `the ${oversized.type} event mapped from this body is over ${MAX_EVENT_BYTES} bytes once queued`,
        },
      },
    );
  }

  try {
    const messageIds: string[] = [];
    for (const event of events) {
      messageIds.push(
        await deps.queue.send(event, {
          groupId: messageGroupId(source.program, event.externalId),
          deduplicationId: deduplicationId(event),
        }),
      );
    }
    return answer(
      { status: 202, result: 'queued', externalIds: events.map((e) => e.externalId), messageIds },
      { status: 202, body: { status: 'queued', messageIds } },
    );
  } catch (error) {
    return answer(
      { status: 503, result: 'unavailable', detail: `queue: ${(error as Error).name}` },
      {
        status: 503,
        body: { error: 'unavailable', message: 'queue unavailable, retry later' },
        headers: { 'retry-after': '5' },
      },
    );
  }
}

import { BadInputError, ConfigurationError, UnauthorizedError } from '../errors.ts';
import type { HttpAnswer, HttpRequest } from './types.ts';

/** Bodies above this are refused with 413 before any parsing (API Gateway's own limit is 10 MiB). */
export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * What an endpoint made of a request, before it is an HTTP answer: `kind` is the reason, and
 * `answerFor` is the one place that turns a reason into a status and a body. `detail` is for the
 * observer's log line only and never reaches the body.
 */
export type EdgeResult = (
  | { readonly kind: 'queued'; readonly receipt: Readonly<Record<string, unknown>> }
  | { readonly kind: 'ignored'; readonly reason: string }
  | { readonly kind: 'ping' }
  | { readonly kind: 'bad_input'; readonly field: string | null; readonly message: string }
  | { readonly kind: 'unauthorized'; readonly message: string }
  | { readonly kind: 'not_found'; readonly message: string }
  /**
   * The request is well formed but contradicts what is already recorded under its id (finance's
   * refund id at another amount): sending it again cannot succeed, another id can.
   */
  | { readonly kind: 'conflict'; readonly field: string; readonly message: string }
  | { readonly kind: 'too_large'; readonly message: string }
  | { readonly kind: 'compressed'; readonly encoding: string }
  /**
   * Nothing was queued and a retry may succeed: the platform (or finance's tool) tries again. `busy`
   * when nothing is out of reach, only requests of one order collided (finance's reservations): the
   * retry settles it, and no outage is counted.
   */
  | {
      readonly kind: 'unavailable';
      readonly message: string;
      readonly retryAfterSeconds: number;
      readonly busy?: true;
    }
) & { readonly detail?: string };

/** How an observer classes a result: 4xx are `rejected`, 503 is `unavailable`, or `busy` (see `EdgeResult`). */
export type EdgeVerdict = 'queued' | 'ignored' | 'ping' | 'rejected' | 'unavailable' | 'busy';

/** The HTTP answer of a result: the only place a reason becomes a status. */
export function answerFor(result: EdgeResult): HttpAnswer {
  switch (result.kind) {
    case 'queued':
      return { status: 202, body: { status: 'queued', ...result.receipt } };
    case 'ignored':
      return { status: 200, body: { status: 'ignored', reason: result.reason } };
    case 'ping':
      return { status: 200, body: { status: 'ok' } };
    case 'bad_input':
      return { status: 400, body: { error: 'bad_request', field: result.field, message: result.message } };
    case 'unauthorized':
      return { status: 401, body: { error: 'unauthorized', message: result.message } };
    case 'not_found':
      return { status: 404, body: { error: 'not_found', message: result.message } };
    case 'conflict':
      return { status: 409, body: { error: 'conflict', field: result.field, message: result.message } };
    case 'too_large':
      return { status: 413, body: { error: 'payload_too_large', message: result.message } };
    case 'compressed':
      return {
        status: 415,
        body: {
          error: 'unsupported_media_type',
          field: 'content-encoding',
          message: `${result.encoding} bodies are not supported: send the JSON uncompressed`,
        },
      };
    case 'unavailable':
      return {
        status: 503,
        body: { error: 'unavailable', message: result.message },
        headers: { 'retry-after': String(result.retryAfterSeconds) },
      };
  }
}

/** What an endpoint's observer is told of every request (for logs and metrics): never a secret or a body. */
export interface EdgeOutcome {
  readonly status: number;
  readonly result: EdgeVerdict;
  /** The `detail` of the result, else what its body says. */
  readonly detail?: string;
}

/** The outcome of a result answered with `answer`. */
export function outcomeOf(result: EdgeResult, answer: HttpAnswer): EdgeOutcome {
  const verdict: EdgeVerdict =
    result.kind === 'queued' || result.kind === 'ignored' || result.kind === 'ping'
      ? result.kind
      : result.kind === 'unavailable'
        ? result.busy
          ? 'busy'
          : 'unavailable'
        : 'rejected';
  return { status: answer.status, result: verdict, detail: detailOf(result) };
}

function detailOf(result: EdgeResult): string | undefined {
  if (result.detail !== undefined) return result.detail;
  if (result.kind === 'bad_input' || result.kind === 'conflict')
    return `${result.field ?? ''}: ${result.message}`;
  if (result.kind === 'ignored') return result.reason;
  if (result.kind === 'compressed') return `content-encoding ${result.encoding}`;
  return 'message' in result ? result.message : undefined;
}

/**
 * The reason of a typed error thrown while reading a request: a bad signature is 401, bad input a
 * 400 naming the field, our own configuration a 503 (the caller is not at fault, and retries).
 *
 * @throws the error itself when it has no reason here (a bug is not dressed up as a 4xx)
 */
export function refusalOf(error: unknown): EdgeResult {
  if (error instanceof UnauthorizedError) return { kind: 'unauthorized', message: error.message };
  if (error instanceof BadInputError) {
    return { kind: 'bad_input', field: error.field ?? null, message: error.message };
  }
  if (error instanceof ConfigurationError) {
    return { kind: 'unavailable', message: 'try again later', retryAfterSeconds: 30, detail: error.message };
  }
  // A RangeError is arithmetic on the payload's numbers gone past what an amount can be (the money
  // helpers name the field; this is the net for any that does not): the body is at fault, not us.
  if (error instanceof RangeError) {
    return {
      kind: 'bad_input',
      field: null,
      message: 'a value in the payload is out of range',
      detail: `out of range: ${error.message}`,
    };
  }
  throw error;
}

/**
 * The encoding of a compressed body (`content-encoding` other than identity, or gzip's magic bytes,
 * which no JSON or form body starts with): signatures are over the JSON, so it could only fail as a
 * "bad signature" that sends the operator looking at secrets.
 */
function unsupportedEncoding(
  headers: Readonly<Record<string, string | undefined>>,
  rawBody: Buffer,
): string | undefined {
  const declared = headers['content-encoding']?.trim().toLowerCase();
  if (declared && declared !== 'identity') return declared.slice(0, 32);
  if (rawBody[0] === 0x1f && rawBody[1] === 0x8b) return 'gzip';
  return undefined;
}

/** The checks every endpoint makes of a body before reading it: 413 over the limit, 415 compressed. */
export function refusedBody(request: HttpRequest): EdgeResult | undefined {
  if (request.rawBody.byteLength > MAX_BODY_BYTES) {
    return { kind: 'too_large', message: `body over ${MAX_BODY_BYTES} bytes`, detail: 'body too large' };
  }
  const encoding = unsupportedEncoding(request.headers, request.rawBody);
  return encoding === undefined ? undefined : { kind: 'compressed', encoding };
}

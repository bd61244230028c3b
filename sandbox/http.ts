import type { IncomingMessage, ServerResponse } from 'node:http';
import * as z from 'zod/mini';
import { firstIssue } from '../shared/validation.ts';

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Payload Too Large',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
};

/** The reason phrase of a status, as the `error` field of error bodies. */
export function reasonOf(status: number): string {
  return REASONS[status] ?? 'Error';
}

/** A refusal answered as `{ statusCode, error, message, field? }`. */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  readonly status: number;
  readonly field?: string;
  readonly headers: Record<string, string>;

  constructor(status: number, message: string, field?: string, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.field = field;
    this.headers = headers;
  }

  body(): ErrorBody {
    const body: ErrorBody = { statusCode: this.status, error: reasonOf(this.status), message: this.message };
    if (this.field !== undefined) body.field = this.field;
    return body;
  }
}

export interface ErrorBody {
  statusCode: number;
  error: string;
  message: string;
  field?: string;
}

/** Parses with a shared zod schema; a failure becomes a 400 naming the first failing field. */
export function parseOr400<S extends z.core.$ZodType>(schema: S, input: unknown): z.output<S> {
  const parsed = z.safeParse(schema, input);
  if (parsed.success) return parsed.data;
  const { field, message } = firstIssue(parsed.error);
  throw new HttpError(400, field ? `${field}: ${message}` : message, field || undefined);
}

const MAX_BODY_BYTES = 1_000_000;

/** Reads the whole request body as text (bounded, so a runaway client cannot exhaust memory). */
export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, `request body exceeds ${MAX_BODY_BYTES} bytes`);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** JSON body of an action route: malformed JSON and non-objects are 400s that say so. */
export function parseJsonBody(text: string): Record<string, unknown> {
  if (text.trim() === '') throw new HttpError(400, 'the request body is empty: a JSON object is required');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const detail = error instanceof Error ? error.message : 'unparsable';
    throw new HttpError(400, `malformed JSON body: ${detail}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new HttpError(400, 'the request body must be a JSON object');
  }
  return value as Record<string, unknown>;
}

/**
 * Query parameters as an object for zod: a repeated parameter (`a=1&a=2`) or one written `a[]=…`
 * becomes an array, a single one stays a string.
 */
export function parseQuery(params: URLSearchParams): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {};
  for (const [rawKey, value] of params) {
    const isArray = rawKey.endsWith('[]');
    const key = isArray ? rawKey.slice(0, -2) : rawKey;
    const existing = query[key];
    if (existing === undefined) query[key] = isArray ? [value] : value;
    else query[key] = Array.isArray(existing) ? [...existing, value] : [existing, value];
  }
  return query;
}

/** Writes a JSON answer unless the client is already gone. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  if (status === 204) {
    res.writeHead(204, headers).end();
    return;
  }
  const text = JSON.stringify(body);
  res
    .writeHead(status, {
      ...headers,
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(text)),
    })
    .end(text);
}

/** Resolves after `ms`, or early when `signal` aborts (the server is closing). */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

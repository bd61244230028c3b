import { sleep as realSleep, type Sleep, withRetry } from '../affiliate/retry.ts';
import { ConfigurationError, PermanentError, TransientError } from '../errors.ts';
import { answerTooLargeMessage, isRedirect, redirectRefusal } from '../http/client-answers.ts';
import { retryAfterMs } from '../http/retry-after.ts';
import { parseJsonBody } from '../json.ts';

/**
 * The HTTP core of the shop API clients (Shopify Admin, WooCommerce REST, Stripe): one auth header,
 * a timeout per attempt, bounded retries with full jitter on network failures, 429 and 5xx (a
 * `Retry-After` is honoured), and every failure classified: 401/403 a `ConfigurationError` (the key
 * or its scopes), other 4xx `PermanentError`, the rest `TransientError`. Reads are idempotent, so
 * every transient failure may be retried. A redirect is never followed: it would carry the shop's
 * credentials wherever it points (across origins fetch drops `authorization`, `cookie` and
 * `proxy-authorization`, not `X-Shopify-Access-Token`), so it is a `ConfigurationError` naming
 * where it points. At most `maxAnswerBytes` of an answer are read.
 */

/**
 * The most of one answer a shop client reads by default. The largest answers are pages of orders
 * (250 Shopify orders, 100 WooCommerce orders, 100 Stripe events), a few MiB at most; a faulty or
 * hostile shop URL must not fill the process's memory. Parsed, an answer takes about 13 times its
 * size, so the catch-up function gives a lower cap for its memory (`shopAnswerCap`).
 */
export const SHOP_MAX_ANSWER_BYTES = 32 * 1024 * 1024;

/**
 * Pages a list route is walked for at most (100 to 250 items a page: 100 000 orders or more). Past
 * them the list is refused as a `PermanentError` that says to narrow the period: a period that large
 * is better read in parts, and a shop, or a proxy in front of it, whose pages never end must not hold
 * the function until its timeout.
 */
export const SHOP_MAX_PAGES = 1000;

/** What a list route with more than `SHOP_MAX_PAGES` pages fails with. */
export function tooManyPages(name: string, route: string): PermanentError {
  return new PermanentError(
    `${name} API: GET ${route} has more than ${SHOP_MAX_PAGES} pages: narrow the period`,
  );
}

/**
 * The cursors of one walk through a cursor-paged list (Shopify's `Link` URL, Stripe's `starting_after`
 * id), checked before each page after the first: the walk ends at `SHOP_MAX_PAGES` pages, and at a
 * cursor it has already followed, which would only read the same pages again until the timeout (a
 * shop or a caching proxy that ignores the cursor), with a `PermanentError` naming the route and it.
 */
export class PageCursors {
  readonly #name: string;
  readonly #route: string;
  readonly #followed = new Set<string>();
  #pages = 1;

  /** `first`: the cursor the first page was read with, when it has one (Shopify's first URL). */
  constructor(name: string, route: string, first?: string) {
    this.#name = name;
    this.#route = route;
    if (first !== undefined) this.#followed.add(first);
  }

  /** Takes `cursor` for the next page, or throws; `shown` is how the message quotes it. */
  follow(cursor: string, shown: string): void {
    if (this.#followed.has(cursor)) {
      throw new PermanentError(
        `${this.#name} API: GET ${this.#route} sent ${shown}: its cursor does not move; is a proxy or cache answering at shopApi.url?`,
      );
    }
    if (this.#pages >= SHOP_MAX_PAGES) throw tooManyPages(this.#name, this.#route);
    this.#followed.add(cursor);
    this.#pages++;
  }
}

export interface ShopHttpOptions {
  /** Per attempt, including reading the answer. @default 10000 */
  readonly timeoutMs?: number;
  /** Attempts per request, the first included. @default 5 */
  readonly maxAttempts?: number;
  /** Ceiling of the first backoff wait. @default 500 */
  readonly baseDelayMs?: number;
  /** Largest backoff wait; a `Retry-After` is honoured up to `maxRetryAfterMs`. @default 8000 */
  readonly maxDelayMs?: number;
  /** A longer `Retry-After` ends the request as a transient failure instead. @default 60000 */
  readonly maxRetryAfterMs?: number;
  /**
   * The most bytes of an answer it reads; past them it closes the connection and the request fails
   * as a `PermanentError` naming the cap. @default SHOP_MAX_ANSWER_BYTES
   */
  readonly maxAnswerBytes?: number;
  readonly signal?: AbortSignal;
  // biome-ignore lint/style/noRestrictedGlobals: the type of the fetch a test gives
  readonly fetch?: typeof fetch;
  readonly sleep?: Sleep;
  readonly random?: () => number;
  /** Told about each retry (for a progress line); never given secrets. */
  readonly onRetry?: (info: {
    readonly path: string;
    readonly status?: number;
    readonly waitMs: number;
  }) => void;
}

/** What sets one shop API apart. */
export interface ShopProfile {
  /** `Shopify`, `WooCommerce`, `Stripe`: starts every message. */
  readonly name: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Replaced by `[redacted]` should the shop echo them. */
  readonly secrets: readonly string[];
  /** The shop's own error text from an error body, when it has one. */
  readonly messageOf: (body: unknown) => string | undefined;
}

export interface ShopResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly json: unknown;
}

export interface ShopRequest {
  readonly method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** `application/json` or `application/x-www-form-urlencoded` body, already encoded. */
  readonly body?: { readonly contentType: string; readonly text: string };
}

/** Only the status codes a retry may cure. */
function retryable(status: number): boolean {
  return status === 429 || status >= 500;
}

export class ShopHttp {
  readonly #profile: ShopProfile;
  readonly #options: ShopHttpOptions;

  constructor(profile: ShopProfile, options: ShopHttpOptions = {}) {
    this.#profile = profile;
    this.#options = options;
  }

  /** One request, retried while transient; rejects with a classified error. */
  async request(url: URL, request: ShopRequest = {}): Promise<ShopResponse> {
    const o = this.#options;
    const method = request.method ?? 'GET';
    const label = `${method} ${url.pathname}`;
    return withRetry(() => this.#attempt(url, method, label, request), {
      maxAttempts: o.maxAttempts ?? 5,
      baseDelayMs: o.baseDelayMs ?? 500,
      maxDelayMs: o.maxDelayMs ?? 8000,
      signal: o.signal,
      sleep: o.sleep ?? realSleep,
      random: o.random,
      label: `${this.#profile.name} ${label}`,
      classify: (error) => {
        if (!(error instanceof TransientError)) return { retry: false };
        const after = error.retryAfterMs;
        if (after !== undefined && after > (o.maxRetryAfterMs ?? 60_000)) return { retry: false };
        return { retry: true, retryAfterMs: after };
      },
      onRetry: ({ waitMs, error }) =>
        o.onRetry?.({ path: url.pathname, status: (error as TransientError).status, waitMs }),
    });
  }

  async #attempt(url: URL, method: string, label: string, request: ShopRequest): Promise<ShopResponse> {
    const o = this.#options;
    const name = this.#profile.name;
    const timeoutMs = o.timeoutMs ?? 10_000;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = o.signal ? AbortSignal.any([o.signal, timeout]) : timeout;
    let response: Response;
    let body: Buffer;
    try {
      // biome-ignore lint/style/noRestrictedGlobals: bounded by AbortSignal.timeout above
      response = await (o.fetch ?? fetch)(url, {
        method,
        headers: {
          accept: 'application/json',
          ...this.#profile.headers,
          ...(request.body ? { 'content-type': request.body.contentType } : {}),
        },
        body: request.body?.text,
        redirect: 'manual',
        signal,
      });
      body = await readCapped(response, o.maxAnswerBytes ?? SHOP_MAX_ANSWER_BYTES);
    } catch (error) {
      if (o.signal?.aborted) throw o.signal.reason;
      if (error instanceof AnswerTooLarge) {
        throw new PermanentError(`${name} API: ${label}: ${error.message}`, { cause: error });
      }
      const why = timeout.aborted ? `no answer within ${timeoutMs} ms` : `network failure (${codeOf(error)})`;
      throw new TransientError(`${name} API: ${label}: ${why}`, { cause: error });
    }
    const json = parseJson(body);
    const { status } = response;
    if (status >= 200 && status < 300) {
      // WordPress without pretty permalinks, or a URL that is the shop's storefront, answers 200 with HTML.
      if (json === undefined) {
        throw new PermanentError(
          `${name} API: ${label} answered ${status} without JSON: is shopApi.url the shop's base URL?`,
          { status },
        );
      }
      return { status, headers: response.headers, json };
    }
    if (isRedirect(status)) {
      const fix = { setting: 'shopApi.url', what: 'the API', carries: 'the credentials' };
      throw new ConfigurationError(
        `${name} API: ${label} ${redirectRefusal(status, url, response.headers.get('location'), fix)}`,
        { status },
      );
    }
    const platformMessage = this.#redact(this.#profile.messageOf(json));
    const suffix = platformMessage ? `: ${platformMessage}` : '';
    if (status === 401 || status === 403) {
      throw new ConfigurationError(
        `${name} API refused the credentials (${status} on ${label}): check the key and its scopes`,
        { status, platformMessage },
      );
    }
    if (retryable(status)) {
      throw new TransientError(`${name} API: ${label} answered ${status}${suffix}`, {
        status,
        platformMessage,
        retryAfterMs: retryAfterOf(response.headers),
      });
    }
    if (status === 404) {
      throw new PermanentError(`${name} API: ${label} not found (404)${suffix}`, { status, platformMessage });
    }
    throw new PermanentError(`${name} API: ${label} answered ${status}${suffix}`, {
      status,
      platformMessage,
    });
  }

  #redact(message: string | undefined): string | undefined {
    if (message === undefined) return undefined;
    let out = message;
    for (const secret of this.#profile.secrets) if (secret) out = out.split(secret).join('[redacted]');
    // Cut after redacting: a secret across the cut would otherwise leave its first half behind.
    return out.slice(0, 300);
  }
}

/**
 * `Retry-After` in (possibly decimal) seconds, as Shopify sends `2.0`, or an HTTP date; anything else
 * (`-1`) is ignored, so the wait is the backoff.
 */
function retryAfterOf(headers: Headers): number | undefined {
  const raw = headers.get('retry-after');
  return raw === null ? undefined : retryAfterMs(raw, Date.now());
}

class AnswerTooLarge extends Error {}

/** The answer's body, at most `maxBytes` of it; past them the connection is closed. */
async function readCapped(response: Response, maxBytes: number): Promise<Buffer> {
  if (Number(response.headers.get('content-length')) > maxBytes) {
    await response.body?.cancel();
    throw new AnswerTooLarge(answerTooLargeMessage(maxBytes));
  }
  if (response.body === null) return Buffer.alloc(0);
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks, size);
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel();
      throw new AnswerTooLarge(answerTooLargeMessage(maxBytes));
    }
    chunks.push(value);
  }
}

/**
 * As the webhooks: an integer beyond 2^53 (a Shopify id) comes back as its exact text. An empty
 * body, or one that is not JSON (a storefront's HTML), is `undefined`.
 */
function parseJson(body: Buffer): unknown {
  try {
    return parseJsonBody(body);
  } catch {
    return undefined;
  }
}

function codeOf(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown } }).cause;
  if (typeof cause?.code === 'string') return cause.code;
  return error instanceof Error ? error.name : 'unknown';
}

/** The base URL without its trailing slashes, so paths can be appended. */
export function baseUrl(url: string): string {
  return url.replace(/\/+$/, '');
}

/** A URL of `base` + `path` with `query` appended in order. */
export function urlOf(base: string, path: string, query: Readonly<Record<string, string>>): URL {
  const url = new URL(`${baseUrl(base)}${path}`);
  for (const [key, value] of Object.entries(query)) url.searchParams.append(key, value);
  return url;
}

/** A string property of an object, if there is one. */
export function stringAt(value: unknown, key: string): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const field = (value as Record<string, unknown>)[key];
  return typeof field === 'string' ? field : undefined;
}

import * as z from 'zod/mini';
import { nodeHttpFetch } from '../adapters/node-http-transport.ts';
import {
  BadInputError,
  ConfigurationError,
  type ConnectorError,
  type ConnectorErrorDetails,
  PermanentError,
  TransientError,
} from '../errors.ts';
import { isRedirect, redirectRefusal } from '../http/client-answers.ts';
import { retryAfterMs, secondsToMs } from '../http/retry-after.ts';
import type { HttpFetch, ResponseHeaders } from '../ports.ts';
import { firstIssue } from '../validation.ts';
import { type FleetPaces, RateLimiter } from './rate-limiter.ts';
import { type RetryAttempt, sleep as realSleep, type Sleep, withRetry } from './retry.ts';

/**
 * The HTTP core shared by the clients of the affiliate platform (the current API and the legacy
 * 2.0 interface): one limiter slot per attempt, a timeout cut at the caller's deadline, status codes
 * classified into the connector's error classes, bounded retries, and events for metrics. Each
 * client keeps its auth, routes, schemas and operations.
 */

/** What a client reports to metrics and logs; it never logs by itself. */
export interface HttpEvent<R extends string> {
  /**
   * `request`: an attempt ended (`status` absent on a network error or timeout).
   * `rate_limited`: the client-side limiter made the call wait (`waitMs`, no `status`: the client
   * pacing itself, not a refusal), or the platform answered 429 (`status` 429, `waitMs` the wait it
   * asked for, if it said).
   * `retry`: a failed attempt is retried after `waitMs`.
   */
  readonly type: 'rate_limited' | 'retry' | 'request';
  /** Operation name (`conversions.add`). */
  readonly route: R;
  /** Path requested, after overrides; the rate-limit key. */
  readonly path: string;
  readonly status?: number;
  readonly waitMs?: number;
  /** 1 for the first attempt of a call. */
  readonly attempt?: number;
  readonly durationMs?: number;
}

/** Settings every client of the platform takes, whatever its auth and routes. */
export interface HttpClientOptions {
  /**
   * Client-side limit per route. @default 100 (the current API's limit per route per token; the
   * legacy interface documents none)
   */
  readonly ratePerSecond?: number;
  /**
   * Adaptive pacing: the rate per route starts here and follows the platform's rate-limit headers,
   * with `ratePerSecond` as its ceiling (see `RateLimiter.observe`). Absent: `ratePerSecond` fixed.
   */
  readonly initialRatePerSecond?: number;
  /** With adaptive pacing: where the fleet's instances compare paces to share each route equally. */
  readonly fleet?: FleetPaces;
  /** A limiter shared by every client of the same credentials (the platform counts per token). */
  readonly rateLimiter?: RateLimiter;
  /** Per request, including reading the answer. @default 5000 */
  readonly timeoutMs?: number;
  /**
   * The most a call given no deadline of its own may take, its attempts, the waits between them and
   * the rate limiter's included: a 429's retry-after is not capped, so without a deadline a platform
   * asking for an hour would hold the caller (a terminal) for that hour. @default no bound but the
   * caller's deadline (the functions always give one)
   */
  readonly callBudgetMs?: number;
  /** Attempts per call, the first included. @default 4 */
  readonly maxAttempts?: number;
  /** Ceiling of the first backoff wait. @default 100 */
  readonly baseDelayMs?: number;
  /** Largest backoff wait (a 429's own retry-after is not capped). @default 2000 */
  readonly maxDelayMs?: number;
  /**
   * Retry the add operations after failures that leave unknown whether the platform recorded them
   * (timeout, connection lost after sending, 500/502/504). Off by default: a blind retry can create
   * a duplicate; look the conversion up by its external id instead.
   * @default false
   */
  readonly retryAmbiguousAdds?: boolean;
  /** Sends each request. @default nodeHttpFetch (node:http and node:https, not Node's fetch) */
  readonly fetch?: HttpFetch;
  /** @default Date.now */
  readonly now?: () => number;
  readonly sleep?: Sleep;
  /** @default Math.random */
  readonly random?: () => number;
}

export interface CallOptions {
  /** Epoch ms. No attempt or wait is begun that would end past it; requests are cut at it. */
  readonly deadline?: number;
  /** Aborts the call; it then rejects with the signal's reason, not retried. */
  readonly signal?: AbortSignal;
}

/** What sets one client apart: its auth, how it names routes, and its wording. */
export interface HttpClientProfile<R extends string> {
  /** Starts configuration errors: `affiliate client: timeoutMs must be a positive number`. */
  readonly client: string;
  /** Value of the `Authorization` header. */
  readonly authorization: string;
  /** Replaced by `[redacted]` in the platform's messages, should it echo them. */
  readonly secrets: readonly string[];
  /** Names an operation in errors: `conversions.add (POST /advertiser/conversions.add)`. */
  readonly label: (route: R) => string;
  /** The reason a 401 or 403 gives: `the API token was refused`. */
  readonly refused: string;
  /** The reason a 404 of a path the platform does not serve gives. */
  readonly unknownRoute: (path: string) => string;
  /** The reason a 405 gives; without it a 405 is a `PermanentError` like any other 4xx. */
  readonly wrongMethod?: (path: string) => string;
  /** Suffix of a vendor header giving a 429's wait in decimal seconds, read before `Retry-After`. */
  readonly retryAfterSuffix?: string;
  /**
   * Common part of the vendor headers carrying the route's window (`…<suffix>-limit`,
   * `…<suffix>-remaining`), read on every answer to pace the client; none when absent.
   */
  readonly windowHeaderSuffix?: string;
  /** Names a network failure that carries no error code. @default the error's message */
  readonly networkFailure?: (error: unknown) => string;
  readonly onEvent?: (event: HttpEvent<R>) => void;
}

/** An answer of the affiliate platform (current or legacy API), as the client reads it. */
export interface PlatformResponse {
  readonly status: number;
  readonly headers: ResponseHeaders;
  readonly text: string;
  /** The parsed body; undefined when it is empty or not JSON. */
  readonly json: unknown;
}

/** One call to the affiliate platform, as the client sends (and retries) it. */
export interface PlatformRequest<R extends string, T> {
  readonly route: R;
  readonly method: 'GET' | 'POST';
  /** Rate-limit key, and the `path` of events. */
  readonly path: string;
  /** The URL without its query, built as the request is sent (it may throw `BadInputError`). */
  readonly url: () => string;
  readonly query?: Readonly<Record<string, unknown>>;
  readonly body?: unknown;
  /** False for adds: a blind retry after an ambiguous failure may create a duplicate. */
  readonly idempotent: boolean;
  /** Reads a 2xx answer; may throw to fail the attempt. */
  readonly read: (answer: PlatformResponse) => T;
  /** When set, a 404 of a known route is an answer ("no such conversion"), not a failure. */
  readonly notFound?: () => T;
}

const PLATFORM_MESSAGE_MAX = 500;
/**
 * Added to a 429's retry-after: timers may fire a millisecond early and the two hosts' clocks tick
 * apart, and arriving a hair before the window frees costs another 429 and an attempt.
 */
const RETRY_AFTER_MARGIN_MS = 10;
/** Connection failures before the request was sent: safe to retry even for adds. */
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);
const NOT_RETRIED = ': not retried, the platform may have recorded it (look it up before sending it again)';

/**
 * Sends a client's requests: validates the shared settings at construction (failing with a
 * `ConfigurationError` that names the client and the setting) and runs each call through the rate
 * limiter and `withRetry`, throwing the connector's error classes.
 */
export class PlatformHttp<R extends string> {
  private profile: HttpClientProfile<R>;
  private readonly limiter: RateLimiter;
  private readonly timeoutMs: number;
  private readonly callBudgetMs: number | undefined;
  private readonly maxAttempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly retryAmbiguousAdds: boolean;
  private readonly fetchFn: HttpFetch;
  private readonly now: () => number;
  private readonly sleep: Sleep;
  private readonly random: () => number;
  /** Failures that must reach the caller without another attempt. */
  private readonly final = new WeakSet<object>();

  constructor(options: HttpClientOptions, profile: HttpClientProfile<R>) {
    const { client } = profile;
    this.profile = profile;
    this.timeoutMs = positive(client, 'timeoutMs', options.timeoutMs ?? 5000);
    this.callBudgetMs =
      options.callBudgetMs === undefined ? undefined : positive(client, 'callBudgetMs', options.callBudgetMs);
    this.maxAttempts = Math.floor(positive(client, 'maxAttempts', options.maxAttempts ?? 4));
    this.baseDelayMs = nonNegative(client, 'baseDelayMs', options.baseDelayMs ?? 100);
    this.maxDelayMs = nonNegative(client, 'maxDelayMs', options.maxDelayMs ?? 2000);
    this.retryAmbiguousAdds = options.retryAmbiguousAdds ?? false;
    this.fetchFn = options.fetch ?? nodeHttpFetch;
    this.now = options.now ?? Date.now;
    this.sleep = options.sleep ?? realSleep;
    this.random = options.random ?? Math.random;
    this.limiter =
      options.rateLimiter ??
      new RateLimiter({
        ratePerSecond: positive(client, 'ratePerSecond', options.ratePerSecond ?? 100),
        adaptive:
          options.initialRatePerSecond === undefined
            ? undefined
            : {
                initialRatePerSecond: positive(client, 'initialRatePerSecond', options.initialRatePerSecond),
                fleet: options.fleet,
              },
        now: this.now,
        sleep: this.sleep,
      });
  }

  /** Runs `request` with retries within `options`' deadline and signal; resolves what it reads. */
  call<T>(request: PlatformRequest<R, T>, options: CallOptions): Promise<T> {
    const { route, path } = request;
    const { signal } = options;
    const deadline =
      options.deadline ?? (this.callBudgetMs === undefined ? undefined : this.now() + this.callBudgetMs);
    return withRetry((attempt) => this.attempt(request, attempt, { deadline, signal }), {
      maxAttempts: this.maxAttempts,
      baseDelayMs: this.baseDelayMs,
      maxDelayMs: this.maxDelayMs,
      deadline,
      signal,
      label: route,
      now: this.now,
      sleep: this.sleep,
      random: this.random,
      classify: (error) => {
        if (signal?.aborted || !(error instanceof TransientError) || this.final.has(error)) {
          return { retry: false };
        }
        if (error.status !== 429 || error.retryAfterMs === undefined) return { retry: true };
        return { retry: true, retryAfterMs: error.retryAfterMs + RETRY_AFTER_MARGIN_MS };
      },
      onRetry: ({ attempt, waitMs, error }) =>
        this.emit({ type: 'retry', route, path, attempt, waitMs, status: (error as ConnectorError).status }),
    });
  }

  /**
   * A `TransientError` for a failure after which the platform may have done the work (`ambiguous`).
   * For a request that is not idempotent (unless `retryAmbiguousAdds`) the message says so and it is
   * not retried.
   */
  ambiguousFailure(message: string, idempotent: boolean, details: ConnectorErrorDetails): TransientError {
    if (!this.guardsDuplicates(idempotent))
      return new TransientError(message, { ...details, ambiguous: true });
    const failure = new TransientError(`${message}${NOT_RETRIED}`, { ...details, ambiguous: true });
    this.final.add(failure);
    return failure;
  }

  /** The parsed body, or a `TransientError` when it is not JSON. */
  needJson(route: R, answer: PlatformResponse): unknown {
    if (answer.json !== undefined) return answer.json;
    // Usually a body cut short by a proxy: worth another attempt.
    throw new TransientError(
      `${this.profile.label(route)} answered ${answer.status} with a body that is not JSON`,
      { status: answer.status },
    );
  }

  /** A 2xx whose body does not match the schema: the same request would get the same body. */
  unreadable(route: R, answer: PlatformResponse, what: string, error: z.core.$ZodError): PermanentError {
    const { field: name, message } = firstIssue(error);
    return new PermanentError(
      `${this.profile.label(route)} answered ${answer.status} without ${what} the client can read (${name || 'body'}: ${message})`,
      { status: answer.status, field: name || undefined },
    );
  }

  /**
   * Sends `authorization` from now on (a rotated credential). `secret` joins the values redacted from
   * the platform's messages; the last few earlier ones stay there too.
   */
  reauthorize(authorization: string, secret: string): void {
    const secrets = [secret, ...this.profile.secrets.filter((s) => s !== secret)].slice(0, 4);
    this.profile = { ...this.profile, authorization, secrets };
  }

  /** A message from the platform, bounded and without our secrets should it echo them. */
  platformText(text: string): string {
    let out = text;
    for (const secret of this.profile.secrets) out = out.replaceAll(secret, '[redacted]');
    return out.slice(0, PLATFORM_MESSAGE_MAX);
  }

  private guardsDuplicates(idempotent: boolean): boolean {
    return !idempotent && !this.retryAmbiguousAdds;
  }

  private async attempt<T>(
    request: PlatformRequest<R, T>,
    { attempt }: RetryAttempt,
    { deadline, signal }: CallOptions,
  ): Promise<T> {
    const { route, path } = request;
    const { label } = this.profile;
    const permit = await this.limiter.acquire(path, { deadline, signal }).catch((error: unknown) => {
      // The limiter only fails when no slot frees before the deadline: another attempt cannot help.
      if (error instanceof TransientError) this.final.add(error);
      throw error;
    });
    if (permit.waitedMs > 0) {
      this.emit({ type: 'rate_limited', route, path, attempt, waitMs: permit.waitedMs });
    }
    const started = this.now();
    // Cut at the deadline: a request must not outlive the caller's budget.
    const timeoutMs = deadline === undefined ? this.timeoutMs : Math.min(this.timeoutMs, deadline - started);
    if (timeoutMs <= 0) {
      permit.release();
      throw new TransientError(`${label(route)}: the deadline passed before it could be sent`);
    }
    let answer: PlatformResponse;
    try {
      answer = await this.send(request, timeoutMs, signal);
    } catch (error) {
      permit.release();
      this.emit({ type: 'request', route, path, attempt, durationMs: this.now() - started });
      throw error;
    }
    // Read before the permit goes back: the limiter counts the request as in flight until then.
    try {
      if (this.profile.windowHeaderSuffix !== undefined) {
        const window = windowState(answer.headers, this.profile.windowHeaderSuffix);
        this.limiter.observe(path, { ...window, rateLimited: answer.status === 429, sentAt: started });
      }
    } finally {
      permit.release();
    }
    this.emit({
      type: 'request',
      route,
      path,
      attempt,
      status: answer.status,
      durationMs: this.now() - started,
    });

    if (answer.status >= 200 && answer.status < 300) return request.read(answer);
    if (answer.status === 404 && request.notFound && !isUnknownRoute(answer, echoable(request)))
      return request.notFound();
    const ambiguousAdd = this.guardsDuplicates(request.idempotent) && isAmbiguousStatus(answer.status);
    const failure = this.failure(request, answer, ambiguousAdd ? NOT_RETRIED : '');
    if (answer.status === 429) {
      // Every caller on this route is over the limit, not only this one.
      if (failure.retryAfterMs !== undefined)
        this.limiter.holdUntil(path, this.now() + failure.retryAfterMs + RETRY_AFTER_MARGIN_MS);
      this.emit({ type: 'rate_limited', route, path, attempt, status: 429, waitMs: failure.retryAfterMs });
    }
    if (ambiguousAdd) this.final.add(failure);
    throw failure;
  }

  private async send(
    request: PlatformRequest<R, unknown>,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<PlatformResponse> {
    const { label, networkFailure = describe } = this.profile;
    const url = new URL(request.url());
    url.search = searchParamsOf(request.query ?? {}).toString();
    const headers: Record<string, string> = {
      authorization: this.profile.authorization,
      accept: 'application/json',
    };
    if (request.body !== undefined) headers['content-type'] = 'application/json';
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      const response = await this.fetchFn(url, {
        method: request.method,
        headers,
        body: request.body === undefined ? undefined : JSON.stringify(request.body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        // A redirect means a wrong base URL; following it could carry the credentials to another host.
        redirect: 'manual',
      });
      const text = await response.text();
      return { status: response.status, headers: response.headers, text, json: parseJson(text) };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (timeout.aborted) {
        throw this.ambiguousFailure(
          `${label(request.route)} got no answer within ${timeoutMs} ms`,
          request.idempotent,
          { cause: error },
        );
      }
      const code = errorCode(error);
      const message = `${label(request.route)} failed without an answer (${code ?? networkFailure(error)})`;
      if (code !== undefined && NOT_SENT_CODES.has(code)) throw new TransientError(message, { cause: error });
      throw this.ambiguousFailure(message, request.idempotent, { cause: error });
    }
  }

  private failure(
    request: PlatformRequest<R, unknown>,
    answer: PlatformResponse,
    suffix: string,
  ): ConnectorError {
    const { status } = answer;
    const { path } = request;
    const { refused, unknownRoute, wrongMethod, retryAfterSuffix } = this.profile;
    const message = field(answer.json, 'message');
    const platformMessage = this.platformText(typeof message === 'string' ? message : answer.text.trim());
    const head = `${this.profile.label(request.route)} answered ${status}`;
    const details = { status, platformMessage };
    if (status === 401 || status === 403) {
      return new ConfigurationError(`${head}: ${refused}: ${platformMessage}`, details);
    }
    if (status === 429) {
      const retryAfterMs = retryAfter(answer.headers, this.now(), retryAfterSuffix);
      return new TransientError(
        `${head}: rate limited${retryAfterMs === undefined ? '' : `, retry after ${retryAfterMs} ms`}`,
        { ...details, retryAfterMs },
      );
    }
    if (status === 408) {
      // "Did not receive a complete request message" (RFC 9110): nothing was done, so even an add
      // is sent again; a gateway's idle timeout, not a refusal of the order.
      return new TransientError(`${head}: the platform did not get the whole request in time`, details);
    }
    if (status >= 500) {
      return new TransientError(`${head}: ${platformMessage}${suffix}`, {
        ...details,
        ambiguous: isAmbiguousStatus(status),
      });
    }
    if (status === 405 && wrongMethod)
      return new ConfigurationError(`${head}: ${wrongMethod(path)}`, details);
    if (status === 404 && isUnknownRoute(answer, echoable(request))) {
      return new ConfigurationError(`${head}: ${unknownRoute(path)}`, details);
    }
    if (status >= 400) {
      const name = field(answer.json, 'field');
      return new PermanentError(`${head}: ${platformMessage}`, {
        ...details,
        field: typeof name === 'string' ? name : undefined,
      });
    }
    // 3xx: the base URL points somewhere that is not the API (http to https, a login page).
    if (isRedirect(status)) {
      const fix = { setting: 'the base URL', what: 'the API', carries: 'the token' };
      const refusal = redirectRefusal(status, request.url(), answer.headers.get('location'), fix);
      // Not the body: servers write the whole Location there ("Redirecting to …?token=…"), query included.
      return new ConfigurationError(`${this.profile.label(request.route)} ${refusal}`, { status });
    }
    return new ConfigurationError(`${head}: unexpected for an API call (check the base URL)`, details);
  }

  private emit(event: HttpEvent<R>): void {
    try {
      this.profile.onEvent?.(event);
    } catch {
      // A failing metrics hook must not fail the call it reports on.
    }
  }
}

/** `input` checked with `schema` before it leaves the process; `BadInputError` naming the field. */
export function validateRequest<S extends z.core.$ZodType>(
  route: string,
  schema: S,
  input: unknown,
): z.output<S> {
  const parsed = z.safeParse(schema, input);
  if (parsed.success) return parsed.data;
  const { field: name, message } = firstIssue(parsed.error);
  throw new BadInputError(`${route}: invalid request: ${name ? `${name}: ` : ''}${message}`, {
    field: name || undefined,
  });
}

/** `value` if it is an http(s) URL without query or fragment; a `ConfigurationError` otherwise. */
export function checkBaseUrl(client: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigurationError(`${client}: baseUrl is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ConfigurationError(`${client}: baseUrl must be an http or https URL`);
  }
  if (url.search || url.hash) throw new ConfigurationError(`${client}: baseUrl must not carry a query`);
  return value;
}

function positive(client: string, name: string, value: number): number {
  if (!(value > 0)) throw new ConfigurationError(`${client}: ${name} must be a positive number`);
  return value;
}

function nonNegative(client: string, name: string, value: number): number {
  if (!(value >= 0)) throw new ConfigurationError(`${client}: ${name} must be zero or more`);
  return value;
}

/**
 * A validated query as the platform reads it: arrays as repeated parameters (`a=1&a=2`), booleans
 * as `true`/`false`, absent values left out.
 */
export function searchParamsOf(query: Readonly<Record<string, unknown>>): URLSearchParams {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) appendParam(params, name, value);
  return params;
}

function appendParam(params: URLSearchParams, name: string, value: unknown): void {
  if (value === undefined || value === null) return;
  if (Array.isArray(value)) {
    for (const item of value) appendParam(params, name, item);
    return;
  }
  params.append(name, typeof value === 'object' ? JSON.stringify(value) : String(value));
}

function parseJson(text: string): unknown {
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** `value[name]` when `value` is a plain object; undefined otherwise. */
export function field(value: unknown, name: string): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  return (value as Record<string, unknown>)[name];
}

/**
 * A 404 for a path the platform does not serve, told from "no such conversion" by its wording
 * (`Route GET:/x not found`, `Cannot GET /x`) or by a body that is not JSON (a gateway's page).
 * Wording that lies wholly within a value the request carried does not count: the platform echoes
 * what it looked for (`no conversion for externalId en-route-1042`), and an order id is no route.
 */
function isUnknownRoute(answer: PlatformResponse, echoable: readonly string[]): boolean {
  if (answer.json === undefined) return answer.text.trim() !== '';
  const message = field(answer.json, 'message');
  if (typeof message !== 'string') return false;
  const text = message.toLowerCase();
  const values = echoable.map((value) => value.toLowerCase());
  for (const match of text.matchAll(/\broute\b|cannot (get|post)\b/g)) {
    const end = match.index + match[0].length;
    if (!values.some((value) => within(text, value, match.index, end))) return true;
  }
  return false;
}

/** Whether some occurrence of `value` in `text` spans `[start, end)`. */
function within(text: string, value: string, start: number, end: number): boolean {
  if (value.length < end - start) return false;
  for (let at = text.indexOf(value, Math.max(0, end - value.length)); at !== -1 && at <= start; ) {
    if (at + value.length >= end) return true;
    at = text.indexOf(value, at + 1);
  }
  return false;
}

/** The text values a request carried (query and body), which an answer may echo. */
function echoable(request: PlatformRequest<string, unknown>): string[] {
  const values: string[] = [];
  for (const source of [request.query, request.body]) {
    if (typeof source !== 'object' || source === null) continue;
    for (const value of Object.values(source)) {
      for (const item of Array.isArray(value) ? value : [value]) {
        if (typeof item === 'string' && item !== '') values.push(item);
      }
    }
  }
  return values;
}

/** Statuses after which the platform may or may not have done the work. */
function isAmbiguousStatus(status: number): boolean {
  return status >= 500 && status !== 503;
}

/**
 * Milliseconds a 429 asks to wait: a header named `…<vendorSuffix>` in decimal seconds (the current
 * API's `x-<vendor>-ratelimit-route-second-retry-after`; the vendor word is not fixed, so matched by
 * suffix), else `Retry-After` (seconds or an HTTP date). A value that is neither (`-1`) is
 * ignored, so the wait falls back to the backoff.
 */
function retryAfter(
  headers: ResponseHeaders,
  now: number,
  vendorSuffix: string | undefined,
): number | undefined {
  if (vendorSuffix !== undefined) {
    for (const [name, value] of headers) {
      if (!name.endsWith(vendorSuffix)) continue;
      const ms = secondsToMs(value);
      if (ms !== undefined) return ms;
    }
  }
  const standard = headers.get('retry-after');
  return standard === null ? undefined : retryAfterMs(standard, now);
}

/** The route window's `limit`, `remaining` and length (`reset`) from vendor headers matched by suffix. */
function windowState(
  headers: ResponseHeaders,
  suffix: string,
): { limit?: number; remaining?: number; windowMs?: number } {
  let limit: number | undefined;
  let remaining: number | undefined;
  let windowMs: number | undefined;
  for (const [name, value] of headers) {
    if (name.endsWith(`${suffix}-reset`)) windowMs = secondsToMs(value);
    if (!/^\d+$/.test(value.trim())) continue;
    if (name.endsWith(`${suffix}-limit`)) limit = Number(value);
    else if (name.endsWith(`${suffix}-remaining`)) remaining = Number(value);
  }
  return { limit, remaining, windowMs };
}

function errorCode(error: unknown): string | undefined {
  for (let current: unknown = error, depth = 0; current && depth < 4; depth++) {
    const code = field(current, 'code');
    if (typeof code === 'string') return code;
    const errors = (current as { errors?: unknown }).errors;
    if (Array.isArray(errors) && errors.length > 0) {
      current = errors[0];
      continue;
    }
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

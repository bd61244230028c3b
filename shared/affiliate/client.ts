import type { z } from 'zod';
import {
  BadInputError,
  ConfigurationError,
  type ConnectorError,
  PermanentError,
  TransientError,
} from '../errors.ts';
import { RateLimiter } from './rate-limiter.ts';
import { type RetryAttempt, sleep as realSleep, type Sleep, withRetry } from './retry.ts';
import { ROUTE_METHODS, type RouteName, type RouteTable, resolveRoutes, routeUrl } from './routes.ts';
import {
  AdvertiserInfo,
  CommissionAdjustmentAddBody,
  Conversion,
  ConversionAcceptBody,
  ConversionAddBody,
  ConversionInfoQuery,
  ConversionRefuseBody,
  ConversionsListQuery,
  ConversionUpdateBody,
  firstIssue,
  HexId,
} from './schemas.ts';

/** What the client reports to metrics and logs; it never logs by itself. */
export interface AffiliateClientEvent {
  /**
   * `request`: an attempt ended (`status` absent on a network error or timeout).
   * `rate_limited`: the client-side limiter made the call wait (`waitMs`), or the platform answered
   * 429 (`status` 429, `waitMs` the wait it asked for).
   * `retry`: a failed attempt is retried after `waitMs`.
   */
  readonly type: 'rate_limited' | 'retry' | 'request';
  /** Operation name, the key of the route table (`conversions.add`). */
  readonly route: RouteName;
  /** Path requested, after overrides. */
  readonly path: string;
  readonly status?: number;
  readonly waitMs?: number;
  /** 1 for the first attempt of a call. */
  readonly attempt?: number;
  readonly durationMs?: number;
}

export interface AffiliateClientOptions {
  /** Base URL of the current API; may carry a path prefix. */
  readonly baseUrl: string;
  /** Bearer token. Never appears in errors or events. */
  readonly token: string;
  /** Paths to use instead of `DEFAULT_ROUTES`, per operation. */
  readonly routes?: Partial<RouteTable>;
  /** Client-side limit per route. @default 100 (the platform's limit per route per token) */
  readonly ratePerSecond?: number;
  /** A limiter shared by every client of the same token (the platform counts per token). */
  readonly rateLimiter?: RateLimiter;
  /** Per request, including reading the answer. @default 5000 */
  readonly timeoutMs?: number;
  /** Attempts per call, the first included. @default 4 */
  readonly maxAttempts?: number;
  /** Ceiling of the first backoff wait. @default 100 */
  readonly baseDelayMs?: number;
  /** Largest backoff wait (a 429's own retry-after is not capped). @default 2000 */
  readonly maxDelayMs?: number;
  /**
   * Retry `conversions.add` and `commissionAdjustments.add` after failures that leave unknown whether
   * the platform recorded them (timeout, connection lost after sending, 500/502/504). Off by default:
   * a blind retry can create a duplicate; look the conversion up by `externalId` instead.
   * @default false
   */
  readonly retryAmbiguousAdds?: boolean;
  readonly fetch?: typeof fetch;
  /** @default Date.now */
  readonly now?: () => number;
  readonly sleep?: Sleep;
  /** @default Math.random */
  readonly random?: () => number;
  readonly onEvent?: (event: AffiliateClientEvent) => void;
}

export interface CallOptions {
  /** Epoch ms. No attempt or wait is begun that would end past it; requests are cut at it. */
  readonly deadline?: number;
  /** Aborts the call; it then rejects with the signal's reason, not retried. */
  readonly signal?: AbortSignal;
}

export interface ConversionList {
  /** Matches before paging (as the platform reports it; the page length when it does not). */
  readonly total: number;
  readonly data: Conversion[];
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The parsed body; undefined when it is empty or not JSON. */
  readonly json: unknown;
}

interface Operation<T> {
  readonly route: RouteName;
  readonly query?: Record<string, unknown>;
  readonly body?: unknown;
  /** False for adds: a blind retry after an ambiguous failure may create a duplicate. */
  readonly idempotent: boolean;
  readonly read: (answer: Answer) => T;
  /** When set, a 404 of a known route is an answer ("no such conversion"), not a failure. */
  readonly notFound?: () => T;
}

const PLATFORM_MESSAGE_MAX = 500;
/**
 * Added to a 429's retry-after: timers may fire a millisecond early and the two hosts' clocks tick
 * apart, and arriving a hair before the window frees costs another 429 and an attempt.
 */
const RETRY_AFTER_MARGIN_MS = 10;
const RETRY_AFTER_SUFFIX = '-ratelimit-route-second-retry-after';
/** Connection failures before the request was sent: safe to retry even for adds. */
const NOT_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * Typed client of the affiliate platform's current API (4.93): validates every request with the
 * shared schemas before it leaves the process, limits the rate per route, retries what is worth
 * retrying within bounded attempts and the caller's deadline, and throws the connector's error
 * classes (`BadInputError`, `ConfigurationError`, `PermanentError`, `TransientError`).
 */
export class AffiliateClient {
  readonly routes: RouteTable;
  private readonly baseUrl: string;
  private readonly token: string;
  private readonly limiter: RateLimiter;
  private readonly timeoutMs: number;
  private readonly maxAttempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly retryAmbiguousAdds: boolean;
  private readonly fetchFn: typeof fetch;
  private readonly now: () => number;
  private readonly sleep: Sleep;
  private readonly random: () => number;
  private readonly onEvent: ((event: AffiliateClientEvent) => void) | undefined;
  /** Failures that must reach the caller without another attempt. */
  private readonly final = new WeakSet<object>();

  constructor(options: AffiliateClientOptions) {
    this.baseUrl = checkBaseUrl(options.baseUrl);
    this.token = checkToken(options.token);
    this.routes = resolveRoutes(options.routes ?? {});
    this.timeoutMs = positive('timeoutMs', options.timeoutMs ?? 5000);
    this.maxAttempts = Math.floor(positive('maxAttempts', options.maxAttempts ?? 4));
    this.baseDelayMs = nonNegative('baseDelayMs', options.baseDelayMs ?? 100);
    this.maxDelayMs = nonNegative('maxDelayMs', options.maxDelayMs ?? 2000);
    this.retryAmbiguousAdds = options.retryAmbiguousAdds ?? false;
    this.fetchFn = options.fetch ?? globalThis.fetch;
    this.now = options.now ?? Date.now;
    this.sleep = options.sleep ?? realSleep;
    this.random = options.random ?? Math.random;
    this.onEvent = options.onEvent;
    this.limiter =
      options.rateLimiter ??
      new RateLimiter({
        ratePerSecond: positive('ratePerSecond', options.ratePerSecond ?? 100),
        now: this.now,
        sleep: this.sleep,
      });
  }

  /** The account's ids: advertiser, programs and their rules, partnerships, groups, users. */
  async advertiserInfo(options: CallOptions = {}): Promise<AdvertiserInfo> {
    return this.call(
      {
        route: 'advertisers.me',
        idempotent: true,
        read: (answer) => {
          const json = this.needJson('advertisers.me', answer);
          const candidate = field(json, 'advertiser') ?? field(json, 'data') ?? json;
          const parsed = AdvertiserInfo.safeParse(candidate);
          if (!parsed.success) throw this.unreadable('advertisers.me', answer, 'an advertiser', parsed.error);
          return parsed.data;
        },
      },
      options,
    );
  }

  /**
   * Creates a conversion. The id is returned when the answer carries one (the add response's shape
   * is not public: do not count on it; look the conversion up by `externalId`).
   */
  async addConversion(
    body: ConversionAddBody,
    options: CallOptions = {},
  ): Promise<{ id: string | undefined }> {
    return this.call(
      {
        route: 'conversions.add',
        body: this.validate('conversions.add', ConversionAddBody, body),
        idempotent: false,
        read: (answer) => ({ id: findId(answer.json) }),
      },
      options,
    );
  }

  /** Refuses a conversion (422 → `PermanentError` when it is locked or already refused). */
  async refuseConversion(
    body: ConversionRefuseBody,
    options: CallOptions = {},
  ): Promise<Conversion | undefined> {
    return this.action('conversions.refuse', ConversionRefuseBody, body, options);
  }

  /** Sets a pending conversion's amount (422 → `PermanentError` once it is no longer pending). */
  async updateConversionAmount(
    body: ConversionUpdateBody,
    options: CallOptions = {},
  ): Promise<Conversion | undefined> {
    return this.action('conversions.update', ConversionUpdateBody, body, options);
  }

  /** Accepts a conversion (422 → `PermanentError` when it is refused or locked). */
  async acceptConversion(
    body: ConversionAcceptBody,
    options: CallOptions = {},
  ): Promise<Conversion | undefined> {
    return this.action('conversions.accept', ConversionAcceptBody, body, options);
  }

  /** The conversion of a program by `externalId` or `customerId`; undefined when there is none. */
  async conversionInfo(
    query: ConversionInfoQuery,
    options: CallOptions = {},
  ): Promise<Conversion | undefined> {
    return this.call(
      {
        route: 'conversions.info',
        query: this.validate('conversions.info', ConversionInfoQuery, query),
        idempotent: true,
        notFound: () => undefined,
        read: (answer) => {
          const candidate = findConversion(this.needJson('conversions.info', answer));
          if (candidate === undefined) return undefined;
          const parsed = Conversion.safeParse(candidate);
          if (!parsed.success)
            throw this.unreadable('conversions.info', answer, 'a conversion', parsed.error);
          return parsed.data;
        },
      },
      options,
    );
  }

  /** A page of conversions matching `query`, with the total before paging. */
  async listConversions(query: ConversionsListQuery, options: CallOptions = {}): Promise<ConversionList> {
    return this.call(
      {
        route: 'conversions.list',
        query: this.validate('conversions.list', ConversionsListQuery, query),
        idempotent: true,
        read: (answer) => {
          const json = this.needJson('conversions.list', answer);
          const container = field(json, 'conversions') ?? json;
          const items = Array.isArray(container) ? container : field(container, 'data');
          if (!Array.isArray(items)) {
            throw new PermanentError(
              `${this.label('conversions.list')} answered ${answer.status} without a list of conversions`,
              { status: answer.status },
            );
          }
          const data = items.map((item, index) => {
            const parsed = Conversion.safeParse(item);
            if (!parsed.success) {
              throw this.unreadable(
                'conversions.list',
                answer,
                `a conversion at index ${index}`,
                parsed.error,
              );
            }
            return parsed.data;
          });
          const total = field(container, 'total');
          return { total: typeof total === 'number' ? total : data.length, data };
        },
      },
      options,
    );
  }

  /** Adds a bonus or fixed-fees commission adjustment; its id is returned when the answer has one. */
  async addCommissionAdjustment(
    body: CommissionAdjustmentAddBody,
    options: CallOptions = {},
  ): Promise<{ id: string | undefined }> {
    return this.call(
      {
        route: 'commissionAdjustments.add',
        body: this.validate('commissionAdjustments.add', CommissionAdjustmentAddBody, body),
        idempotent: false,
        read: (answer) => ({
          id: hexId(field(field(answer.json, 'commissionAdjustment'), 'id')) ?? findId(answer.json),
        }),
      },
      options,
    );
  }

  private action<S extends z.ZodType>(
    route: RouteName,
    schema: S,
    body: unknown,
    options: CallOptions,
  ): Promise<Conversion | undefined> {
    return this.call(
      {
        route,
        body: this.validate(route, schema, body),
        idempotent: true,
        read: (answer) => {
          // The answer is a courtesy: the action succeeded on 2xx whatever its body looks like.
          const parsed = Conversion.safeParse(findConversion(answer.json));
          return parsed.success ? parsed.data : undefined;
        },
      },
      options,
    );
  }

  private validate<S extends z.ZodType>(route: RouteName, schema: S, input: unknown): z.output<S> {
    const parsed = schema.safeParse(input);
    if (parsed.success) return parsed.data;
    const { field: name, message } = firstIssue(parsed.error);
    return throwing(
      new BadInputError(`${route}: invalid request: ${name ? `${name}: ` : ''}${message}`, {
        field: name || undefined,
      }),
    );
  }

  private call<T>(operation: Operation<T>, options: CallOptions): Promise<T> {
    const { route } = operation;
    const path = this.routes[route];
    const { deadline, signal } = options;
    return withRetry((attempt) => this.attempt(operation, path, attempt, options), {
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

  private async attempt<T>(
    operation: Operation<T>,
    path: string,
    { attempt }: RetryAttempt,
    { deadline, signal }: CallOptions,
  ): Promise<T> {
    const { route } = operation;
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
      throw new TransientError(`${this.label(route)}: the deadline passed before it could be sent`);
    }
    let answer: Answer;
    try {
      answer = await this.send(operation, path, timeoutMs, signal);
    } catch (error) {
      this.emit({ type: 'request', route, path, attempt, durationMs: this.now() - started });
      throw error;
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

    if (answer.status >= 200 && answer.status < 300) return operation.read(answer);
    if (answer.status === 404 && operation.notFound && !isUnknownRoute(answer)) return operation.notFound();
    const ambiguousAdd =
      !operation.idempotent && !this.retryAmbiguousAdds && isAmbiguousStatus(answer.status);
    const failure = this.failure(route, path, answer, ambiguousAdd ? NOT_RETRIED : '');
    if (answer.status === 429 && failure.retryAfterMs !== undefined) {
      // Every caller on this route is over the limit, not only this one.
      this.limiter.holdUntil(path, this.now() + failure.retryAfterMs + RETRY_AFTER_MARGIN_MS);
      this.emit({ type: 'rate_limited', route, path, attempt, status: 429, waitMs: failure.retryAfterMs });
    }
    if (ambiguousAdd) this.final.add(failure);
    throw failure;
  }

  private async send(
    operation: Operation<unknown>,
    path: string,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Answer> {
    const { route } = operation;
    const method = ROUTE_METHODS[route];
    const url = new URL(routeUrl(this.baseUrl, path));
    url.search = searchParamsOf(operation.query ?? {}).toString();
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.token}`,
      accept: 'application/json',
    };
    if (operation.body !== undefined) headers['content-type'] = 'application/json';
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      const response = await this.fetchFn(url, {
        method,
        headers,
        body: operation.body === undefined ? undefined : JSON.stringify(operation.body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        // A redirect means a wrong base URL; following it could carry the token to another host.
        redirect: 'manual',
      });
      const text = await response.text();
      return { status: response.status, headers: response.headers, text, json: parseJson(text) };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const ambiguousAdd = !operation.idempotent && !this.retryAmbiguousAdds;
      if (timeout.aborted) {
        const failure = new TransientError(
          `${this.label(route)} got no answer within ${timeoutMs} ms${ambiguousAdd ? NOT_RETRIED : ''}`,
          { cause: error },
        );
        if (ambiguousAdd) this.final.add(failure);
        throw failure;
      }
      const code = errorCode(error);
      const sent = code === undefined || !NOT_SENT_CODES.has(code);
      const failure = new TransientError(
        `${this.label(route)} failed without an answer (${code ?? describe(error)})${ambiguousAdd && sent ? NOT_RETRIED : ''}`,
        { cause: error },
      );
      if (ambiguousAdd && sent) this.final.add(failure);
      throw failure;
    }
  }

  private failure(route: RouteName, path: string, answer: Answer, suffix: string): ConnectorError {
    const { status } = answer;
    const platformMessage = this.platformMessage(answer);
    const head = `${this.label(route)} answered ${status}`;
    const details = { status, platformMessage };
    if (status === 401 || status === 403) {
      return new ConfigurationError(`${head}: the API token was refused: ${platformMessage}`, details);
    }
    if (status === 429) {
      const retryAfterMs = retryAfter(answer.headers, this.now());
      return new TransientError(
        `${head}: rate limited${retryAfterMs === undefined ? '' : `, retry after ${retryAfterMs} ms`}`,
        { ...details, retryAfterMs },
      );
    }
    if (status >= 500) return new TransientError(`${head}: ${platformMessage}${suffix}`, details);
    if (status === 405) {
      return new ConfigurationError(
        `${head}: the platform serves ${path} with another method (check the routes)`,
        details,
      );
    }
    if (status === 404 && isUnknownRoute(answer)) {
      return new ConfigurationError(
        `${head}: the route ${path} is unknown to the platform (check the routes)`,
        details,
      );
    }
    if (status >= 400) {
      const name = field(answer.json, 'field');
      return new PermanentError(`${head}: ${platformMessage}`, {
        ...details,
        field: typeof name === 'string' ? name : undefined,
      });
    }
    // 1xx and 3xx: the base URL points somewhere that is not the API (http to https, a login page).
    return new ConfigurationError(`${head}: unexpected for an API call (check the base URL)`, details);
  }

  /** The JSON `message`, else the text body, bounded and without our token should it be echoed. */
  private platformMessage(answer: Answer): string {
    const message = field(answer.json, 'message');
    const text = typeof message === 'string' ? message : answer.text.trim();
    return text.slice(0, PLATFORM_MESSAGE_MAX).replaceAll(this.token, '[redacted]');
  }

  private needJson(route: RouteName, answer: Answer): unknown {
    if (answer.json !== undefined) return answer.json;
    // Usually a body cut short by a proxy: worth another attempt.
    throw new TransientError(`${this.label(route)} answered ${answer.status} with a body that is not JSON`, {
      status: answer.status,
    });
  }

  private unreadable(route: RouteName, answer: Answer, what: string, error: z.ZodError): PermanentError {
    const { field: name, message } = firstIssue(error);
    return new PermanentError(
      `${this.label(route)} answered ${answer.status} without ${what} the client can read (${name || 'body'}: ${message})`,
      { status: answer.status, field: name || undefined },
    );
  }

  private label(route: RouteName): string {
    return `${route} (${ROUTE_METHODS[route]} ${this.routes[route]})`;
  }

  private emit(event: AffiliateClientEvent): void {
    try {
      this.onEvent?.(event);
    } catch {
      // A failing metrics hook must not fail the call it reports on.
    }
  }
}

const NOT_RETRIED = ': not retried, the platform may have recorded it (look it up before sending it again)';

function throwing(error: Error): never {
  throw error;
}

function checkBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigurationError('affiliate client: baseUrl is not a URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ConfigurationError('affiliate client: baseUrl must be an http or https URL');
  }
  if (url.search || url.hash)
    throw new ConfigurationError('affiliate client: baseUrl must not carry a query');
  return value;
}

function checkToken(value: string): string {
  if (typeof value !== 'string' || value.length === 0)
    throw new ConfigurationError('affiliate client: token is empty');
  // Secrets often come back with a trailing newline; fetch would then fail as if the network had.
  if (!/^[\x21-\x7e]+$/.test(value)) {
    throw new ConfigurationError('affiliate client: token has spaces or characters not allowed in a header');
  }
  return value;
}

function positive(name: string, value: number): number {
  if (!(value > 0)) throw new ConfigurationError(`affiliate client: ${name} must be a positive number`);
  return value;
}

function nonNegative(name: string, value: number): number {
  if (!(value >= 0)) throw new ConfigurationError(`affiliate client: ${name} must be zero or more`);
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

function field(value: unknown, name: string): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  return (value as Record<string, unknown>)[name];
}

function hexId(value: unknown): string | undefined {
  return HexId.safeParse(value).success ? (value as string) : undefined;
}

/** The first id the answer carries, wherever the platform puts it. */
function findId(json: unknown): string | undefined {
  return (
    hexId(field(field(json, 'conversion'), 'id')) ??
    hexId(field(json, 'id')) ??
    hexId(field(field(json, 'data'), 'id')) ??
    hexId(field(firstOf(field(field(json, 'conversions'), 'data')), 'id'))
  );
}

/** The conversion in an answer: `conversion`, `conversions.data[0]`, `data[0]` or `data`. */
function findConversion(json: unknown): unknown {
  const conversion = field(json, 'conversion');
  if (conversion !== undefined && conversion !== null) return conversion;
  const conversions = field(json, 'conversions');
  if (conversions !== undefined)
    return firstOf(Array.isArray(conversions) ? conversions : field(conversions, 'data'));
  const data = field(json, 'data');
  if (data !== undefined) return Array.isArray(data) ? data[0] : data;
  return undefined;
}

function firstOf(value: unknown): unknown {
  return Array.isArray(value) ? value[0] : undefined;
}

/**
 * A 404 for a path the platform does not serve, told from "no such conversion" by its wording
 * (`Route GET:/x not found`, `Cannot GET /x`) or by a body that is not JSON (a gateway's page).
 */
function isUnknownRoute(answer: Answer): boolean {
  if (answer.json === undefined) return answer.text.trim() !== '';
  const message = field(answer.json, 'message');
  return typeof message === 'string' && /\broute\b|cannot (get|post)\b/i.test(message);
}

/** Statuses after which the platform may or may not have done the work. */
function isAmbiguousStatus(status: number): boolean {
  return status >= 500 && status !== 503;
}

/**
 * Milliseconds a 429 asks to wait: the `x-<vendor>-ratelimit-route-second-retry-after` header
 * (decimal seconds; the vendor word is not fixed, so matched by suffix), else `Retry-After`
 * (seconds or an HTTP date).
 */
function retryAfter(headers: Headers, now: number): number | undefined {
  for (const [name, value] of headers) {
    if (!name.endsWith(RETRY_AFTER_SUFFIX)) continue;
    const ms = secondsToMs(value);
    if (ms !== undefined) return ms;
  }
  const standard = headers.get('retry-after');
  if (standard === null) return undefined;
  const ms = secondsToMs(standard);
  if (ms !== undefined) return ms;
  const date = Date.parse(standard);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

function secondsToMs(value: string): number | undefined {
  const text = value.trim();
  if (!/^\d+(\.\d+)?$/.test(text)) return undefined;
  // Round away float noise (0.29 * 1000 = 290.00000000000006) before rounding up.
  return Math.ceil(Math.round(Number(text) * 1e6) / 1e3);
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

import type { z } from 'zod';
import { searchParamsOf } from '../affiliate/client.ts';
import { RateLimiter } from '../affiliate/rate-limiter.ts';
import { type RetryAttempt, sleep as realSleep, type Sleep, withRetry } from '../affiliate/retry.ts';
import { firstIssue } from '../affiliate/schemas.ts';
import {
  BadInputError,
  ConfigurationError,
  type ConnectorError,
  type ConnectorErrorDetails,
  PermanentError,
  TransientError,
} from '../errors.ts';
import {
  LegacyActionResult,
  LegacyConversion,
  LegacyConversionAddBody,
  LegacyConversionDetail,
  LegacyConversionsQuery,
  LegacyPartnership,
  LegacyPartnershipsQuery,
  LegacyProgramDetail,
  LegacyRefuseBody,
} from './schemas.ts';

/** Operations of the client, with the route template they call (rate-limit key and error label). */
export const LEGACY_ROUTES = {
  'program.detail': { method: 'GET', path: '/advertiser/{programId}' },
  'conversions.list': { method: 'GET', path: '/advertiser/{programId}/conversions' },
  'conversions.detail': { method: 'GET', path: '/advertiser/{programId}/conversions/{conversionId}' },
  'conversions.accept': { method: 'GET', path: '/advertiser/{programId}/conversions/{conversionId}/accept' },
  'conversions.refuse': { method: 'POST', path: '/advertiser/{programId}/conversions/{conversionId}/refuse' },
  'conversions.add': { method: 'POST', path: '/advertiser/{programId}/conversions/add' },
  'partnerships.list': { method: 'GET', path: '/advertiser/{programId}/partnerships' },
} as const;
export type LegacyRouteName = keyof typeof LEGACY_ROUTES;

/** The user code and API key of `Authorization: Basic base64(<user_code>:<api_key>)`. */
export interface LegacyCredentials {
  readonly userCode: string;
  readonly apiKey: string;
}

/**
 * Reads credentials kept as one secret value `user_code:api_key` (split at the first colon: the
 * user code of Basic auth may not hold one, the key may). Never echoes the value in errors.
 *
 * @throws ConfigurationError naming `origin` when the value has no colon or an empty part
 */
export function parseLegacyCredentials(value: string, origin = 'legacy credentials'): LegacyCredentials {
  const text = value.trim();
  const colon = text.indexOf(':');
  if (colon <= 0 || colon === text.length - 1) {
    throw new ConfigurationError(`${origin}: expected "user_code:api_key"`);
  }
  return { userCode: text.slice(0, colon), apiKey: text.slice(colon + 1) };
}

/** What the client reports to metrics and logs; it never logs by itself. */
export interface LegacyClientEvent {
  readonly type: 'rate_limited' | 'retry' | 'request';
  readonly route: LegacyRouteName;
  readonly status?: number;
  readonly waitMs?: number;
  readonly attempt?: number;
  readonly durationMs?: number;
}

export interface LegacyClientOptions extends LegacyCredentials {
  /** `{legacy_base_url}`: routes are `<baseUrl>/2.0/…`. May carry a path prefix. */
  readonly baseUrl: string;
  /** Client-side limit per route. The interface documents none. @default 100 */
  readonly ratePerSecond?: number;
  readonly rateLimiter?: RateLimiter;
  /** Per request, including reading the answer. @default 5000 */
  readonly timeoutMs?: number;
  /** Attempts per call, the first included. @default 4 */
  readonly maxAttempts?: number;
  /** @default 100 */
  readonly baseDelayMs?: number;
  /** @default 2000 */
  readonly maxDelayMs?: number;
  /**
   * Retry `conversions/add` after failures that leave unknown whether it was recorded (timeout,
   * connection lost after sending, 500/502/504). Off: look the conversion up by identifier instead.
   * @default false
   */
  readonly retryAmbiguousAdds?: boolean;
  readonly fetch?: typeof fetch;
  readonly now?: () => number;
  readonly sleep?: Sleep;
  readonly random?: () => number;
  readonly onEvent?: (event: LegacyClientEvent) => void;
}

export interface LegacyCallOptions {
  /** Epoch ms. No attempt or wait is begun that would end past it; requests are cut at it. */
  readonly deadline?: number;
  readonly signal?: AbortSignal;
}

/**
 * An action route (add, accept, refuse) answered 2xx with `status` `aborted` or `failed`: the
 * platform refused the action (a precondition, an unknown partnership…). Permanent: the same
 * request fails the same way. `code` is the interface's numeric code (add routes only; its meanings
 * are not documented).
 */
export class LegacyActionError extends PermanentError {
  readonly actionStatus: 'aborted' | 'failed';
  readonly code: number | undefined;

  constructor(
    message: string,
    actionStatus: 'aborted' | 'failed',
    code: number | undefined,
    details: ConnectorErrorDetails = {},
  ) {
    super(message, details);
    this.actionStatus = actionStatus;
    this.code = code;
  }
}

interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  readonly json: unknown;
}

interface Operation<T> {
  readonly route: LegacyRouteName;
  readonly params: Readonly<Record<string, string>>;
  readonly query?: Record<string, unknown>;
  readonly body?: unknown;
  readonly idempotent: boolean;
  readonly read: (answer: Answer) => T;
  readonly notFound?: () => T;
}

const PLATFORM_MESSAGE_MAX = 500;
const RETRY_AFTER_MARGIN_MS = 10;
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
 * Typed client of the legacy 2.0 interface (advertiser half): HTTP Basic, bodies and queries checked
 * with the shared schemas before they leave, a client-side rate limit per route, bounded retries with
 * jittered backoff within the caller's deadline, and the connector's error classes: 401/403 →
 * `ConfigurationError`, 429/5xx/network/timeout → `TransientError`, other 4xx and action answers
 * with `status` `aborted`/`failed` → `PermanentError` (`LegacyActionError`).
 */
export class LegacyClient {
  private readonly baseUrl: string;
  private readonly authorization: string;
  private readonly secrets: readonly string[];
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
  private readonly onEvent: ((event: LegacyClientEvent) => void) | undefined;
  /** Failures that must reach the caller without another attempt. */
  private readonly final = new WeakSet<object>();

  constructor(options: LegacyClientOptions) {
    this.baseUrl = checkBaseUrl(options.baseUrl);
    checkCredential('userCode', options.userCode);
    checkCredential('apiKey', options.apiKey);
    if (options.userCode.includes(':')) {
      throw new ConfigurationError('legacy client: userCode must not contain ":" (Basic auth splits there)');
    }
    const basic = Buffer.from(`${options.userCode}:${options.apiKey}`, 'utf8').toString('base64');
    this.authorization = `Basic ${basic}`;
    this.secrets = [options.apiKey, basic];
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

  /** `GET /advertiser/{programId}`: the program with its commission rules. */
  async programDetail(programId: string, options: LegacyCallOptions = {}): Promise<LegacyProgramDetail> {
    return this.call(
      {
        route: 'program.detail',
        params: { programId },
        idempotent: true,
        read: (answer) => this.parse('program.detail', answer, LegacyProgramDetail, 'a program'),
      },
      options,
    );
  }

  /**
   * `POST /advertiser/{programId}/conversions/add`. The answer carries no conversion id: look the
   * conversion up by `identifier` with `listConversions`.
   *
   * @throws LegacyActionError when the answer's `status` is `aborted` or `failed`
   */
  async addConversion(
    programId: string,
    body: LegacyConversionAddBody,
    options: LegacyCallOptions = {},
  ): Promise<LegacyActionResult> {
    return this.action('conversions.add', { programId }, LegacyConversionAddBody, body, false, options);
  }

  /**
   * `POST …/conversions/{conversionId}/refuse`: needs a conversion pending, or accepted and not
   * locked; otherwise `LegacyActionError`.
   */
  async refuseConversion(
    programId: string,
    conversionId: string,
    body: LegacyRefuseBody,
    options: LegacyCallOptions = {},
  ): Promise<LegacyActionResult> {
    return this.action(
      'conversions.refuse',
      { programId, conversionId },
      LegacyRefuseBody,
      body,
      true,
      options,
    );
  }

  /**
   * `GET …/conversions/{conversionId}/accept`: needs a conversion pending, not locked, not refused;
   * otherwise `LegacyActionError`.
   */
  async acceptConversion(
    programId: string,
    conversionId: string,
    options: LegacyCallOptions = {},
  ): Promise<LegacyActionResult> {
    return this.action(
      'conversions.accept',
      { programId, conversionId },
      undefined,
      undefined,
      true,
      options,
    );
  }

  /** `GET /advertiser/{programId}/conversions`: one page (`limit` 0..100, default 20). */
  async listConversions(
    programId: string,
    query: Omit<LegacyConversionsQuery, 'count'> = {},
    options: LegacyCallOptions = {},
  ): Promise<LegacyConversion[]> {
    return this.call(
      {
        route: 'conversions.list',
        params: { programId },
        query: this.validate('conversions.list', LegacyConversionsQuery, { ...query, count: undefined }),
        idempotent: true,
        read: (answer) => this.parseList('conversions.list', answer, LegacyConversion, 'conversion'),
      },
      options,
    );
  }

  /** The number of conversions matching `query` (`count=1`). */
  async countConversions(
    programId: string,
    query: Omit<LegacyConversionsQuery, 'count' | 'skip' | 'limit'> = {},
    options: LegacyCallOptions = {},
  ): Promise<number> {
    return this.call(
      {
        route: 'conversions.list',
        params: { programId },
        query: this.validate('conversions.list', LegacyConversionsQuery, { ...query, count: 1 }),
        idempotent: true,
        read: (answer) => {
          const json = this.needJson('conversions.list', answer);
          // The shape of a count answer is not documented: a bare number or `{ count }`.
          const count = typeof json === 'number' ? json : field(json, 'count');
          if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) {
            throw new PermanentError(`${label('conversions.list')} answered count=1 without a count`, {
              status: answer.status,
            });
          }
          return count;
        },
      },
      options,
    );
  }

  /** `GET …/conversions/{conversionId}`; undefined when there is no such conversion (404). */
  async conversionDetail(
    programId: string,
    conversionId: string,
    options: LegacyCallOptions = {},
  ): Promise<LegacyConversionDetail | undefined> {
    return this.call(
      {
        route: 'conversions.detail',
        params: { programId, conversionId },
        idempotent: true,
        notFound: () => undefined,
        read: (answer) => this.parse('conversions.detail', answer, LegacyConversionDetail, 'a conversion'),
      },
      options,
    );
  }

  /** `GET /advertiser/{programId}/partnerships` (filter by `trackingId` to find an affiliate). */
  async listPartnerships(
    programId: string,
    query: Omit<LegacyPartnershipsQuery, 'count'> = {},
    options: LegacyCallOptions = {},
  ): Promise<LegacyPartnership[]> {
    return this.call(
      {
        route: 'partnerships.list',
        params: { programId },
        query: this.validate('partnerships.list', LegacyPartnershipsQuery, { ...query, count: undefined }),
        idempotent: true,
        read: (answer) => this.parseList('partnerships.list', answer, LegacyPartnership, 'partnership'),
      },
      options,
    );
  }

  private action(
    route: LegacyRouteName,
    params: Record<string, string>,
    schema: z.ZodType | undefined,
    body: unknown,
    idempotent: boolean,
    options: LegacyCallOptions,
  ): Promise<LegacyActionResult> {
    return this.call(
      {
        route,
        params,
        body: schema ? this.validate(route, schema, body) : undefined,
        idempotent,
        read: (answer) => {
          const parsed = LegacyActionResult.safeParse(answer.json);
          if (!parsed.success) {
            // A 2xx without a readable status: usually a body cut short. For an add, unknown whether
            // it was recorded, so not retried blindly.
            const failure = new TransientError(
              `${label(route)} answered ${answer.status} without a readable status${!idempotent && !this.retryAmbiguousAdds ? NOT_RETRIED : ''}`,
              { status: answer.status },
            );
            if (!idempotent && !this.retryAmbiguousAdds) this.final.add(failure);
            throw failure;
          }
          const result = parsed.data;
          if (result.status === 'done') return result;
          const message = this.redact(result.message).slice(0, PLATFORM_MESSAGE_MAX);
          const code = result.code === undefined ? '' : ` (code ${result.code})`;
          throw new LegacyActionError(
            `${label(route)} was ${result.status}${code}: ${message || 'no message'}`,
            result.status,
            result.code,
            { status: answer.status, platformMessage: message },
          );
        },
      },
      options,
    );
  }

  private validate<S extends z.ZodType>(route: LegacyRouteName, schema: S, input: unknown): z.output<S> {
    const parsed = schema.safeParse(input);
    if (parsed.success) return parsed.data;
    const { field: name, message } = firstIssue(parsed.error);
    throw new BadInputError(`${route}: invalid request: ${name ? `${name}: ` : ''}${message}`, {
      field: name || undefined,
    });
  }

  private parse<S extends z.ZodType>(
    route: LegacyRouteName,
    answer: Answer,
    schema: S,
    what: string,
  ): z.output<S> {
    const parsed = schema.safeParse(this.needJson(route, answer));
    if (parsed.success) return parsed.data;
    throw unreadable(route, answer, what, parsed.error);
  }

  private parseList<S extends z.ZodType>(
    route: LegacyRouteName,
    answer: Answer,
    schema: S,
    what: string,
  ): z.output<S>[] {
    const json = this.needJson(route, answer);
    if (!Array.isArray(json)) {
      throw new PermanentError(`${label(route)} answered ${answer.status} without a list`, {
        status: answer.status,
      });
    }
    return json.map((item, index) => {
      const parsed = schema.safeParse(item);
      if (!parsed.success) throw unreadable(route, answer, `a ${what} at index ${index}`, parsed.error);
      return parsed.data;
    });
  }

  private call<T>(operation: Operation<T>, options: LegacyCallOptions): Promise<T> {
    const { route } = operation;
    const { deadline, signal } = options;
    return withRetry((attempt) => this.attempt(operation, attempt, options), {
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
        this.emit({ type: 'retry', route, attempt, waitMs, status: (error as ConnectorError).status }),
    });
  }

  private async attempt<T>(
    operation: Operation<T>,
    { attempt }: RetryAttempt,
    { deadline, signal }: LegacyCallOptions,
  ): Promise<T> {
    const { route } = operation;
    const key = `${LEGACY_ROUTES[route].method} ${LEGACY_ROUTES[route].path}`;
    const permit = await this.limiter.acquire(key, { deadline, signal }).catch((error: unknown) => {
      if (error instanceof TransientError) this.final.add(error);
      throw error;
    });
    if (permit.waitedMs > 0) this.emit({ type: 'rate_limited', route, attempt, waitMs: permit.waitedMs });
    const started = this.now();
    const timeoutMs = deadline === undefined ? this.timeoutMs : Math.min(this.timeoutMs, deadline - started);
    if (timeoutMs <= 0) {
      permit.release();
      throw new TransientError(`${label(route)}: the deadline passed before it could be sent`);
    }
    let answer: Answer;
    try {
      answer = await this.send(operation, timeoutMs, signal);
    } catch (error) {
      this.emit({ type: 'request', route, attempt, durationMs: this.now() - started });
      throw error;
    } finally {
      permit.release();
    }
    this.emit({ type: 'request', route, attempt, status: answer.status, durationMs: this.now() - started });

    if (answer.status >= 200 && answer.status < 300) return operation.read(answer);
    if (answer.status === 404 && operation.notFound && !isUnknownRoute(answer)) return operation.notFound();
    const ambiguousAdd =
      !operation.idempotent && !this.retryAmbiguousAdds && isAmbiguousStatus(answer.status);
    const failure = this.failure(route, answer, ambiguousAdd ? NOT_RETRIED : '');
    if (answer.status === 429 && failure.retryAfterMs !== undefined) {
      this.limiter.holdUntil(key, this.now() + failure.retryAfterMs + RETRY_AFTER_MARGIN_MS);
      this.emit({ type: 'rate_limited', route, attempt, status: 429, waitMs: failure.retryAfterMs });
    }
    if (ambiguousAdd) this.final.add(failure);
    throw failure;
  }

  private async send(
    operation: Operation<unknown>,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Answer> {
    const { route } = operation;
    const { method, path } = LEGACY_ROUTES[route];
    const url = new URL(`${this.baseUrl}/2.0${fillPath(path, operation.params)}`);
    url.search = searchParamsOf(operation.query ?? {}).toString();
    const headers: Record<string, string> = { authorization: this.authorization, accept: 'application/json' };
    if (operation.body !== undefined) headers['content-type'] = 'application/json';
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      const response = await this.fetchFn(url, {
        method,
        headers,
        body: operation.body === undefined ? undefined : JSON.stringify(operation.body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        // A redirect means a wrong base URL; following it could carry the credentials elsewhere.
        redirect: 'manual',
      });
      const text = await response.text();
      return { status: response.status, headers: response.headers, text, json: parseJson(text) };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const ambiguousAdd = !operation.idempotent && !this.retryAmbiguousAdds;
      if (timeout.aborted) {
        const failure = new TransientError(
          `${label(route)} got no answer within ${timeoutMs} ms${ambiguousAdd ? NOT_RETRIED : ''}`,
          { cause: error },
        );
        if (ambiguousAdd) this.final.add(failure);
        throw failure;
      }
      const code = errorCode(error);
      const sent = code === undefined || !NOT_SENT_CODES.has(code);
      const failure = new TransientError(
        `${label(route)} failed without an answer (${code ?? 'network error'})${ambiguousAdd && sent ? NOT_RETRIED : ''}`,
        { cause: error },
      );
      if (ambiguousAdd && sent) this.final.add(failure);
      throw failure;
    }
  }

  private failure(route: LegacyRouteName, answer: Answer, suffix: string): ConnectorError {
    const { status } = answer;
    const message = field(answer.json, 'message');
    const platformMessage = this.redact(typeof message === 'string' ? message : answer.text.trim()).slice(
      0,
      PLATFORM_MESSAGE_MAX,
    );
    const head = `${label(route)} answered ${status}`;
    const details = { status, platformMessage };
    if (status === 401 || status === 403) {
      return new ConfigurationError(
        `${head}: the legacy user code and API key were refused: ${platformMessage}`,
        details,
      );
    }
    if (status === 429) {
      const retryAfterMs = retryAfter(answer.headers, this.now());
      return new TransientError(
        `${head}: rate limited${retryAfterMs === undefined ? '' : `, retry after ${retryAfterMs} ms`}`,
        { ...details, retryAfterMs },
      );
    }
    if (status >= 500) return new TransientError(`${head}: ${platformMessage}${suffix}`, details);
    if (status === 404 && isUnknownRoute(answer)) {
      return new ConfigurationError(`${head}: the route is unknown (check LEGACY_BASE_URL)`, details);
    }
    if (status >= 400) {
      const name = field(answer.json, 'field');
      return new PermanentError(`${head}: ${platformMessage}`, {
        ...details,
        field: typeof name === 'string' ? name : undefined,
      });
    }
    return new ConfigurationError(`${head}: unexpected for an API call (check the base URL)`, details);
  }

  private needJson(route: LegacyRouteName, answer: Answer): unknown {
    if (answer.json !== undefined) return answer.json;
    throw new TransientError(`${label(route)} answered ${answer.status} with a body that is not JSON`, {
      status: answer.status,
    });
  }

  private redact(text: string): string {
    let out = text;
    for (const secret of this.secrets) out = out.replaceAll(secret, '[redacted]');
    return out;
  }

  private emit(event: LegacyClientEvent): void {
    try {
      this.onEvent?.(event);
    } catch {
      // A failing metrics hook must not fail the call it reports on.
    }
  }
}

function label(route: LegacyRouteName): string {
  const { method, path } = LEGACY_ROUTES[route];
  return `legacy ${route} (${method} /2.0${path})`;
}

function unreadable(route: LegacyRouteName, answer: Answer, what: string, error: z.ZodError): PermanentError {
  const { field: name, message } = firstIssue(error);
  return new PermanentError(
    `${label(route)} answered ${answer.status} without ${what} the client can read (${name || 'body'}: ${message})`,
    { status: answer.status, field: name || undefined },
  );
}

function fillPath(template: string, params: Readonly<Record<string, string>>): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined || value === '') {
      throw new BadInputError(`legacy client: ${name} is required`, { field: name });
    }
    return encodeURIComponent(value);
  });
}

function checkBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigurationError('legacy client: baseUrl is not a URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ConfigurationError('legacy client: baseUrl must be an http or https URL');
  }
  if (url.search || url.hash) throw new ConfigurationError('legacy client: baseUrl must not carry a query');
  return value.replace(/\/+$/, '');
}

function checkCredential(name: string, value: string): void {
  if (typeof value !== 'string' || value.length === 0) {
    throw new ConfigurationError(`legacy client: ${name} is empty`);
  }
  // Secrets often come back with a trailing newline.
  if (!/^[\x21-\x7e]+$/.test(value)) {
    throw new ConfigurationError(
      `legacy client: ${name} has spaces or characters that are not printable ASCII`,
    );
  }
}

function positive(name: string, value: number): number {
  if (!(value > 0)) throw new ConfigurationError(`legacy client: ${name} must be a positive number`);
  return value;
}

function nonNegative(name: string, value: number): number {
  if (!(value >= 0)) throw new ConfigurationError(`legacy client: ${name} must be zero or more`);
  return value;
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

/** A 404 of a path the server does not serve, told from "no such conversion" by its wording. */
function isUnknownRoute(answer: Answer): boolean {
  if (answer.json === undefined) return answer.text.trim() !== '';
  const message = field(answer.json, 'message');
  return typeof message === 'string' && /\broute\b|cannot (get|post)\b/i.test(message);
}

function isAmbiguousStatus(status: number): boolean {
  return status >= 500 && status !== 503;
}

/** `Retry-After` in seconds or as an HTTP date (the interface documents no rate-limit headers). */
function retryAfter(headers: Headers, now: number): number | undefined {
  const value = headers.get('retry-after')?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Math.round(Number(value) * 1e6) / 1e3);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
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

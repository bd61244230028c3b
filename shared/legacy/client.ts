import * as z from 'zod/mini';
import { type CredentialSource, followingCredential, type HeldCredential } from '../affiliate/credential.ts';
import {
  type CallOptions,
  checkBaseUrl,
  field,
  type HttpClientOptions,
  type HttpEvent,
  PlatformHttp,
  type PlatformRequest,
  type PlatformResponse,
  validateRequest,
} from '../affiliate/http.ts';
import { BadInputError, ConfigurationError, type ConnectorErrorDetails, PermanentError } from '../errors.ts';
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
export type LegacyClientEvent = Omit<HttpEvent<LegacyRouteName>, 'path'>;

export interface LegacyClientOptions extends LegacyCredentials, HttpClientOptions {
  /** `{legacy_base_url}`: routes are `<baseUrl>/2.0/…`. May carry a path prefix. */
  readonly baseUrl: string;
  /**
   * Reads the credentials again, as one value `user_code:api_key`, for credentials rotated while the
   * process lives (a warm Lambda): before each call with `fresh: false` (the secret store's cache
   * bounds how often that reaches it, so the client follows a rotation within the cache's max age),
   * and once after a 401 with `fresh: true`; changed credentials then get the call again. A value
   * that is not `user_code:api_key` fails the call. Without it the credentials are fixed.
   */
  readonly credentialsSource?: CredentialSource;
  /**
   * Names where `credentialsSource` reads in the errors about its values (`secret <name>`); never
   * the value. @default 'legacy credentials'
   */
  readonly credentialsOrigin?: string;
  readonly onEvent?: (event: LegacyClientEvent) => void;
}

export type LegacyCallOptions = CallOptions;

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

/** An operation of the legacy interface: its route names the method and the path template. */
interface Operation<T> extends Omit<PlatformRequest<LegacyRouteName, T>, 'method' | 'path' | 'url'> {
  readonly params: Readonly<Record<string, string>>;
}

/** A list route: the schema of its query, and of each item of its answer. */
interface ListRoute<S extends z.core.$ZodType> {
  readonly route: LegacyRouteName;
  readonly query: z.core.$ZodType<Record<string, unknown>>;
  readonly item: S;
  /** Names an item in errors. */
  readonly what: string;
}

const CONVERSIONS: ListRoute<typeof LegacyConversion> = {
  route: 'conversions.list',
  query: LegacyConversionsQuery,
  item: LegacyConversion,
  what: 'conversion',
};
const PARTNERSHIPS: ListRoute<typeof LegacyPartnership> = {
  route: 'partnerships.list',
  query: LegacyPartnershipsQuery,
  item: LegacyPartnership,
  what: 'partnership',
};

const CLIENT = 'legacy client';

/**
 * Typed client of the legacy 2.0 interface (advertiser half): HTTP Basic, bodies and queries checked
 * with the shared schemas before they leave, a client-side rate limit per route, bounded retries with
 * jittered backoff within the caller's deadline, and the connector's error classes: 401/403 →
 * `ConfigurationError`, 429/408/5xx/network/timeout → `TransientError`, other 4xx and action answers
 * with `status` `aborted`/`failed` → `PermanentError` (`LegacyActionError`). With a
 * `credentialsSource` it follows rotated credentials as `AffiliateClient` follows its token.
 */
export class LegacyClient {
  private readonly baseUrl: string;
  private readonly http: PlatformHttp<LegacyRouteName>;
  private readonly credentialsSource: CredentialSource | undefined;
  private readonly credentialsOrigin: string | undefined;
  /** The `Basic …` header value now sent. */
  private authorization: string;
  private readonly heldCredentials: HeldCredential = {
    what: 'credentials',
    current: () => this.authorization,
    use: (value) => this.useCredentials(value),
  };

  constructor(options: LegacyClientOptions) {
    this.baseUrl = checkBaseUrl(CLIENT, options.baseUrl).replace(/\/+$/, '');
    const basic = basicOf(options);
    this.authorization = `Basic ${basic}`;
    this.credentialsSource = options.credentialsSource;
    this.credentialsOrigin = options.credentialsOrigin;
    const { onEvent } = options;
    this.http = new PlatformHttp(options, {
      client: CLIENT,
      authorization: this.authorization,
      secrets: [options.apiKey, basic],
      label,
      refused: 'the legacy user code and API key were refused',
      unknownRoute: () => 'the route is unknown (check LEGACY_BASE_URL)',
      networkFailure: () => 'network error',
      // Its events name the route only: the rate-limit key is the route template, not a path.
      onEvent: onEvent && (({ path: _path, ...event }) => onEvent(event)),
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
    return this.list(CONVERSIONS, programId, query, options);
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
        query: validateRequest('conversions.list', LegacyConversionsQuery, { ...query, count: 1 }),
        idempotent: true,
        read: (answer) => {
          const json = this.http.needJson('conversions.list', answer);
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
    return this.list(PARTNERSHIPS, programId, query, options);
  }

  private action(
    route: LegacyRouteName,
    params: Record<string, string>,
    schema: z.core.$ZodType | undefined,
    body: unknown,
    idempotent: boolean,
    options: LegacyCallOptions,
  ): Promise<LegacyActionResult> {
    return this.call(
      {
        route,
        params,
        body: schema ? validateRequest(route, schema, body) : undefined,
        idempotent,
        read: (answer) => {
          const parsed = LegacyActionResult.safeParse(answer.json);
          if (!parsed.success) {
            // A 2xx without a readable status: usually a body cut short. For an add, unknown whether
            // it was recorded, so not retried blindly.
            throw this.http.ambiguousFailure(
              `${label(route)} answered ${answer.status} without a readable status`,
              idempotent,
              { status: answer.status },
            );
          }
          const result = parsed.data;
          if (result.status === 'done') return result;
          const message = this.http.platformText(result.message);
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

  private parse<S extends z.core.$ZodType>(
    route: LegacyRouteName,
    answer: PlatformResponse,
    schema: S,
    what: string,
  ): z.output<S> {
    const parsed = z.safeParse(schema, this.http.needJson(route, answer));
    if (parsed.success) return parsed.data;
    throw this.http.unreadable(route, answer, what, parsed.error);
  }

  /** One page of a list route (never its count); the answer is a bare array of items. */
  private list<S extends z.core.$ZodType>(
    { route, query: querySchema, item, what }: ListRoute<S>,
    programId: string,
    query: object,
    options: LegacyCallOptions,
  ): Promise<z.output<S>[]> {
    return this.call(
      {
        route,
        params: { programId },
        query: validateRequest(route, querySchema, { ...query, count: undefined }),
        idempotent: true,
        read: (answer) => {
          const json = this.http.needJson(route, answer);
          if (!Array.isArray(json)) {
            throw new PermanentError(`${label(route)} answered ${answer.status} without a list`, {
              status: answer.status,
            });
          }
          return json.map((entry, index) => {
            const parsed = z.safeParse(item, entry);
            if (!parsed.success) {
              throw this.http.unreadable(route, answer, `a ${what} at index ${index}`, parsed.error);
            }
            return parsed.data;
          });
        },
      },
      options,
    );
  }

  private async call<T>({ params, ...operation }: Operation<T>, options: LegacyCallOptions): Promise<T> {
    const { method, path } = LEGACY_ROUTES[operation.route];
    // Filled as the request is sent: a missing id rejects the call with BadInputError, not retried.
    const url = () => `${this.baseUrl}/2.0${fillPath(path, params)}`;
    const send = () => this.http.call({ ...operation, method, path: `${method} ${path}`, url }, options);
    return followingCredential(this.credentialsSource, this.heldCredentials, send);
  }

  /** Sends `value`'s credentials from now on; a value that is not `user_code:api_key` throws, naming its origin. */
  private useCredentials(value: string): void {
    const credentials = parseLegacyCredentials(value, this.credentialsOrigin);
    const basic = basicOf(credentials);
    if (`Basic ${basic}` === this.authorization) return;
    this.authorization = `Basic ${basic}`;
    // Both forms of the new key are redacted from the platform's messages, should it echo one.
    this.http.reauthorize(this.authorization, basic);
    this.http.reauthorize(this.authorization, credentials.apiKey);
  }
}

/** `base64(user_code:api_key)` of checked credentials; a `ConfigurationError` naming the wrong part. */
function basicOf({ userCode, apiKey }: LegacyCredentials): string {
  checkCredential('userCode', userCode);
  checkCredential('apiKey', apiKey);
  if (userCode.includes(':')) {
    throw new ConfigurationError('legacy client: userCode must not contain ":" (Basic auth splits there)');
  }
  return Buffer.from(`${userCode}:${apiKey}`, 'utf8').toString('base64');
}

function label(route: LegacyRouteName): string {
  const { method, path } = LEGACY_ROUTES[route];
  return `legacy ${route} (${method} /2.0${path})`;
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

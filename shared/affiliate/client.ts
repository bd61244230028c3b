import type * as z from 'zod/mini';
import { HexId } from '../domain/ids.ts';
import { ConfigurationError, PermanentError } from '../errors.ts';
import { type CredentialSource, followingCredential, type HeldCredential } from './credential.ts';
import {
  type CallOptions,
  checkBaseUrl,
  field,
  type HttpClientOptions,
  type HttpEvent,
  PlatformHttp,
  type PlatformRequest,
  validateRequest,
} from './http.ts';
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
} from './schemas.ts';

export type { CallOptions } from './http.ts';
export { searchParamsOf } from './http.ts';

/** What the client reports to metrics and logs; it never logs by itself. */
export type AffiliateClientEvent = HttpEvent<RouteName>;

export interface AffiliateClientOptions extends HttpClientOptions {
  /** Base URL of the current API; may carry a path prefix. */
  readonly baseUrl: string;
  /** Bearer token. Never appears in errors or events. */
  readonly token: string;
  /**
   * Reads the token again, for a token rotated while the process lives (a warm Lambda): before each
   * call with `fresh: false` (the secret store's cache bounds how often that reaches it, so the
   * token follows a rotation within the cache's max age), and once after a 401 with `fresh: true`;
   * a changed token then gets the call again. Without it the token is fixed.
   */
  readonly tokenSource?: CredentialSource;
  /** Paths to use instead of `DEFAULT_ROUTES`, per operation. */
  readonly routes?: Partial<RouteTable>;
  readonly onEvent?: (event: AffiliateClientEvent) => void;
}

export interface ConversionList {
  /** Matches before paging (as the platform reports it; the page length when it does not). */
  readonly total: number;
  readonly data: Conversion[];
}

/** An operation of the current API: its route names the method and the (overridable) path. */
type Operation<T> = Omit<PlatformRequest<RouteName, T>, 'method' | 'path' | 'url'>;

const CLIENT = 'affiliate client';

/**
 * Typed client of the affiliate platform's current API (4.93): validates every request with the
 * shared schemas before it leaves the process, limits the rate per route, retries what is worth
 * retrying within bounded attempts and the caller's deadline, and throws the connector's error
 * classes (`BadInputError`, `ConfigurationError`, `PermanentError`, `TransientError`).
 */
export class AffiliateClient {
  readonly routes: RouteTable;
  private readonly baseUrl: string;
  private readonly http: PlatformHttp<RouteName>;
  private readonly tokenSource: AffiliateClientOptions['tokenSource'];
  private token: string;
  private readonly heldToken: HeldCredential = {
    what: 'token',
    current: () => this.token,
    use: (value) => this.useToken(value),
  };

  constructor(options: AffiliateClientOptions) {
    this.baseUrl = checkBaseUrl(CLIENT, options.baseUrl);
    const token = checkToken(options.token);
    this.token = token;
    this.tokenSource = options.tokenSource;
    this.routes = resolveRoutes(options.routes ?? {});
    this.http = new PlatformHttp(options, {
      client: CLIENT,
      authorization: `Bearer ${token}`,
      secrets: [token],
      label: (route) => this.label(route),
      refused: 'the API token was refused',
      unknownRoute: (path) => `the route ${path} is unknown to the platform (check the routes)`,
      wrongMethod: (path) => `the platform serves ${path} with another method (check the routes)`,
      retryAfterSuffix: '-ratelimit-route-second-retry-after',
      windowHeaderSuffix: '-ratelimit-route-second',
      onEvent: options.onEvent,
    });
  }

  /** The account's ids: advertiser, programs and their rules, partnerships, groups, users. */
  async advertiserInfo(options: CallOptions = {}): Promise<AdvertiserInfo> {
    return this.call(
      {
        route: 'advertisers.me',
        idempotent: true,
        read: (answer) => {
          const json = this.http.needJson('advertisers.me', answer);
          const candidate = field(json, 'advertiser') ?? field(json, 'data') ?? json;
          const parsed = AdvertiserInfo.safeParse(candidate);
          if (!parsed.success)
            throw this.http.unreadable('advertisers.me', answer, 'an advertiser', parsed.error);
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
        body: validateRequest('conversions.add', ConversionAddBody, body),
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
        query: validateRequest('conversions.info', ConversionInfoQuery, query),
        idempotent: true,
        notFound: () => undefined,
        read: (answer) => {
          const candidate = findConversion(this.http.needJson('conversions.info', answer));
          if (candidate === undefined) return undefined;
          const parsed = Conversion.safeParse(candidate);
          if (!parsed.success)
            throw this.http.unreadable('conversions.info', answer, 'a conversion', parsed.error);
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
        query: validateRequest('conversions.list', ConversionsListQuery, query),
        idempotent: true,
        read: (answer) => {
          const json = this.http.needJson('conversions.list', answer);
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
              throw this.http.unreadable(
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
        body: validateRequest('commissionAdjustments.add', CommissionAdjustmentAddBody, body),
        idempotent: false,
        read: (answer) => ({
          id: hexId(field(field(answer.json, 'commissionAdjustment'), 'id')) ?? findId(answer.json),
        }),
      },
      options,
    );
  }

  private action<S extends z.core.$ZodType>(
    route: RouteName,
    schema: S,
    body: unknown,
    options: CallOptions,
  ): Promise<Conversion | undefined> {
    return this.call(
      {
        route,
        body: validateRequest(route, schema, body),
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

  private async call<T>(operation: Operation<T>, options: CallOptions): Promise<T> {
    const { route } = operation;
    const path = this.routes[route];
    const url = () => routeUrl(this.baseUrl, path);
    const send = () => this.http.call({ ...operation, method: ROUTE_METHODS[route], path, url }, options);
    return followingCredential(this.tokenSource, this.heldToken, send);
  }

  private useToken(value: string): void {
    if (value === this.token) return;
    const token = checkToken(value);
    this.token = token;
    this.http.reauthorize(`Bearer ${token}`, token);
  }

  private label(route: RouteName): string {
    return `${route} (${ROUTE_METHODS[route]} ${this.routes[route]})`;
  }
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

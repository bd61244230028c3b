import { ConfigurationError, PermanentError } from '../errors.ts';
import { clipped, quotedAddress } from '../http/client-answers.ts';
import { PageCursors, ShopHttp, type ShopHttpOptions, type ShopResponse, urlOf } from './http.ts';

/** The Admin REST API version the client and the sandbox's fake speak. */
export const SHOPIFY_API_VERSION = '2025-07';

/**
 * Shopify Admin REST API: `X-Shopify-Access-Token`, cursor pages through the `Link` header
 * (`<…page_info=…>; rel="next"`); a next page URL carries only `page_info` and `limit`, never the
 * first request's filters. 429 comes with `Retry-After` (leaky bucket of 2 calls per second).
 */
export class ShopifyClient {
  readonly #http: ShopHttp;
  readonly #base: string;

  constructor(
    credentials: { readonly url: string; readonly accessToken: string },
    options: ShopHttpOptions = {},
  ) {
    this.#base = credentials.url;
    this.#http = new ShopHttp(
      {
        name: 'Shopify',
        headers: { 'x-shopify-access-token': credentials.accessToken },
        secrets: [credentials.accessToken],
        messageOf: (body) => {
          const errors = (body as { errors?: unknown } | undefined)?.errors;
          if (typeof errors === 'string') return errors;
          return errors === undefined ? undefined : JSON.stringify(errors);
        },
      },
      options,
    );
  }

  /** `GET /admin/api/{version}/{path}` (`orders.json`, `webhooks.json`). */
  get(path: string, query: Readonly<Record<string, string>> = {}): Promise<ShopResponse> {
    return this.#http.request(this.#url(path, query));
  }

  /** `POST /admin/api/{version}/{path}` with a JSON body. */
  post(path: string, body: unknown): Promise<ShopResponse> {
    return this.#http.request(this.#url(path, {}), {
      method: 'POST',
      body: { contentType: 'application/json', text: JSON.stringify(body) },
    });
  }

  /**
   * Every item of a list resource (`{ "<key>": [...] }`), page by page: at most `SHOP_MAX_PAGES`
   * pages, and never a next link already read.
   */
  async *list(path: string, key: string, query: Readonly<Record<string, string>>): AsyncGenerator<unknown[]> {
    const first = this.#url(path, query);
    const cursors = new PageCursors('Shopify', first.pathname, first.href);
    let url: URL | undefined = first;
    while (url) {
      const answer = await this.#http.request(url);
      const items = (answer.json as Record<string, unknown>)[key];
      if (!Array.isArray(items)) {
        throw new PermanentError(`Shopify API: GET ${url.pathname} answered without a "${key}" list`);
      }
      yield items;
      url = nextLink(answer.headers.get('link'));
      if (url && url.origin !== first.origin) {
        // The access token goes with every page: a next page elsewhere is refused as a redirect is.
        const where = quotedAddress(url) ?? 'an address that is not http(s)';
        throw new ConfigurationError(
          `Shopify API: GET ${first.pathname} sent a next page on another host, ${where}: set shopApi.url to where the API is (a page elsewhere is not read, as it would carry the access token)`,
        );
      }
      if (url) cursors.follow(url.href, `a next page already read (${clipped(url.search)})`);
    }
  }

  #url(path: string, query: Readonly<Record<string, string>>): URL {
    return urlOf(this.#base, `/admin/api/${SHOPIFY_API_VERSION}/${path}`, query);
  }
}

/** The `rel="next"` URL of a `Link` header, if any. */
export function nextLink(header: string | null): URL | undefined {
  if (!header) return undefined;
  for (const part of header.split(',')) {
    const match = /<([^>]+)>\s*;\s*rel="?next"?/.exec(part);
    if (match?.[1]) return new URL(match[1]);
  }
  return undefined;
}

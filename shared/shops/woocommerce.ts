import { PermanentError } from '../errors.ts';
import { ShopHttp, type ShopHttpOptions, type ShopResponse, stringAt, urlOf } from './http.ts';

/** Pages beyond this are refused rather than walked forever (100 per page: 100 000 orders). */
const MAX_PAGES = 1000;

/**
 * WooCommerce REST API v3 (`/wp-json/wc/v3/…`): HTTP Basic with the consumer key and secret (over
 * HTTPS, as WooCommerce asks), numbered pages (`page`, `per_page` up to 100) with the count in
 * `X-WP-TotalPages`.
 */
export class WooCommerceClient {
  readonly #http: ShopHttp;
  readonly #base: string;

  constructor(
    credentials: { readonly url: string; readonly consumerKey: string; readonly consumerSecret: string },
    options: ShopHttpOptions = {},
  ) {
    this.#base = credentials.url;
    const basic = Buffer.from(`${credentials.consumerKey}:${credentials.consumerSecret}`).toString('base64');
    this.#http = new ShopHttp(
      {
        name: 'WooCommerce',
        headers: { authorization: `Basic ${basic}` },
        secrets: [credentials.consumerKey, credentials.consumerSecret],
        messageOf: (body) => stringAt(body, 'message'),
      },
      options,
    );
  }

  /** `GET /wp-json/wc/v3/{path}` (`orders`, `orders/727/refunds`, `webhooks`). */
  get(path: string, query: Readonly<Record<string, string>> = {}): Promise<ShopResponse> {
    return this.#http.request(this.#url(path, query));
  }

  /** `POST` or `PUT /wp-json/wc/v3/{path}` with a JSON body. */
  send(method: 'POST' | 'PUT', path: string, body: unknown): Promise<ShopResponse> {
    return this.#http.request(this.#url(path, {}), {
      method,
      body: { contentType: 'application/json', text: JSON.stringify(body) },
    });
  }

  /** Every item of a list route, page by page until `X-WP-TotalPages`. */
  async *list(path: string, query: Readonly<Record<string, string>>): AsyncGenerator<unknown[]> {
    for (let page = 1; page <= MAX_PAGES; page++) {
      const url = this.#url(path, { ...query, page: String(page) });
      const answer = await this.#http.request(url);
      if (!Array.isArray(answer.json)) {
        throw new PermanentError(`WooCommerce API: GET ${url.pathname} answered without a list`);
      }
      yield answer.json;
      const total = Number(answer.headers.get('x-wp-totalpages') ?? '1');
      if (!Number.isFinite(total) || page >= total || answer.json.length === 0) return;
    }
    throw new PermanentError(
      `WooCommerce API: GET ${path} has more than ${MAX_PAGES} pages: narrow the period`,
    );
  }

  #url(path: string, query: Readonly<Record<string, string>>): URL {
    return urlOf(this.#base, `/wp-json/wc/v3/${path}`, query);
  }
}

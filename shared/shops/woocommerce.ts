import { PermanentError } from '../errors.ts';
import {
  SHOP_MAX_PAGES,
  ShopHttp,
  type ShopHttpOptions,
  type ShopResponse,
  stringAt,
  tooManyPages,
  urlOf,
} from './http.ts';

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
        // The header's value too: a shop or the WAF in front of it may quote it, and it is the pair.
        secrets: [credentials.consumerKey, credentials.consumerSecret, basic],
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

  /**
   * Every item of a list route, each once. The pages are numbered over a list that can shrink while
   * it is walked (an order modified after the period leaves a `modified_before` list), and a shrink
   * moves every later item a place towards page 1: walked first to last, the item on a page's edge
   * would move onto the page just read and be skipped. So after page 1, which tells the count, the
   * pages are read last to first: an item only ever moves onto a page still to read. Page 1 is read
   * again at the end when the list shrank meanwhile. Items already given (by `id`) are not given again.
   */
  async *list(path: string, query: Readonly<Record<string, string>>): AsyncGenerator<unknown[]> {
    const seen = new Set<string>();
    const fresh = (items: unknown[]): unknown[] =>
      items.filter((item) => {
        const id = idOf(item);
        if (id === undefined) return true;
        if (seen.has(id)) return false;
        seen.add(id);
        return true;
      });
    const first = await this.#page(path, query, 1);
    if (first.pages > SHOP_MAX_PAGES) throw tooManyPages('WooCommerce', this.#url(path, {}).pathname);
    yield fresh(first.items);
    if (first.pages <= 1 || first.items.length === 0) return;
    let shrank = false;
    for (let page = first.pages; page >= 2; page--) {
      const answer = await this.#page(path, query, page);
      if (answer.count === undefined || first.count === undefined || answer.count < first.count)
        shrank = true;
      yield fresh(answer.items);
    }
    if (shrank) yield fresh((await this.#page(path, query, 1)).items);
  }

  /** One page, with `X-WP-TotalPages` and the list's size (`X-WP-Total`, else the pages). */
  async #page(
    path: string,
    query: Readonly<Record<string, string>>,
    page: number,
  ): Promise<{ items: unknown[]; pages: number; count: number | undefined }> {
    const url = this.#url(path, { ...query, page: String(page) });
    const answer = await this.#http.request(url);
    if (!Array.isArray(answer.json)) {
      throw new PermanentError(`WooCommerce API: GET ${url.pathname} answered without a list`);
    }
    const pages = Number(answer.headers.get('x-wp-totalpages') ?? '1');
    const total = answer.headers.get('x-wp-total');
    const count = total === null ? pages : Number(total);
    return {
      items: answer.json,
      pages: Number.isFinite(pages) ? pages : 1,
      count: Number.isFinite(count) ? count : undefined,
    };
  }

  #url(path: string, query: Readonly<Record<string, string>>): URL {
    return urlOf(this.#base, `/wp-json/wc/v3/${path}`, query);
  }
}

/** A list item's `id` as text, if it has one. */
function idOf(item: unknown): string | undefined {
  if (typeof item !== 'object' || item === null) return undefined;
  const id = (item as Record<string, unknown>)['id'];
  return typeof id === 'string' || typeof id === 'number' ? String(id) : undefined;
}

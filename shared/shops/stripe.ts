import { PermanentError } from '../errors.ts';
import { clipped } from '../http/client-answers.ts';
import { PageCursors, ShopHttp, type ShopHttpOptions, type ShopResponse, urlOf } from './http.ts';

/**
 * Stripe API (`/v1/…`): the secret or restricted key as a bearer, lists paged with
 * `starting_after=<last id>` while `has_more`, writes form-encoded.
 */
export class StripeClient {
  readonly #http: ShopHttp;
  readonly #base: string;

  constructor(
    credentials: { readonly url: string; readonly secretKey: string },
    options: ShopHttpOptions = {},
  ) {
    this.#base = credentials.url;
    this.#http = new ShopHttp(
      {
        name: 'Stripe',
        headers: { authorization: `Bearer ${credentials.secretKey}` },
        secrets: [credentials.secretKey],
        messageOf: (body) => {
          const message = (body as { error?: { message?: unknown } } | undefined)?.error?.message;
          return typeof message === 'string' ? message : undefined;
        },
      },
      options,
    );
  }

  /** `GET /v1/{path}`. */
  get(path: string, query: Readonly<Record<string, string>> = {}): Promise<ShopResponse> {
    return this.#http.request(this.#url(path, query));
  }

  /** `POST /v1/{path}`, form-encoded as Stripe expects (`enabled_events[]=…` repeated). */
  post(path: string, form: URLSearchParams): Promise<ShopResponse> {
    return this.#http.request(this.#url(path, {}), {
      method: 'POST',
      body: { contentType: 'application/x-www-form-urlencoded', text: form.toString() },
    });
  }

  /**
   * Every item of a list (`{ data, has_more }`), page by page: at most `SHOP_MAX_PAGES` pages, and
   * never from a last id already followed.
   */
  async *list(path: string, query: Readonly<Record<string, string>>): AsyncGenerator<unknown[]> {
    const cursors = new PageCursors('Stripe', this.#url(path, {}).pathname);
    let after: string | undefined;
    for (;;) {
      const url = this.#url(path, after === undefined ? query : { ...query, starting_after: after });
      const answer = await this.#http.request(url);
      const body = answer.json as { data?: unknown; has_more?: unknown };
      if (!Array.isArray(body.data)) {
        throw new PermanentError(`Stripe API: GET ${url.pathname} answered without a data list`);
      }
      yield body.data;
      const last = body.data.at(-1) as { id?: unknown } | undefined;
      if (body.has_more !== true || typeof last?.id !== 'string') return;
      cursors.follow(last.id, `the same last id twice (starting_after=${clipped(last.id)})`);
      after = last.id;
    }
  }

  #url(path: string, query: Readonly<Record<string, string>>): URL {
    return urlOf(this.#base, `/v1/${path}`, query);
  }
}

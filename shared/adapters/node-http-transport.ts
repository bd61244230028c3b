import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { HttpAnswer, HttpFetch, ResponseHeaders } from '../ports.ts';

/**
 * The platform clients' HTTP transport: node:http and node:https, which the AWS SDK's clients load
 * anyway, instead of Node's fetch. Fetch is undici, which Node loads on the first call: on this
 * project's bench machine a container's first call took 25–43 ms against 10–13, and its first 400
 * calls three and a half times the CPU (1.6 ms a call against 0.5; docs/benchmarks.md). Lambda gives
 * a worker a share of a core, so CPU is latency there.
 *
 * It does what the clients asked of fetch: the body sent with its length, the answer read whole
 * as UTF-8 (a byte order mark dropped, as fetch's `text()` does), the signal ending the request or
 * the reading of its answer, and no redirect followed (http.request never follows one). Sockets
 * are kept alive by Node's global agents, which close an idle one a second before the server's
 * `Keep-Alive: timeout` hint (Node 24.7 and later). A failure to connect rejects with the system
 * error (its `code`, as ECONNREFUSED), which the clients read to know nothing was sent.
 */
export const nodeHttpFetch: HttpFetch = (url, init) =>
  new Promise<HttpAnswer>((resolve, reject) => {
    const body = init.body === undefined ? undefined : Buffer.from(init.body, 'utf8');
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const request = send(
      url,
      {
        method: init.method,
        headers: body === undefined ? init.headers : { ...init.headers, 'content-length': body.length },
        signal: init.signal,
      },
      (response) => resolve(answerOf(response)),
    );
    // After the answer came, a failure is the body's: `text()` rejects with it.
    request.on('error', reject);
    request.end(body);
  });

function answerOf(response: IncomingMessage): HttpAnswer {
  const chunks: Buffer[] = [];
  const text = new Promise<string>((resolve, reject) => {
    response.on('data', (chunk: Buffer) => chunks.push(chunk));
    response.on('end', () => resolve(UTF8.decode(Buffer.concat(chunks))));
    response.on('error', reject);
    response.on('close', () => {
      if (!response.complete) reject(new Error('the connection closed before the answer had all come'));
    });
  });
  // Read by `text()`; a caller that never reads it must not leave an unhandled rejection.
  text.catch(() => undefined);
  return { status: response.statusCode ?? 0, headers: new AnswerHeaders(response.headers), text: () => text };
}

/** Drops a leading byte order mark, as fetch's `text()` does. */
const UTF8 = new TextDecoder();

/** An answer's headers as fetch gives them: names in lower case, in order; repeated values joined. */
class AnswerHeaders implements ResponseHeaders {
  readonly #values: Map<string, string>;

  constructor(headers: IncomingHttpHeaders) {
    const entries: [string, string][] = [];
    for (const [name, value] of Object.entries(headers)) {
      if (value !== undefined) entries.push([name, Array.isArray(value) ? value.join(', ') : value]);
    }
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    this.#values = new Map(entries);
  }

  get(name: string): string | null {
    return this.#values.get(name.toLowerCase()) ?? null;
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.#values.entries();
  }
}

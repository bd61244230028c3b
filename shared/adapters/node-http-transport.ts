import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { answerTooLargeMessage } from '../http/client-answers.ts';
import type { HttpAnswer, HttpFetch, ResponseHeaders } from '../ports.ts';

/** The most of an answer's body the transport reads by default (`NodeHttpTransportOptions`). */
export const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

export interface NodeHttpTransportOptions {
  /**
   * The most bytes of an answer's body it reads; past them it closes the connection and the answer's
   * `text()` rejects, naming the cap. The platform's largest answers are pages of conversions (the
   * CLI's reconcile and the accept job ask 1,000 at a time), far under the default, 16 MiB; a body
   * past it is a fault, which would otherwise fill the function's memory within its 5 s timeout.
   */
  readonly maxAnswerBytes?: number;
}

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
 * error (its `code`, as ECONNREFUSED), which the clients read to know nothing was sent. It reads at
 * most `maxAnswerBytes` of an answer (`MAX_ANSWER_BYTES` by default).
 */
export function nodeHttpTransport(options: NodeHttpTransportOptions = {}): HttpFetch {
  const maxAnswerBytes = options.maxAnswerBytes ?? MAX_ANSWER_BYTES;
  return (url, init) => sendOnce(url, init, maxAnswerBytes);
}

const sendOnce = (url: URL, init: Parameters<HttpFetch>[1], maxAnswerBytes: number) =>
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
      (response) => resolve(answerOf(response, maxAnswerBytes)),
    );
    // After the answer came, a failure is the body's: `text()` rejects with it.
    request.on('error', reject);
    request.end(body);
  });

/** The transport the platform clients use by default: `nodeHttpTransport()`. */
export const nodeHttpFetch: HttpFetch = nodeHttpTransport();

function answerOf(response: IncomingMessage, maxAnswerBytes: number): HttpAnswer {
  const chunks: Buffer[] = [];
  let size = 0;
  const tooLarge = () => new Error(answerTooLargeMessage(maxAnswerBytes));
  const text = new Promise<string>((resolve, reject) => {
    const declared = Number(response.headers['content-length']);
    if (declared > maxAnswerBytes) {
      reject(tooLarge());
      response.destroy();
      return;
    }
    response.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxAnswerBytes) {
        reject(tooLarge());
        response.destroy();
        return;
      }
      chunks.push(chunk);
    });
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

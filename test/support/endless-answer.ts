import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP server that answers every request 200 with `{"<key>":["xxx…",…]}` streamed without a
 * length, 1 KiB at a time, until the client goes or `upTo` bytes are out: an API whose answer is far
 * larger than a client should hold.
 */
export interface EndlessAnswer {
  readonly url: string;
  /** The path and query of each request, in order. */
  urls(): string[];
  /** Bytes of the body written so far. */
  written(): number;
  /** Resolves when the server saw the first answer's connection close: true if before its end. */
  readonly closed: Promise<boolean>;
  close(): Promise<void>;
}

export async function startEndlessAnswer(upTo: number, key = 'orders'): Promise<EndlessAnswer> {
  let written = 0;
  const urls: string[] = [];
  let sawClose: (early: boolean) => void = () => undefined;
  const closed = new Promise<boolean>((resolve) => {
    sawClose = resolve;
  });
  const item = `"${'x'.repeat(1022)}",`;
  const server = createServer((request, response) => {
    urls.push(request.url ?? '');
    response.writeHead(200, { 'content-type': 'application/json' });
    response.on('close', () => sawClose(!response.writableFinished));
    response.write(`{"${key}":[`);
    const more = () => {
      while (written < upTo) {
        written += item.length;
        if (!response.write(item)) return void response.once('drain', more);
      }
      response.end('"x"]}');
    };
    more();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    urls: () => [...urls],
    written: () => written,
    closed,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

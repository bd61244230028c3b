import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** HTTP servers on port 0 that answer each request, once read, as a test says; closed together. */
export interface AnsweringServers {
  /** A server answering every request with `answer`: its base URL. */
  serve(answer: (req: IncomingMessage, res: ServerResponse) => void): Promise<string>;
  /** Closes every server served so far, their open connections too. */
  close(): void;
}

export function answeringServers(): AnsweringServers {
  const servers: Server[] = [];
  return {
    async serve(answer) {
      const server = createServer((req, res) => {
        req.resume();
        req.on('end', () => answer(req, res));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      servers.push(server);
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    },
    close() {
      for (const server of servers.splice(0)) {
        server.closeAllConnections();
        server.close();
      }
    },
  };
}

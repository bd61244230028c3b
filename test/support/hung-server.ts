import { type AddressInfo, createServer, type Socket } from 'node:net';

/** A TCP server that accepts connections and never answers: an AWS endpoint that hangs. */
export interface HungServer {
  readonly endpoint: string;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

export async function startHungServer(): Promise<HungServer> {
  const sockets = new Set<Socket>();
  let accepted = 0;
  const server = createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    connections: () => accepted,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

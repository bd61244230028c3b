import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One SQS call as the proxy saw it (AWS JSON 1.0: `x-amz-target: AmazonSQS.<Action>`). */
export interface SqsCall {
  readonly action: string;
  readonly request: Record<string, unknown>;
  /** The emulator's answer; undefined when the call was held and never forwarded. */
  readonly status?: number;
  readonly response?: Record<string, unknown>;
}

/**
 * What to do with a call. `forward` passes it on; `drop-before` never lets it reach the emulator;
 * `drop-after` lets the emulator carry it out but the caller never gets the answer. With a drop,
 * `meanwhile` runs (to kill the caller) before the connection is cut.
 */
export type Verdict =
  | { readonly kind: 'forward' }
  | { readonly kind: 'drop-before' | 'drop-after'; readonly meanwhile: () => Promise<void> | void };

export type Decide = (action: string, request: Record<string, unknown>) => Verdict;

export interface SqsProxy {
  readonly endpoint: string;
  /** Every call that got an answer from the emulator or was dropped, in arrival order. */
  readonly calls: SqsCall[];
  /** Sets what decides each call's fate (every call is forwarded until then). */
  decideWith(decide: Decide): void;
  close(): Promise<void>;
}

async function bodyOf(stream: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function parse(raw: Buffer): Record<string, unknown> {
  try {
    return JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
  } catch {
    return {};
  }
}

/**
 * An HTTP proxy in front of an SQS emulator that can stop a client at an exact point of its
 * conversation: a test kills the client process while a given call is held, before or after the
 * emulator carried it out. Nothing is simulated: the calls that pass are the emulator's.
 */
export async function startSqsProxy(upstream: string): Promise<SqsProxy> {
  const target = new URL(upstream);
  const calls: SqsCall[] = [];
  let decide: Decide = () => ({ kind: 'forward' });

  const forward = async (
    req: IncomingMessage,
    raw: Buffer,
  ): Promise<{ status: number; headers: IncomingMessage['headers']; body: Buffer }> =>
    new Promise((resolve, reject) => {
      const out = httpRequest(
        {
          host: target.hostname,
          port: target.port,
          method: req.method,
          path: req.url,
          headers: { ...req.headers, host: target.host },
        },
        (res) => {
          bodyOf(res).then(
            (body) => resolve({ status: res.statusCode ?? 502, headers: res.headers, body }),
            reject,
          );
        },
      );
      out.on('error', reject);
      out.end(raw);
    });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const raw = await bodyOf(req);
    const action = String(req.headers['x-amz-target'] ?? '').replace(/^AmazonSQS\./, '');
    const request = parse(raw);
    const verdict = decide(action, request);
    if (verdict.kind === 'drop-before') {
      calls.push({ action, request });
      await verdict.meanwhile();
      res.destroy();
      return;
    }
    const answer = await forward(req, raw);
    calls.push({ action, request, status: answer.status, response: parse(answer.body) });
    if (verdict.kind === 'drop-after') {
      await verdict.meanwhile();
      res.destroy();
      return;
    }
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    calls,
    decideWith(next) {
      decide = next;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleEntryAs } from '../../infra/bundle-report.ts';
import { DEFAULT_SEED, type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import {
  MAX_ANSWER_BYTES,
  nodeHttpFetch,
  nodeHttpTransport,
} from '../../shared/adapters/node-http-transport.ts';
import { AffiliateClient } from '../../shared/affiliate/client.ts';
import { TransientError } from '../../shared/errors.ts';
import type { HttpAnswer } from '../../shared/ports.ts';
import { LOAD_PRELUDE, lambdaLoad } from '../bench/lambda-process.ts';
import { startHungServer } from '../support/hung-server.ts';

/**
 * The platform clients' transport (shared/adapters/node-http-transport.ts): node:http(s) instead of
 * Node's fetch, against a real server on port 0.
 */

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

type Answer = (req: IncomingMessage, res: ServerResponse, body: string) => void;

let server: Server;
let base: string;
const seen: Seen[] = [];
let answer: Answer = (_req, res) => res.end();

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      answer(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function answering(next: Answer): void {
  seen.length = 0;
  answer = next;
}

/** A GET of `path` through the transport, with a timeout no test here reaches. */
function get(path: string, headers: Record<string, string> = {}): Promise<HttpAnswer> {
  return nodeHttpFetch(new URL(path, base), { method: 'GET', headers, signal: AbortSignal.timeout(5000) });
}

describe('nodeHttpFetch', () => {
  it('sends the method, headers and UTF-8 body with its byte length, and reads status, headers and text', async () => {
    // Prepare: an answer with non-ASCII text and a vendor header
    answering((_req, res) => {
      res.writeHead(201, {
        'content-type': 'application/json; charset=utf-8',
        'X-Vendor-RateLimit-Route-Second-Remaining': '42',
      });
      res.end(JSON.stringify({ name: 'Café — 5 €' }));
    });
    const body = JSON.stringify({ note: 'Größe 42 · 😀' });

    // Act
    const response = await nodeHttpFetch(new URL(`${base}/advertiser/conversions.add?x=1`), {
      method: 'POST',
      headers: { authorization: 'Bearer t0k3n', 'content-type': 'application/json' },
      body,
      signal: AbortSignal.timeout(5000),
    });
    const text = await response.text();

    // Assess: what the server saw, and what the caller reads
    expect(seen).toEqual([
      expect.objectContaining({
        method: 'POST',
        url: '/advertiser/conversions.add?x=1',
        body,
        headers: expect.objectContaining({
          authorization: 'Bearer t0k3n',
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(body)),
        }),
      }),
    ]);
    expect(response.status).toBe(201);
    expect(JSON.parse(text)).toEqual({ name: 'Café — 5 €' });
    expect(response.headers.get('X-VENDOR-RATELIMIT-ROUTE-SECOND-REMAINING')).toBe('42');
    expect(response.headers.get('retry-after')).toBeNull();
    // Iterated as fetch's Headers are: lower-case names, in order
    const names = [...response.headers].map(([name]) => name);
    expect(names).toContain('x-vendor-ratelimit-route-second-remaining');
    expect(names).toEqual([...names].sort());
  });

  it('sends a GET without a body and reads an empty answer', async () => {
    // Prepare
    answering((_req, res) => {
      res.writeHead(204);
      res.end();
    });

    // Act
    const response = await get('/advertiser/info', { accept: 'application/json' });

    // Assess
    expect(response.status).toBe(204);
    expect(await response.text()).toBe('');
    expect(seen[0]?.headers['content-length']).toBeUndefined();
    expect(seen[0]?.headers['transfer-encoding']).toBeUndefined();
  });

  it('strips a byte order mark from the text, as fetch does', async () => {
    // Prepare
    answering((_req, res) => res.end('\uFEFF{"ok":true}'));

    // Act
    const response = await get('/');

    // Assess
    expect(JSON.parse(await response.text())).toEqual({ ok: true });
  });

  it('answers a redirect as it came: the credentials never follow it to another host', async () => {
    // Prepare
    answering((_req, res) => {
      res.writeHead(302, { location: `${base}/elsewhere` });
      res.end();
    });

    // Act
    const response = await get('/advertiser/info', { authorization: 'Bearer t0k3n' });

    // Assess
    expect(response.status).toBe(302);
    expect(response.headers.get('location')).toBe(`${base}/elsewhere`);
    expect(seen.map((s) => s.url)).toEqual(['/advertiser/info']);
  });

  it('gives up when the signal aborts before an answer comes', async () => {
    // Prepare: a server that accepts and never answers
    const hung = await startHungServer();
    const signal = AbortSignal.timeout(50);

    try {
      // Act
      const sent = nodeHttpFetch(new URL(hung.endpoint), {
        method: 'POST',
        headers: {},
        body: '{}',
        signal,
      });

      // Assess
      await expect(sent).rejects.toThrow();
      expect(signal.aborted).toBe(true);
      expect(hung.connections()).toBe(1);
    } finally {
      await hung.close();
    }
  });

  it('gives up when the signal aborts while the body is still coming', async () => {
    // Prepare: the status and half the body, then nothing
    answering((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"half":');
    });
    const signal = AbortSignal.timeout(100);

    // Act
    const response = await nodeHttpFetch(new URL(base), { method: 'GET', headers: {}, signal });

    // Assess
    expect(response.status).toBe(200);
    await expect(response.text()).rejects.toThrow();
    expect(signal.aborted).toBe(true);
  });

  it('stops reading an answer that passes its cap and fails naming the cap, however the server streams it', async () => {
    // Prepare: a body without a length, 64 KiB at a time, until the client goes or 4 MiB are out
    let written = 0;
    let serverSawClose: (closedEarly: boolean) => void = () => undefined;
    const closed = new Promise<boolean>((resolve) => {
      serverSawClose = resolve;
    });
    answering((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const more = () => {
        while (written < 4 * 1024 * 1024) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      res.on('close', () => serverSawClose(!res.writableFinished));
      more();
    });
    const capped = nodeHttpTransport({ maxAnswerBytes: 256 * 1024 });

    // Act
    const response = await capped(new URL(base), {
      method: 'GET',
      headers: {},
      signal: AbortSignal.timeout(5000),
    });

    // Assess
    expect(response.status).toBe(200);
    await expect(response.text()).rejects.toThrow('the answer passed 256 KiB, the most this client reads');
    expect(await closed).toBe(true);
    expect(written).toBeLessThan(4 * 1024 * 1024);
  });

  it('refuses at once an answer whose declared length passes its cap', async () => {
    // Prepare
    answering((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(2 * 1024 * 1024) });
      res.write('{');
    });
    const capped = nodeHttpTransport({ maxAnswerBytes: 1024 * 1024 });

    // Act
    const response = await capped(new URL(base), {
      method: 'GET',
      headers: {},
      signal: AbortSignal.timeout(5000),
    });

    // Assess: no waiting for the two megabytes that will not come
    await expect(response.text()).rejects.toThrow('the answer passed 1 MiB, the most this client reads');
  });

  it('reads an answer of its cap whole (16 MiB by default: a page of 1,000 conversions at 16 KiB each)', async () => {
    // Prepare
    expect(MAX_ANSWER_BYTES).toBe(16 * 1024 * 1024);
    const text = 'x'.repeat(64 * 1024);
    answering((_req, res) => res.end(text));
    const capped = nodeHttpTransport({ maxAnswerBytes: text.length });

    // Act
    const response = await capped(new URL(base), {
      method: 'GET',
      headers: {},
      signal: AbortSignal.timeout(5000),
    });

    // Assess
    expect(await response.text()).toBe(text);
  });

  it('gives the client a failure naming the cap: an add is not sent again blind, a lookup is tried again', async () => {
    // Prepare: a platform that answers every call with 8 KiB, a client that reads 4 KiB at most
    answering((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'abcdefabcdefabcdefabcdef', padding: 'x'.repeat(8 * 1024) }));
    });
    const client = new AffiliateClient({
      baseUrl: base,
      token: 't0k3n',
      maxAttempts: 2,
      baseDelayMs: 1,
      maxDelayMs: 2,
      fetch: nodeHttpTransport({ maxAnswerBytes: 4 * 1024 }),
    });
    const add = {
      kind: 'tracking' as const,
      program: DEFAULT_SEED.programs[0] ?? '',
      rule: DEFAULT_SEED.rules[0] ?? '',
      externalId: 'capped-1',
      amount: 4990,
      currency: 'EUR' as const,
      cids: ['c1c1c1c1c1c1c1c1c1c1c1c1'],
      ip: '203.0.113.7',
    };

    // Act
    const adding = client.addConversion(add);
    await expect(adding).rejects.toThrow(/the answer passed 4 KiB, the most this client reads.*not retried/);
    const addsSent = seen.length;
    const looking = client.conversionInfo({ program: add.program, externalId: 'capped-1' });

    // Assess: the add went once and is marked ambiguous; the lookup was tried again, then gave up.
    await expect(adding).rejects.toMatchObject({ ambiguous: true });
    expect(addsSent).toBe(1);
    await expect(looking).rejects.toBeInstanceOf(TransientError);
    await expect(looking).rejects.toThrow('the answer passed 4 KiB');
    expect(seen.length - addsSent).toBe(2);
  });

  it('fails with the system error code when nothing listens, so the caller knows nothing was sent', async () => {
    // Prepare: a port that was free a moment ago
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise<void>((resolve) => probe.close(() => resolve()));

    // Act
    const sent = nodeHttpFetch(new URL(`http://127.0.0.1:${port}/`), {
      method: 'POST',
      headers: {},
      body: '{}',
      signal: AbortSignal.timeout(5000),
    });

    // Assess
    await expect(sent).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});

describe('nodeHttpFetch over https', () => {
  const tls = (name: string) => fileURLToPath(new URL(`../fixtures/tls/${name}`, import.meta.url));
  let secure: HttpsServer;
  let url: string;
  beforeAll(async () => {
    secure = createHttpsServer(
      { cert: readFileSync(tls('localhost-cert.pem')), key: readFileSync(tls('localhost-key.pem')) },
      (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"over":"tls"}');
      },
    );
    await new Promise<void>((resolve) => secure.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(secure.address() as AddressInfo).port}/advertiser/info`;
  });
  afterAll(async () => {
    secure.closeAllConnections();
    await new Promise<void>((resolve) => secure.close(() => resolve()));
  });

  /** One call of the transport from a fresh process; what it read, or the code it failed with. */
  async function callFrom(
    env: Record<string, string>,
  ): Promise<{ status?: number; text?: string; code?: string }> {
    const transport = pathToFileURL(
      fileURLToPath(new URL('../../shared/adapters/node-http-transport.ts', import.meta.url)),
    ).href;
    const script = `import { nodeHttpFetch } from ${JSON.stringify(transport)};
try {
  const answer = await nodeHttpFetch(new URL(process.env.URL), { method: 'GET', headers: {}, signal: AbortSignal.timeout(5000) });
  process.stdout.write(JSON.stringify({ status: answer.status, text: await answer.text() }));
} catch (error) {
  process.stdout.write(JSON.stringify({ code: error.code }));
}`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      env: { PATH: process.env['PATH'] ?? '', URL: url, ...env },
    });
    return JSON.parse(stdout) as { status?: number; text?: string; code?: string };
  }

  it('sends an https URL over TLS to a server whose certificate it trusts', async () => {
    // Act: the test's certificate authority trusted, as a platform's public one is
    const result = await callFrom({ NODE_EXTRA_CA_CERTS: tls('localhost-cert.pem') });

    // Assess
    expect(result).toEqual({ status: 200, text: '{"over":"tls"}' });
  });

  it('refuses a server whose certificate it does not trust: the token never reaches it', async () => {
    // Act: the same server, its certificate unknown to the process
    const result = await callFrom({});

    // Assess
    expect(result).toEqual({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
  });
});

describe('the affiliate client as the worker bundles it, on its default transport', () => {
  let sandbox: RunningSandbox;
  let dir: string;
  let bundle: string;
  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0 });
    dir = mkdtempSync(join(tmpdir(), 'node-http-transport-'));
    bundle = join(dir, 'client.js');
    // The worker's esbuild settings: CommonJS, whose require of node:http reads none of its lazy
    // exports (an ES module import of it reads them all, and its WebSocket getter loads undici).
    await bundleEntryAs(
      'worker',
      fileURLToPath(new URL('../../shared/affiliate/client.ts', import.meta.url)),
      bundle,
    );
  });
  afterAll(async () => {
    await sandbox.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("adds a conversion without loading Node's fetch (undici: slower at a container's first call, and over three times the CPU per call)", async () => {
    // Prepare: a fresh Node process, as a worker container is, loading the bundle as Lambda does
    const script = `${LOAD_PRELUDE} const { AffiliateClient } = ${lambdaLoad(bundle)};
const client = new AffiliateClient({ baseUrl: process.env.BASE_URL, token: process.env.TOKEN });
await client.addConversion({ kind: 'tracking', program: process.env.PROGRAM, rule: process.env.RULE,
  externalId: 'transport-1', amount: 4990, currency: 'EUR', cids: ['c1c1c1c1c1c1c1c1c1c1c1c1'], ip: '203.0.113.7' });
const found = await client.conversionInfo({ program: process.env.PROGRAM, externalId: 'transport-1' });
process.stdout.write(JSON.stringify({ found: found?.amount,
  undici: process.moduleLoadList.filter((m) => m.includes('undici')) }));`;

    // Act
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      env: {
        PATH: process.env['PATH'] ?? '',
        BASE_URL: sandbox.url,
        TOKEN: sandbox.token,
        PROGRAM: DEFAULT_SEED.programs[0],
        RULE: DEFAULT_SEED.rules[0],
      },
    });

    // Assess: the add reached the platform, and Node's fetch was never loaded
    const result = JSON.parse(stdout) as { found?: number; undici: string[] };
    expect(result.found).toBe(4990);
    expect(result.undici).toEqual([]);
  });
});

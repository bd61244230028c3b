import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describeError } from '../shared/errors.ts';
import { CONTROL_ROUTES, createControl, type InternalControl } from './control.ts';
import { FaultInjector } from './faults.ts';
import { HttpError, parseJsonBody, parseQuery, readBody, reasonOf, sendJson, sleep } from './http.ts';
import { resolveSeed } from './ids.ts';
import { LEGACY_API_ROUTES } from './legacy-routes.ts';
import { parseFaultSettings, resolveSettings } from './options.ts';
import { ForeignConsumer, RateLimiter, rateLimitHeaders } from './rate-limit.ts';
import {
  type ApiRoute,
  type AuthScheme,
  basicChecker,
  bearerChecker,
  CURRENT_API_ROUTES,
  matchRoute,
} from './routes.ts';
import { createShopFakes, DEFAULT_SHOP_FAKE_CREDENTIALS, type ShopFakes } from './shops/server.ts';
import { SandboxStore } from './store.ts';
import type { CallCount, RunningSandbox, SandboxOptions } from './types.ts';
import type { SandboxWorld } from './world.ts';

export { DEFAULT_SEED } from './ids.ts';
export type {
  CallCount,
  FaultSettings,
  RunningSandbox,
  SandboxControl,
  SandboxOptions,
  SeedIds,
  StoredCommissionAdjustment,
  StoredConversion,
} from './types.ts';

/** Every API route the sandbox serves: the current API and the legacy 2.0 routes. */
const API_ROUTES: readonly ApiRoute[] = [...CURRENT_API_ROUTES, ...LEGACY_API_ROUTES];

/** The route paths `faults.routes` may name, wherever faults are set (options, env, control route). */
export const API_ROUTE_PATHS: readonly string[] = [...new Set(API_ROUTES.map((r) => r.path))];

/**
 * Starts the local sandbox of the affiliate platform's current API, and of its legacy 2.0 routes
 * (`/2.0/…`, HTTP Basic), on `host:port` (port 0 = any free port). Rejects when an option is invalid (the message names it) or the port cannot be bound.
 */
export async function startSandbox(options: SandboxOptions = {}): Promise<RunningSandbox> {
  const settings = resolveSettings(options);
  const seed = resolveSeed(options.seed);
  const world: SandboxWorld = {
    store: new SandboxStore(options.persistPath),
    seed,
    settings,
    now: options.now ?? Date.now,
  };
  const startFaults = parseFaultSettings(options.faults ?? {}, API_ROUTE_PATHS);
  const faults = new FaultInjector();
  faults.set(startFaults);
  const limiter = new RateLimiter();
  const foreign = new ForeignConsumer();
  const calls = new Map<string, CallCount>();
  // Aborted on close: wakes latency sleeps and hung requests so nothing outlives the server.
  const closing = new AbortController();
  const lateWrites = new LateWrites(world.now, closing.signal);
  const control = settlingFirst(
    lateWrites,
    createControl({
      world,
      faults,
      limiter,
      foreign,
      calls,
      startFaults,
      startSettings: { ...settings },
      apiRoutePaths: () => API_ROUTE_PATHS,
    }),
  );
  const authCheckers: Record<AuthScheme, (headers: IncomingHttpHeaders) => boolean> = {
    bearer: bearerChecker(settings.token),
    basic: basicChecker(settings.legacyUserCode, settings.legacyApiKey),
  };

  const shopCredentials = { ...DEFAULT_SHOP_FAKE_CREDENTIALS, ...options.shops };
  const shops = createShopFakes({ credentials: shopCredentials, now: world.now });

  const pipeline: Pipeline = {
    shops,
    world,
    faults,
    limiter,
    foreign,
    calls,
    control,
    authCheckers,
    closing: closing.signal,
    lateWrites,
  };
  const server = createServer((req, res) => {
    handle(pipeline, API_ROUTES, req, res).catch((error: unknown) => {
      console.error(`sandbox: unexpected failure on ${req.method} ${req.url}: ${describeError(error)}`);
      sendJson(res, 500, { statusCode: 500, error: reasonOf(500), message: 'unexpected sandbox failure' });
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  let closed: Promise<void> | undefined;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    token: settings.token,
    legacy: { userCode: settings.legacyUserCode, apiKey: settings.legacyApiKey },
    seed: structuredClone(seed),
    control,
    shops: {
      urls: {
        shopify: `http://${host}:${address.port}/shopify`,
        woocommerce: `http://${host}:${address.port}/woocommerce`,
        stripe: `http://${host}:${address.port}/stripe`,
      },
      credentials: shopCredentials,
      control: shops.control,
    },
    close() {
      closed ??= new Promise<void>((resolve) => {
        closing.abort();
        server.close(() => resolve());
        // Keep-alive and hung sockets would otherwise hold close() open until they time out.
        server.closeAllConnections();
      });
      return closed;
    },
  };
}

interface Pipeline {
  shops: ShopFakes;
  world: SandboxWorld;
  faults: FaultInjector;
  limiter: RateLimiter;
  foreign: ForeignConsumer;
  calls: Map<string, CallCount>;
  control: InternalControl;
  authCheckers: Record<AuthScheme, (headers: IncomingHttpHeaders) => boolean>;
  closing: AbortSignal;
  lateWrites: LateWrites;
}

async function handle(
  p: Pipeline,
  apiRoutes: readonly ApiRoute[],
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://sandbox');
  const method = req.method ?? 'GET';
  p.lateWrites.applyDue();
  if (await p.shops.handleControl(req, res, url)) return;
  if (url.pathname.startsWith('/_sandbox/')) return handleControl(p, method, url, req, res);
  if (await p.shops.handleApi(req, res, url)) return;

  const match = matchRoute(apiRoutes, method, url.pathname);
  if (match.kind !== 'found') {
    req.resume();
    if (match.kind === 'method') {
      const message = `${method} is not allowed on ${url.pathname} (allowed: ${match.allowed.join(', ')})`;
      sendJson(res, 405, errorBody(405, message), { allow: match.allowed.join(', ') });
    } else {
      sendJson(res, 404, errorBody(404, `no route ${method} ${url.pathname}`));
    }
    return;
  }
  const { route, params } = match;
  const rawBody = await readBody(req).catch((error: unknown) => error);
  const count = (status: number | 'hang') => countCall(p.calls, route.path, status);

  // Counted before anything else: auth failures, faults and invalid requests all use up the window.
  const { settings } = p.world;
  const now = p.world.now();
  p.foreign.catchUp(
    p.limiter,
    route.path,
    `${route.path}\nBearer ${settings.token}`,
    now,
    settings.ratePerSecond,
  );
  const decision = p.limiter.hit(
    `${route.path}\n${req.headers.authorization ?? ''}`,
    now,
    settings.ratePerSecond,
  );
  const rateHeaders = rateLimitHeaders(settings.vendor, decision, false);
  const respond = (status: number, body: unknown, headers: Record<string, string> = rateHeaders) => {
    count(status);
    sendJson(res, status, body, headers);
  };

  if (!decision.allowed) {
    const message = `rate limit of ${decision.limit} requests per second on ${route.path} exceeded`;
    return respond(429, errorBody(429, message), rateLimitHeaders(settings.vendor, decision, true));
  }
  if (!p.authCheckers[route.auth](req.headers)) {
    if (route.auth === 'basic') {
      const message = 'missing or wrong credentials: send Authorization: Basic base64(<user_code>:<api_key>)';
      return respond(401, errorBody(401, message), {
        ...rateHeaders,
        'www-authenticate': 'Basic realm="2.0"',
      });
    }
    return respond(401, errorBody(401, 'missing or wrong token: send Authorization: Bearer <token>'));
  }

  const fault = p.faults.decide(route.path);
  await sleep(fault.delayMs, p.closing);
  if (fault.kind === 'burst') {
    // A 429 means the window is spent: the platform never answers one with requests remaining.
    const spent = { ...decision, consumed: decision.limit, remaining: 0 };
    const headers = rateLimitHeaders(settings.vendor, spent, true, fault.retryAfterMs);
    return respond(
      429,
      errorBody(429, `rate limit exceeded on ${route.path} (sandbox forced burst)`),
      headers,
    );
  }
  if (fault.kind === 'hang') {
    count('hang');
    return hang(res, fault.hangMs, p.closing);
  }
  if (fault.kind === 'late') {
    count('hang');
    // Due on the sandbox's clock, counted from the request's arrival (the latency sleep came after).
    p.lateWrites.schedule(
      now + fault.lateMs,
      (world) => {
        if (rawBody instanceof Error) return;
        const body = route.body ? parseJsonBody(rawBody as string) : undefined;
        route.handle({ query: parseQuery(url.searchParams), body, params }, world);
      },
      p.world,
    );
    return hang(res, fault.hangMs, p.closing);
  }
  if (fault.kind === 'error') {
    return respond(
      fault.status,
      errorBody(fault.status, `injected fault on ${route.path} (sandbox errorRate)`),
    );
  }

  try {
    if (rawBody instanceof Error) throw rawBody;
    const body = route.body ? parseJsonBody(rawBody as string) : undefined;
    // Again: the clock may have moved while the body was read and the latency slept.
    p.lateWrites.applyDue();
    const answer = route.handle({ query: parseQuery(url.searchParams), body, params }, p.world);
    respond(200, answer);
  } catch (error) {
    if (!(error instanceof HttpError)) throw error;
    respond(error.status, error.body(), { ...rateHeaders, ...error.headers });
  }
}

async function handleControl(
  p: Pipeline,
  method: string,
  url: URL,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const match = matchRoute(CONTROL_ROUTES, method, url.pathname);
  if (match.kind !== 'found') {
    req.resume();
    if (match.kind === 'method') {
      const message = `${method} is not allowed on ${url.pathname} (allowed: ${match.allowed.join(', ')})`;
      sendJson(res, 405, errorBody(405, message), { allow: match.allowed.join(', ') });
    } else {
      sendJson(res, 404, errorBody(404, `no control route ${method} ${url.pathname}`));
    }
    return;
  }
  try {
    const raw = await readBody(req);
    const body = match.route.body ? parseJsonBody(raw) : undefined;
    const answer = match.route.handle(
      { query: parseQuery(url.searchParams), body, params: match.params },
      p.control,
    );
    sendJson(res, answer.status, answer.body);
  } catch (error) {
    if (!(error instanceof HttpError)) throw error;
    sendJson(res, error.status, error.body());
  }
}

/** Shortest wait before a late write not yet due is checked again. */
const RECHECK_MS = 25;

interface LateWrite {
  dueAt: number;
  seq: number;
  work: () => void;
}

/**
 * Requests carried out later, whatever became of their connection, on the sandbox's own clock
 * (`SandboxWorld.now`): a write is applied once that clock reaches its due time, before anything
 * (API call, control route, in-process control) reads the state, and by a real timer for a sandbox
 * nobody asks. So an injected clock moved on by minutes makes a write minutes late land at once.
 * Dropped when the server closes.
 */
class LateWrites {
  private pending: LateWrite[] = [];
  private seq = 0;
  private readonly timers = new Set<NodeJS.Timeout>();

  private readonly now: () => number;
  private readonly closing: AbortSignal;

  constructor(now: () => number, closing: AbortSignal) {
    this.now = now;
    this.closing = closing;
    closing.addEventListener('abort', () => {
      for (const timer of this.timers) clearTimeout(timer);
      this.timers.clear();
      this.pending = [];
    });
  }

  /** Runs `work` against the world with its clock at `dueAt`, so what it records is dated then. */
  schedule(dueAt: number, work: (world: SandboxWorld) => void, world: SandboxWorld): void {
    if (this.closing.aborted) return;
    this.pending.push({ dueAt, seq: this.seq++, work: () => work({ ...world, now: () => dueAt }) });
    this.arm(dueAt);
  }

  /** Applies, in due order, every write whose time has come. */
  applyDue(): void {
    const now = this.now();
    const due = this.pending.filter((w) => w.dueAt <= now);
    if (due.length === 0) return;
    this.pending = this.pending.filter((w) => w.dueAt > now);
    due.sort((a, b) => a.dueAt - b.dueAt || a.seq - b.seq);
    for (const write of due) {
      try {
        write.work();
      } catch {
        // A late write the platform refuses (an HttpError) leaves nothing behind, as a refusal would.
      }
    }
  }

  private arm(dueAt: number, minMs = 1): void {
    const timer = setTimeout(
      () => {
        this.timers.delete(timer);
        this.applyDue();
        // A real timer may fire a hair before the clock says so; an injected clock may stay short of
        // the due time for good, so the check is not repeated more often than every RECHECK_MS.
        if (this.pending.some((w) => w.dueAt === dueAt)) this.arm(dueAt, RECHECK_MS);
      },
      Math.max(minMs, dueAt - this.now()),
    );
    this.timers.add(timer);
  }
}

/** The control with due late writes applied before each call, as the HTTP routes do. */
function settlingFirst(lateWrites: LateWrites, control: InternalControl): InternalControl {
  const settled = {} as Record<string, unknown>;
  for (const [name, member] of Object.entries(control)) {
    settled[name] =
      typeof member === 'function'
        ? (...args: unknown[]) => {
            lateWrites.applyDue();
            return member.apply(control, args);
          }
        : member;
  }
  return settled as unknown as InternalControl;
}

/** Holds the socket without answering until the client gives up, `hangMs` passes or the server closes. */
async function hang(res: ServerResponse, hangMs: number, closing: AbortSignal): Promise<void> {
  const gaveUp = new AbortController();
  const onClose = () => gaveUp.abort();
  res.once('close', onClose);
  await sleep(hangMs, AbortSignal.any([gaveUp.signal, closing]));
  res.off('close', onClose);
  // Never answered: the connection is dropped, as a stuck upstream behind a proxy would.
  res.socket?.destroy();
}

function countCall(calls: Map<string, CallCount>, path: string, status: number | 'hang'): void {
  let entry = calls.get(path);
  if (!entry) {
    entry = { total: 0, byStatus: {} };
    calls.set(path, entry);
  }
  entry.total += 1;
  const key = String(status);
  entry.byStatus[key] = (entry.byStatus[key] ?? 0) + 1;
}

function errorBody(status: number, message: string) {
  return new HttpError(status, message).body();
}

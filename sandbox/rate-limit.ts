/** One request's standing in its rate window. */
export interface RateDecision {
  allowed: boolean;
  limit: number;
  /** Requests used in the window, capped at the limit. */
  consumed: number;
  remaining: number;
  /** Milliseconds until the window frees; 0 while allowed. */
  retryAfterMs: number;
}

const WINDOW_MS = 1000;

interface Window {
  startedAt: number;
  count: number;
}

/**
 * Fixed one-second windows per key (route + credential). A window opens with the first request after
 * the previous one expired, so a burst that fits in a second is judged as a whole, as the platform's
 * "100 requests per second per route" reads.
 */
export class RateLimiter {
  private readonly windows = new Map<string, Window>();

  /** Counts one request for `key` at time `now` and says whether it is within `limit`. */
  hit(key: string, now: number, limit: number): RateDecision {
    let window = this.windows.get(key);
    if (!window || now >= window.startedAt + WINDOW_MS || now < window.startedAt) {
      if (this.windows.size > 10_000) this.prune(now);
      window = { startedAt: now, count: 0 };
      this.windows.set(key, window);
    }
    window.count += 1;
    const allowed = window.count <= limit;
    const consumed = Math.min(window.count, limit);
    return {
      allowed,
      limit,
      consumed,
      remaining: limit - consumed,
      retryAfterMs: allowed ? 0 : window.startedAt + WINDOW_MS - now,
    };
  }

  clear(): void {
    this.windows.clear();
  }

  // Random wrong tokens each open a window; drop the expired ones so memory stays bounded.
  private prune(now: number): void {
    for (const [key, window] of this.windows) {
      if (now >= window.startedAt + WINDOW_MS) this.windows.delete(key);
    }
  }
}

/** Another client of the same token using part of one route's budget. */
export interface ForeignLoad {
  /** API path, e.g. `/advertiser/conversions.add`. */
  readonly route: string;
  /** Requests per second, spread evenly; 0 stops it. */
  readonly perSecond: number;
}

/**
 * A foreign consumer (the shop's own plugin, a finance script) sending `perSecond` requests on one
 * route with the sandbox's token. Its requests are replayed into the limiter, at the times they
 * would have arrived, just before each request of that route is counted: deterministic under a
 * frozen clock, and no timer to outlive the server.
 */
export class ForeignConsumer {
  private load: ForeignLoad | undefined;
  private startedAt = 0;
  private sent = 0;

  set(load: ForeignLoad, now: number): void {
    this.load = load.perSecond > 0 ? load : undefined;
    this.startedAt = now;
    this.sent = 0;
  }

  get(): ForeignLoad | null {
    return this.load ?? null;
  }

  /** Counts in `limiter`, under `key`, the foreign requests on `route` sent up to `now`. */
  catchUp(limiter: RateLimiter, route: string, key: string, now: number, limit: number): void {
    const load = this.load;
    if (load === undefined || load.route !== route) return;
    const at = (n: number) => this.startedAt + (n * 1000) / load.perSecond;
    // After a long idle spell only the current window matters.
    while (at(this.sent) < now - WINDOW_MS) this.sent += 1;
    while (at(this.sent) <= now) {
      limiter.hit(key, at(this.sent), limit);
      this.sent += 1;
    }
  }
}

/**
 * The five `x-<vendor>-ratelimit-route-second-*` headers, plus the standard `Retry-After` (whole
 * seconds, rounded up) on a 429. `retryAfterMs` overrides the window's own (forced bursts).
 */
export function rateLimitHeaders(
  vendor: string,
  decision: RateDecision,
  limited: boolean,
  retryAfterMs = decision.retryAfterMs,
): Record<string, string> {
  const prefix = `x-${vendor}-ratelimit-route-second`;
  const headers: Record<string, string> = {
    [`${prefix}-limit`]: String(decision.limit),
    [`${prefix}-reset`]: String(WINDOW_MS / 1000),
    [`${prefix}-remaining`]: String(decision.remaining),
    [`${prefix}-consumed`]: String(decision.consumed),
    [`${prefix}-retry-after`]: limited ? (retryAfterMs / 1000).toFixed(3) : '0',
  };
  if (limited) headers['retry-after'] = String(Math.ceil(retryAfterMs / 1000));
  return headers;
}

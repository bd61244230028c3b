import { TransientError } from '../errors.ts';
import { sleep as realSleep, type Sleep } from './retry.ts';

export interface RateLimiterOptions {
  /**
   * Requests per second and key (one key per route). `Infinity` turns limiting off.
   * @default 100, the platform's documented limit per route per token
   */
  readonly ratePerSecond?: number;
  /** @default Date.now */
  readonly now?: () => number;
  readonly sleep?: Sleep;
}

export interface AcquireOptions {
  /** Epoch ms: a wait that would end at or after it is not begun (TransientError instead). */
  readonly deadline?: number;
  readonly signal?: AbortSignal;
}

/** Leave to send one request. Call `release` once its answer is read (or it failed). */
export interface Permit {
  /** How long the caller waited for it. */
  readonly waitedMs: number;
  release(): void;
}

interface KeyState {
  inFlight: number;
  /** Completion times of requests within the last window, oldest first. */
  finished: number[];
  /** Nothing is admitted before this time (the platform answered 429 with a retry-after). */
  heldUntil: number;
  /** FIFO: each caller waits for the one before it to be admitted. */
  queue: Promise<void>;
  /** Resolved when a request completes, for callers waiting while every slot is in flight. */
  completed: { promise: Promise<void>; resolve: () => void };
}

/**
 * Client-side rate limiter per key: callers wait for a slot, they never fail for the rate itself.
 *
 * It admits a request while fewer than `limit` requests are in flight or completed within the last
 * window. Counting a request until its answer has come back (not just from when it was sent) is
 * what keeps a burst under a server that counts arrivals in fixed windows of its own: the server saw
 * each request between its send and its answer, so any server window holds at most `limit` of
 * them whatever the network latency or the server's window alignment. A plain token bucket lets up
 * to twice the rate through across a window boundary and gets 429s on every burst.
 */
export class RateLimiter {
  readonly limit: number;
  readonly windowMs: number;
  private readonly now: () => number;
  private readonly sleep: Sleep;
  private readonly keys = new Map<string, KeyState>();

  constructor(options: RateLimiterOptions = {}) {
    const rate = options.ratePerSecond ?? 100;
    if (!(rate > 0)) throw new RangeError(`ratePerSecond must be a positive number, got ${rate}`);
    // A fractional rate (0.5/s, 2.5/s) becomes whole requests over a longer window.
    this.limit = rate === Number.POSITIVE_INFINITY ? rate : Math.max(1, Math.floor(rate));
    this.windowMs = rate === Number.POSITIVE_INFINITY ? 0 : (1000 * this.limit) / rate;
    this.now = options.now ?? Date.now;
    this.sleep = options.sleep ?? realSleep;
  }

  /** Waits until a request on `key` may be sent. Throws the signal's reason on abort. */
  async acquire(key: string, options: AcquireOptions = {}): Promise<Permit> {
    if (this.limit === Number.POSITIVE_INFINITY) return { waitedMs: 0, release: () => {} };
    const state = this.state(key);
    const start = this.now();
    const previous = state.queue;
    let admitted!: () => void;
    state.queue = new Promise((resolve) => {
      admitted = resolve;
    });
    try {
      await untilAborted(previous, options.signal);
      await this.waitForSlot(key, state, options);
    } finally {
      admitted();
    }
    state.inFlight += 1;
    let released = false;
    return {
      waitedMs: this.now() - start,
      release: () => {
        if (released) return;
        released = true;
        state.inFlight -= 1;
        state.finished.push(this.now());
        state.completed.resolve();
        state.completed = deferred();
      },
    };
  }

  /** Admits nothing on `key` before `until` (epoch ms): the server asked every caller to wait. */
  holdUntil(key: string, until: number): void {
    const state = this.state(key);
    state.heldUntil = Math.max(state.heldUntil, until);
  }

  private async waitForSlot(key: string, state: KeyState, options: AcquireOptions): Promise<void> {
    const { deadline, signal } = options;
    for (;;) {
      signal?.throwIfAborted();
      const now = this.now();
      while (state.finished.length > 0 && (state.finished[0] ?? 0) <= now - this.windowMs)
        state.finished.shift();
      let waitMs: number;
      if (state.heldUntil > now) waitMs = state.heldUntil - now;
      else if (state.inFlight + state.finished.length < this.limit) return;
      else if (state.finished.length > 0) waitMs = (state.finished[0] ?? now) + this.windowMs - now;
      else waitMs = Number.POSITIVE_INFINITY; // every slot in flight: the first completion starts the clock

      if (deadline !== undefined && now + waitMs >= deadline) {
        if (waitMs !== Number.POSITIVE_INFINITY || now >= deadline) {
          throw new TransientError(
            `client-side rate limit of ${key}: no slot frees before the deadline`,
            waitMs === Number.POSITIVE_INFINITY ? {} : { retryAfterMs: Math.ceil(waitMs) },
          );
        }
        await this.pause(state, deadline - now, signal);
      } else {
        await this.pause(state, waitMs, signal);
      }
    }
  }

  // Sleeps `ms`, waking early when a request completes (it may have freed a slot while every slot
  // was in flight); the caller's loop then looks again.
  private async pause(state: KeyState, ms: number, signal: AbortSignal | undefined): Promise<void> {
    if (ms === Number.POSITIVE_INFINITY) {
      await untilAborted(state.completed.promise, signal);
      return;
    }
    const stop = new AbortController();
    const onAbort = (): void => stop.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await Promise.race([this.sleep(ms, stop.signal), state.completed.promise]);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      stop.abort();
    }
    signal?.throwIfAborted();
  }

  private state(key: string): KeyState {
    let state = this.keys.get(key);
    if (!state) {
      state = { inFlight: 0, finished: [], heldUntil: 0, queue: Promise.resolve(), completed: deferred() };
      this.keys.set(key, state);
    }
    return state;
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

function untilAborted(promise: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

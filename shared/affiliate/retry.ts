import { TransientError } from '../errors.ts';

/** Waits `ms` milliseconds; rejects with the signal's reason when it aborts first. */
export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;

/** The longest delay one Node timer holds: past it, Node fires the timer after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The real `Sleep`: a timer that is cleared when the signal aborts. A wait past what one timer holds
 * (a 429's retry-after is not capped) runs as a chain of timers, instead of ending after 1 ms and
 * sending the retry at once.
 */
export const sleep: Sleep = (ms, signal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const end = Date.now() + Math.max(0, ms);
    let timer: ReturnType<typeof setTimeout>;
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const arm = (left: number): void => {
      timer = setTimeout(
        () => {
          const rest = end - Date.now();
          if (left > MAX_TIMER_MS && rest > 0) {
            arm(rest);
            return;
          }
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.min(MAX_TIMER_MS, Math.max(0, left)),
      );
    };
    arm(Math.max(0, ms));
    signal?.addEventListener('abort', onAbort, { once: true });
  });

export interface BackoffOptions {
  /** Ceiling of the first wait. */
  readonly baseMs: number;
  /** Largest ceiling, whatever the attempt. */
  readonly capMs: number;
  /** Uniform in [0, 1). @default Math.random */
  readonly random?: () => number;
}

/**
 * Wait before the retry that follows failed attempt `attempt` (1 for the first attempt): exponential
 * backoff with full jitter, a uniform draw in [0, min(capMs, baseMs * 2^(attempt - 1))). Full jitter
 * spreads the retries of many callers that failed together (a 503 storm, a burst cut by the rate
 * limit) instead of bringing them back in waves.
 */
export function backoffDelay(
  attempt: number,
  { baseMs, capMs, random = Math.random }: BackoffOptions,
): number {
  const exponent = Math.max(0, Math.floor(attempt) - 1);
  // 2^exponent overflows to Infinity long before it matters; min() keeps the ceiling finite.
  const ceiling = Math.min(capMs, baseMs * 2 ** exponent);
  return Math.floor(random() * Math.max(0, ceiling));
}

/** What to do after a failed attempt. */
export interface RetryDecision {
  readonly retry: boolean;
  /** The server said how long to wait (429 `retry-after`): used instead of the backoff. */
  readonly retryAfterMs?: number;
}

export interface RetryAttempt {
  /** 1 for the first attempt. */
  readonly attempt: number;
  /** Time left before the deadline, or undefined without one: cap the attempt's own timeout with it. */
  readonly remainingMs: number | undefined;
}

export interface RetryInfo {
  /** The attempt that failed. */
  readonly attempt: number;
  readonly waitMs: number;
  readonly error: unknown;
}

export interface RetryOptions {
  /** Attempts in all, the first included. */
  readonly maxAttempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  /** Epoch ms: no attempt starts, and no wait is begun that would end, at or after it. */
  readonly deadline?: number;
  /** Aborts a wait between attempts (the attempt itself should listen too). */
  readonly signal?: AbortSignal;
  /** Names the work in the error thrown when the deadline has passed before the first attempt. */
  readonly label?: string;
  /** Decides per failure whether another attempt may help. */
  readonly classify: (error: unknown, attempt: number) => RetryDecision;
  readonly onRetry?: (info: RetryInfo) => void;
  /** @default Date.now */
  readonly now?: () => number;
  readonly sleep?: Sleep;
  readonly random?: () => number;
}

/**
 * Runs `fn` until it succeeds, a failure is classified as not worth retrying, `maxAttempts` is
 * spent, or the next wait would end past the deadline; then rethrows the last failure as it was
 * (so a 429's `retryAfterMs` reaches the caller, who can schedule the work for later).
 */
export async function withRetry<T>(
  fn: (attempt: RetryAttempt) => Promise<T>,
  options: RetryOptions,
): Promise<T> {
  const now = options.now ?? Date.now;
  const wait = options.sleep ?? sleep;
  const maxAttempts = Math.max(1, Math.floor(options.maxAttempts));
  const { deadline } = options;
  for (let attempt = 1; ; attempt++) {
    const remainingMs = deadline === undefined ? undefined : deadline - now();
    if (remainingMs !== undefined && remainingMs <= 0) {
      throw new TransientError(`${options.label ?? 'operation'}: the deadline passed before it could start`);
    }
    try {
      return await fn({ attempt, remainingMs });
    } catch (error) {
      const decision = options.classify(error, attempt);
      if (!decision.retry || attempt >= maxAttempts) throw error;
      const waitMs =
        decision.retryAfterMs ??
        backoffDelay(attempt, {
          baseMs: options.baseDelayMs,
          capMs: options.maxDelayMs,
          random: options.random,
        });
      if (deadline !== undefined && now() + waitMs >= deadline) throw error;
      options.onRetry?.({ attempt, waitMs, error });
      await wait(waitMs, options.signal);
    }
  }
}

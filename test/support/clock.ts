import type { Sleep } from '../../shared/affiliate/retry.ts';

interface Timer {
  at: number;
  seq: number;
  resolve: () => void;
}

export interface FakeClockOptions {
  /** Epoch milliseconds the clock starts at (default 0). */
  readonly start?: number;
  /**
   * What `run` does when the promise is still pending and no fake timer is left: `'throw'` (default)
   * fails at once, as nothing can settle it any more; `'wait'` lets real time pass, for code that
   * also arms real timers (a request timeout).
   */
  readonly whenIdle?: 'throw' | 'wait';
}

/** Virtual time: `run` advances to the next timer whenever nothing else can make progress. */
export class FakeClock {
  time: number;
  /** Every delay asked of `sleep`, in order. */
  readonly sleeps: number[] = [];
  private readonly whenIdle: 'throw' | 'wait';
  private seq = 0;
  private timers: Timer[] = [];

  constructor(options: FakeClockOptions = {}) {
    this.time = options.start ?? 0;
    this.whenIdle = options.whenIdle ?? 'throw';
  }

  now = (): number => this.time;

  sleep: Sleep = (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      this.sleeps.push(ms);
      const timer: Timer = { at: this.time + Math.max(0, ms), seq: this.seq++, resolve };
      this.timers.push(timer);
      signal?.addEventListener(
        'abort',
        () => {
          this.timers = this.timers.filter((t) => t !== timer);
          reject(signal.reason);
        },
        { once: true },
      );
    });

  async run<T>(promise: Promise<T>): Promise<T> {
    let settled = false;
    promise.then(
      () => {
        settled = true;
      },
      () => {
        settled = true;
      },
    );
    for (;;) {
      await new Promise((resolve) => setImmediate(resolve));
      if (settled) return promise;
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers.shift();
      if (!next) {
        if (this.whenIdle === 'throw') throw new Error('nothing scheduled: the promise can never settle');
        await new Promise((resolve) => setTimeout(resolve, 5));
        continue;
      }
      this.time = Math.max(this.time, next.at);
      next.resolve();
    }
  }
}

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
  /**
   * Adaptive pacing: the rate starts here and follows the platform's rate-limit headers (`observe`)
   * within `ratePerSecond`, which then is a ceiling, not the operating point. Absent: a fixed rate.
   */
  readonly adaptive?: {
    readonly initialRatePerSecond: number;
    /** Where the busy instances of a fleet compare their paces, to share the route equally. */
    readonly fleet?: FleetPaces;
  };
}

/**
 * A record, outside the request path, where each busy instance of a fleet puts its pace per key
 * and reads the others' (`DynamoPacingBoard`). The platform's headers give the route's total, not
 * how many share it; this gives the fleet's mean, which an equal split needs.
 */
export interface FleetPaces {
  /** Records `pace` (requests per window) as this instance's on `key`; resolves the paces of the instances recorded recently, its own included. */
  share(key: string, pace: number): Promise<readonly number[]>;
  /**
   * Takes a pace on `key` from what the others use: records `pace` as this instance's, marked as
   * claiming, reads what the other instances recorded recently (the paces of those settled, and
   * how many others are claiming) and records `decide(others, claiming)` instead, unless another
   * instance arrived in between (then it reads again). Resolves the pace recorded, or undefined
   * when none could be (the caller keeps its own).
   */
  claim(
    key: string,
    pace: number,
    decide: (others: readonly number[], claiming: number) => number,
  ): Promise<number | undefined>;
}

/** The platform's view of a route's window, read from an answer (`x-…-ratelimit-route-second-*`). */
export interface RouteWindowState {
  /** Requests the route allows per window, across every client of the token. */
  readonly limit?: number;
  /** Requests left in the current window when this request arrived. */
  readonly remaining?: number;
  /** The answer was a 429. */
  readonly rateLimited: boolean;
  /**
   * Epoch ms the request was sent (the platform counted it shortly after): two answers of one
   * window, `consumed` apart, tell how fast every client of the token together uses the route.
   */
  readonly sentAt?: number;
  /** The window's length (`-reset`: the spec's "duration in seconds"), in ms. */
  readonly windowMs?: number;
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

/** An answer that gave the server's count of its window. */
export interface CountedAnswer {
  /** When its request was sent, and when the answer was read (`observe`, before its release). */
  readonly sentAt: number;
  readonly at: number;
  /** Requests the server had counted in its window when this one arrived, this one included. */
  readonly consumed: number;
  readonly limit: number;
}

interface KeyState {
  /** Requests admitted per window now: the ceiling for a fixed rate, moved by `observe` when adaptive. */
  allowance: number;
  /** The current pacing epoch (one window long) and what the platform said during it. */
  epochStart: number;
  epochLeast: number | undefined;
  epochServerLimit: number | undefined;
  epochOwn: number;
  epochSent: number;
  epochWaited: boolean;
  epochCut: boolean;
  /** The platform's window length, as its `-reset` header gives it (else this limiter's window). */
  serverWindowMs: number;
  /** Share of the limit this instance aims to leave free: HEADROOM, more while windows run full. */
  headroom: number;
  /** The route's consumption seen in the epoch: `rise` requests counted over `spanMs` of sends. */
  epochRise: number;
  epochSpanMs: number;
  /** The answer sent last so far, to pair with the next one of the same server window. */
  lastSample: { readonly sentAt: number; readonly consumed: number } | undefined;
  /** When the next request may be admitted: adaptive pacing spaces them evenly over the window. */
  nextAdmit: number;
  inFlight: number;
  /** The key, to share its pace under. */
  readonly key: string;
  /** The busy fleet's mean pace on this key (requests per window) when last read, and when. */
  fleetMean: number | undefined;
  fleetReadAt: number;
  /** The route's rate the last epoch measured, per this limiter's window (undefined: none yet). */
  lastRoute: number | undefined;
  /** A share with the fleet is under way / began at. */
  sharing: boolean;
  sharedAt: number;
  /** When the last request was admitted: a key idle longer than FLEET_FRESH_MS arrives afresh. */
  lastAdmit: number;
  /** With a fleet record: the key arrived and claims its pace once a caller waits on it. */
  claimDue: boolean;
  /**
   * Until then the key claims its pace again every RECLAIM_MS: a window from when its first claim
   * landed (from when it began, while that claim is under way); a 429 ends it.
   */
  settleUntil: number;
  /** A 429 came since the key arrived: a claim under way is not applied. */
  claimVoid: boolean;
  /** Completion times of requests within the last window, oldest first. */
  finished: number[];
  /** Answers read within the last window that gave the server's count, oldest first. */
  counted: CountedAnswer[];
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
 * to twice the rate through across a window boundary and gets 429s on every burst. The price is a
 * slot held from a request's send until a window after its answer: about 90/s at 100 ms round
 * trips. With adaptive pacing the server's own count (each answer's `consumed`) also admits a
 * request where it shows room in the window it can land in (`windowBound`), with the same
 * guarantee, so one instance alone runs at its pace instead.
 */
export class RateLimiter {
  readonly limit: number;
  readonly windowMs: number;
  private readonly now: () => number;
  private readonly sleep: Sleep;
  private readonly keys = new Map<string, KeyState>();
  private readonly initialAllowance: number;
  private readonly adaptive: boolean;
  private readonly fleet: FleetPaces | undefined;
  /** Requests per window a fleet aims at on a key: the limit less HEADROOM (claims and trims). */
  private readonly fleetTarget: number;

  constructor(options: RateLimiterOptions = {}) {
    const rate = options.ratePerSecond ?? 100;
    if (!(rate > 0)) throw new RangeError(`ratePerSecond must be a positive number, got ${rate}`);
    // A fractional rate (0.5/s, 2.5/s) becomes whole requests over a longer window.
    this.limit = rate === Number.POSITIVE_INFINITY ? rate : Math.max(1, Math.floor(rate));
    this.windowMs = rate === Number.POSITIVE_INFINITY ? 0 : (1000 * this.limit) / rate;
    this.now = options.now ?? Date.now;
    this.sleep = options.sleep ?? realSleep;
    this.adaptive = options.adaptive !== undefined && this.limit !== Number.POSITIVE_INFINITY;
    this.fleet = this.adaptive ? options.adaptive?.fleet : undefined;
    this.fleetTarget = this.limit * (1 - HEADROOM);
    const initial = options.adaptive?.initialRatePerSecond ?? rate;
    if (!(initial > 0))
      throw new RangeError(`initialRatePerSecond must be a positive number, got ${initial}`);
    this.initialAllowance = this.adaptive
      ? Math.min(this.limit, Math.max(1, (initial * this.windowMs) / 1000))
      : this.limit;
  }

  /** Requests per window `key` admits now (the ceiling unless adaptive pacing moved it). */
  allowance(key: string): number {
    return Math.floor(this.state(key).allowance);
  }

  /**
   * Feeds an answer's rate-limit headers to the pacing of `key` (a no-op for a fixed rate).
   *
   * A rate per route steered by the platform's own count, as adaptive concurrency limiters
   * (Netflix concurrency-limits' gradient and AIMD limits) and TCP congestion control (RFC 5681)
   * steer by delay or loss, but with a signal they lack: `remaining` is the same number for every
   * client of the token, so instances that share no memory still see one budget.
   *
   * Two answers of one server window sent `dt` apart whose `consumed` grew by `d` say that all the
   * token's clients together send `d / dt` on the route (this instance, its siblings, a foreign
   * client); summed over a window this is the route's rate, measured, not guessed from the lowest
   * `remaining` seen (which reads low by up to one of this instance's spacings, so it had to keep a
   * 10% margin and cut by a tenth whenever it dipped: the sawtooth that held the bench at 77–81/s).
   * Once per window (an epoch):
   * - the route's rate R is compared with the target, the server's limit less a margin (HEADROOM,
   *   2%, widened by 2 points each window that ran full: an answer saw nothing left or was a 429,
   *   which many instances see alike; narrowed by a point per clean window), so the margin
   *   follows the jitter of the timers and the network instead of being sized for the worst; and
   *   the allowance moves by GAIN × (target − R) × this instance's share of R (its sends in the
   *   epoch over R), so N instances together close GAIN of the gap per window without
   *   coordinating, and a foreign client's requests simply count in R. Growth needs callers to
   *   have waited (the allowance, not demand, bounded the rate; an idle instance does not grow it,
   *   as in RFC 7661's cwnd validation); a decrease does not.
   * - R is measured only from requests sent in the epoch, at its pace: a pair sent before it may
   *   predate a change of pace, and mixing them made a fleet that had just grown read the route
   *   low and overshoot.
   * - a slow start, as TCP's but driven by the measured gap rather than by doubling blindly: an
   *   epoch closes early (a quarter window on, once its pairs span a fifth of one) while R is
   *   surely under 90% of the target, counting a couple of requests more than it saw since short
   *   spans are coarse; under 80% (with a fleet record, below: whenever it closes early) it ramps,
   *   with a gain of 1 aimed at 95% of the target (its siblings are speeding up too) and at most 3×
   *   its pace per epoch. A fleet cold-started at its static share reaches the route within the
   *   first window instead of after two, and an instance whose siblings ran dry takes over their
   *   budget within a window.
   * - with a fleet record (`adaptive.fleet`, the stack's pacing table), each busy instance puts its
   *   pace there once or twice a window and moves half way to the busy fleet's mean per window on
   *   top of its share of the gap: zero-sum, so the total stays where the gap puts it while the
   *   split evens out. Without it the split the instances' start order made stays (proportional
   *   steps keep ratios, as AIMD's multiplicative decrease alone would), and the instances run dry
   *   one after another at the end of a backlog.
   * - with a fleet record, an instance that starts (or comes back from idle) does not ramp from
   *   its start pace: once callers wait, it claims an equal share of the target among the busy
   *   instances, no more than they leave free (`claimFromFleet`; instances that claim together
   *   split the free part, and a conditional write retries a claim that missed an instance
   *   that arrived since), and claims again every RECLAIM_MS for a window, so a pair
   *   that started together splits the route within a few tenths of a second. The ramp from
   *   measurement needed answers at the start pace first (a pair answered 54 requests in its first
   *   second instead of about 80). Paces recorded over the limit while the route runs full are
   *   trimmed by the instances above the fair share at their next share.
   * - a 429 cuts the allowance by DECREASE_ON_429 at once, once per epoch, with no growth in that
   *   epoch (`holdUntil` keeps the retry-after).
   * R, the target and the share are per the platform's window, whose length the `-reset` header
   *   gives (the spec's "duration"; not the time to its end, so it cannot time the next window).
   * - an epoch with too few answers to measure R falls back to `remaining`: -10% when an answer
   *   saw less than a tenth of the route left, +1 when callers waited.
   * The allowance is a rate: admissions are spaced evenly over the window (bursts of several
   * instances landing in one server window are what drew 429s), from each one's due time, so a
   * timer that fires late (a busy event loop) does not lose the time it was late. The
   * send-to-answer window count stays at the ceiling (`ratePerSecond`), so one instance alone still
   * cannot draw a 429 on a burst; where the server's count of its window shows room
   * (`windowBound`), a request is admitted past it with the same guarantee.
   *
   * Call it before releasing the request's permit: the bound counts the request as in flight
   * until then.
   */
  observe(key: string, window: RouteWindowState): void {
    if (!this.adaptive) return;
    const state = this.state(key);
    this.roll(state, this.now());
    state.epochOwn += 1;
    if (window.limit !== undefined && window.limit > 0) state.epochServerLimit = window.limit;
    if (window.windowMs !== undefined && window.windowMs > 0) state.serverWindowMs = window.windowMs;
    if (window.remaining !== undefined)
      state.epochLeast = Math.min(state.epochLeast ?? window.remaining, window.remaining);
    if (window.rateLimited) {
      state.claimDue = false;
      state.settleUntil = 0;
      state.claimVoid = true;
      if (!state.epochCut) {
        state.allowance = Math.max(1, state.allowance * DECREASE_ON_429);
        state.epochCut = true;
      }
      // A 429's count is capped at the limit: it says nothing of the rate.
      return;
    }
    const limit = window.limit ?? state.epochServerLimit;
    if (window.sentAt === undefined || window.remaining === undefined || limit === undefined) return;
    const sample = { sentAt: window.sentAt, consumed: limit - window.remaining };
    state.counted.push({ ...sample, at: this.now(), limit });
    const last = state.lastSample;
    if (last !== undefined && sample.sentAt <= last.sentAt) return; // answered out of order
    state.lastSample = sample;
    // Only requests sent in this epoch, at its pace: one sent before may predate a change of pace.
    if (last !== undefined && last.sentAt < state.epochStart) return;
    // A count that did not grow, or a gap as long as a window, is a new server window.
    if (
      last === undefined ||
      sample.consumed <= last.consumed ||
      sample.sentAt - last.sentAt >= state.serverWindowMs
    )
      return;
    state.epochRise += sample.consumed - last.consumed;
    state.epochSpanMs += sample.sentAt - last.sentAt;
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
    let paced = false;
    for (;;) {
      signal?.throwIfAborted();
      const now = this.now();
      while (state.finished.length > 0 && (state.finished[0] ?? 0) <= now - this.windowMs)
        state.finished.shift();
      while (state.counted.length > 0 && (state.counted[0]?.at ?? 0) <= now - this.windowMs)
        state.counted.shift();
      this.roll(state, now);
      let waitMs: number;
      if (state.heldUntil > now) waitMs = state.heldUntil - now;
      else if (this.adaptive && state.nextAdmit > now) {
        waitMs = Math.max(1, Math.ceil(state.nextAdmit - now));
        paced = true;
      } else if (
        state.inFlight + state.finished.length < (this.adaptive ? this.limit : state.allowance) ||
        this.countAllows(state, now)
      ) {
        const spacing = this.windowMs / state.allowance;
        // A caller that waited for its turn counts from the due time, not from now: a timer that
        // fired late (a busy event loop) costs no rate. At most one spacing is made up (two
        // admissions back to back), so a stall does not turn into a burst; an idle key starts afresh.
        state.epochSent += 1;
        if (this.fleet) this.arrive(state, now);
        state.lastAdmit = now;
        state.nextAdmit = (paced ? Math.max(state.nextAdmit, now - spacing) : now) + spacing;
        return;
      } else if (state.finished.length > 0) waitMs = (state.finished[0] ?? now) + this.windowMs - now;
      else waitMs = Number.POSITIVE_INFINITY; // every slot in flight: the first completion starts the clock

      state.epochWaited = true;
      if (state.claimDue && !state.sharing) {
        state.claimDue = false;
        state.settleUntil = now + this.windowMs;
        this.claimFromFleet(state, now, true);
      }
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

  // The send-to-answer count holds a slot for a window after each answer: about 90/s at 100 ms
  // round trips, one instance alone. The server's own count of its window (`windowBound`) frees
  // the rest with the same guarantee; the latest few answers are tried, since one read from the
  // window before can be the last sent while an earlier one already counts in the new window.
  private countAllows(state: KeyState, now: number): boolean {
    if (!this.adaptive) return false;
    const { counted } = state;
    for (let k = counted.length - 1; k >= 0 && k >= counted.length - COUNT_REFERENCES; k--) {
      const answer = counted[k];
      if (answer === undefined || answer.sentAt <= now - this.windowMs) continue;
      if (windowBound(answer, state.inFlight, state.finished, counted) <= answer.limit) return true;
    }
    return false;
  }

  // Closes the pacing epoch once a window has passed (sooner, to grow, while the route surely runs
  // under its target), moving the allowance by what it saw.
  private roll(state: KeyState, now: number): void {
    if (!this.adaptive) return;
    const elapsed = now - state.epochStart;
    if (elapsed < this.windowMs * EARLY_EPOCH_SHARE) return;
    const limit = state.epochServerLimit;
    const least = state.epochLeast;
    const early = elapsed < this.windowMs;
    // Rates per server window, as the limit is; the allowance is per this limiter's window.
    const server = state.serverWindowMs;
    const minSpan = server * (early ? EARLY_MIN_SPAN_SHARE : MIN_MEASURED_SHARE);
    const measured = limit !== undefined && state.epochSpanMs >= minSpan && state.epochRise > 0;
    const route = measured ? (state.epochRise * server) / state.epochSpanMs : undefined;
    // The margin follows the jitter: a window that ran full (an answer saw nothing left, or a 429)
    // widens it at once; clean windows narrow it back to HEADROOM at half that pace (a quarter held
    // a fleet at 90–92/s for 4–5 s after its ramp ran a window full; the whole step kept an
    // instance whose siblings ran dry from growing early, its windows running full more often).
    const headroom =
      least === 0
        ? Math.min(MAX_HEADROOM, state.headroom + HEADROOM_STEP)
        : Math.max(HEADROOM, state.headroom - HEADROOM_STEP / 2);
    const target = (limit ?? this.limit) * (1 - headroom);
    // Under the target even if the count missed a couple of requests (short spans are coarse).
    const high =
      route === undefined ? undefined : ((state.epochRise + COUNT_SLACK) * server) / state.epochSpanMs;
    const ramp = high !== undefined && high < target * (this.fleet ? EARLY_BELOW : RAMP_BELOW);
    // Before a whole window only to grow, while the route surely runs under its target.
    if (early && (high === undefined || high >= target * EARLY_BELOW || state.epochCut || least === 0))
      return;
    state.headroom = headroom;
    if (state.epochCut) {
      // Already cut by a 429 in this epoch.
    } else if (route !== undefined) {
      state.lastRoute = (route * this.windowMs) / server;
      // Its sends in the epoch are at its current pace; its answers lag by a round trip.
      const own = (Math.max(state.epochSent, state.epochOwn) * server) / elapsed;
      const gap = (ramp ? target * RAMP_AIM : target) - route;
      const share = Math.min(1, own / Math.max(route, 1));
      let step = ((ramp ? 1 : GAIN) * gap * share * this.windowMs) / server;
      if (ramp) step = Math.min(step, state.allowance * (RAMP_GROWTH - 1));
      // Toward the busy fleet's mean pace: zero-sum across the fleet, so the total stays where the
      // gap puts it while the split evens out (proportional steps alone keep whatever split the
      // start order made, and the instances then run dry one after another).
      if (state.epochWaited && state.fleetMean !== undefined && now - state.fleetReadAt < FLEET_FRESH_MS)
        step += FAIRNESS * (state.fleetMean - state.allowance) * Math.min(1, elapsed / this.windowMs);
      // While the key settles its pace by claims, the claims raise it.
      if (now < state.settleUntil) step = Math.min(step, 0);
      if (gap < 0 || state.epochWaited)
        state.allowance = Math.min(this.limit, Math.max(1, state.allowance + step));
    } else if (least !== undefined && limit !== undefined && least < Math.ceil(limit * EDGE)) {
      state.allowance = Math.max(1, state.allowance * DECREASE_AT_EDGE);
    } else if (state.epochWaited) {
      state.allowance = Math.min(this.limit, state.allowance + 1);
    }
    if (state.epochWaited) this.shareWithFleet(state, now);
    this.newEpoch(state, now);
  }

  // Puts this instance's pace in the fleet's record and keeps the busy fleet's mean, at most twice a
  // window and one at a time; a failed share only leaves the split as it is (the record is advice).
  // Paces recorded over the limit while the route runs full (an instance arrived at its start pace
  // beside one that had claimed the free route) are trimmed at once by the instances above the fair
  // share; not while it runs under its target (at the end of a backlog the entries of instances
  // that ran dry stay in the record for two seconds). Each gives up the whole excess, down to the
  // fair share, not its part of it: the part in proportion to how far each is over, tried on the
  // bench on 2026-11-26, made no difference there (docs/benchmarks-history.md).
  private shareWithFleet(state: KeyState, now: number): void {
    const fleet = this.fleet;
    if (!fleet || state.sharing || now - state.sharedAt < this.windowMs / 2) return;
    state.sharing = true;
    state.sharedAt = now;
    fleet
      .share(state.key, state.allowance)
      .then((paces) => {
        const sum = paces.reduce((a, b) => a + b, 0);
        state.fleetMean = paces.length >= 2 ? sum / paces.length : undefined;
        state.fleetReadAt = this.now();
        const target = this.fleetTarget;
        const full = state.lastRoute === undefined || state.lastRoute >= target;
        if (full && paces.length >= 2 && sum > this.limit && state.allowance > target / paces.length)
          state.allowance = Math.max(target / paces.length, state.allowance - (sum - target));
      })
      .catch(() => {
        state.fleetMean = undefined;
      })
      .finally(() => {
        state.sharing = false;
      });
  }

  // With a fleet record, a key used for the first time or again after an idle spell arrives: its
  // pace from before may be stale (its siblings took the route meanwhile), so it restarts at no
  // more than the start pace and claims its pace once a caller waits on it (a route with little
  // demand never claims, and keeps the start pace). For a window after its first claim, it claims
  // again every RECLAIM_MS, which settles the split of instances that arrived together.
  private arrive(state: KeyState, now: number): void {
    if (now - state.lastAdmit > FLEET_FRESH_MS) {
      state.allowance = Math.min(state.allowance, this.initialAllowance);
      state.claimDue = true;
      state.settleUntil = 0;
      state.claimVoid = false;
    } else if (now < state.settleUntil && !state.sharing && now - state.sharedAt >= RECLAIM_MS) {
      this.claimFromFleet(state, now, false);
    }
  }

  // Takes the pace the fleet's record leaves: an equal share of the target among the busy instances
  // (settled and claiming), no more than its part of what the settled ones leave free (split among
  // the instances claiming with it, so claimers never each take the free route), no less than the
  // start pace (which maxConcurrency instances may all run at; taking only the free part, down to
  // one request per window, drained slower in the bench: docs/benchmarks-history.md). The record
  // writes a claim only if no instance arrived since its read, so every claimer counted every other
  // (test/integration/pacing-board.test.ts). A claim that comes back after a 429 is dropped: the
  // measured pacing does the work. One that lands late is kept: the record wrote it only if no
  // instance had arrived since its read, so it counted every instance there when it was written
  // (dropping one whose read had aged past a quarter window left the instance at its own pace: on a
  // slow machine 0.84% 429s against 1.19% at ten instances, docs/benchmarks-history.md). The window
  // of claims again counts from when the first claim lands: a claim slower than a window (the table
  // busy) would otherwise land with the window over, and keep a share sized for the instances that
  // were there when it read.
  private claimFromFleet(state: KeyState, now: number, first: boolean): void {
    const fleet = this.fleet;
    if (!fleet) return;
    const target = this.fleetTarget;
    const floor = Math.min(state.allowance, this.initialAllowance);
    let mean: number | undefined;
    state.sharing = true;
    state.sharedAt = now;
    fleet
      .claim(state.key, state.allowance, (others, claiming) => {
        const used = others.reduce((a, b) => a + b, 0);
        const busy = others.length + claiming + 1;
        const pace = Math.min(this.limit, Math.max(floor, claimShare(target, others, claiming)));
        mean = busy > 1 ? (used + pace * (claiming + 1)) / busy : undefined;
        return pace;
      })
      .then((claimed) => {
        const at = this.now();
        if (claimed === undefined || state.claimVoid) return;
        const before = state.allowance;
        state.allowance = claimed;
        if (first) state.settleUntil = at + this.windowMs;
        state.fleetMean = mean;
        state.fleetReadAt = at;
        // Measured afresh at a new pace. A claim that leaves the pace as it was keeps the epoch:
        // restarting it at every claim kept a settling key from measuring the route until a window
        // after its last claim, two windows in.
        if (claimed !== before) this.newEpoch(state, at);
      })
      .catch(() => {})
      .finally(() => {
        state.sharing = false;
      });
  }

  private newEpoch(state: KeyState, now: number): void {
    state.epochStart = now;
    state.epochLeast = undefined;
    state.epochOwn = 0;
    state.epochSent = 0;
    state.epochWaited = false;
    state.epochCut = false;
    state.epochRise = 0;
    state.epochSpanMs = 0;
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
      // Clears the timer when a completion woke the caller first. With a reason of its own: a bare
      // abort() builds a DOMException each time (2% of a busy worker's CPU in the bench's profile).
      stop.abort(PAUSE_OVER);
    }
    signal?.throwIfAborted();
  }

  private state(key: string): KeyState {
    let state = this.keys.get(key);
    if (!state) {
      state = {
        allowance: this.initialAllowance,
        epochStart: this.now(),
        epochLeast: undefined,
        epochServerLimit: undefined,
        epochOwn: 0,
        epochSent: 0,
        epochWaited: false,
        epochCut: false,
        headroom: HEADROOM,
        serverWindowMs: this.windowMs,
        epochRise: 0,
        epochSpanMs: 0,
        lastSample: undefined,
        nextAdmit: Number.NEGATIVE_INFINITY,
        lastAdmit: Number.NEGATIVE_INFINITY,
        claimDue: false,
        settleUntil: 0,
        claimVoid: false,
        inFlight: 0,
        key,
        fleetMean: undefined,
        fleetReadAt: 0,
        lastRoute: undefined,
        sharing: false,
        sharedAt: Number.NEGATIVE_INFINITY,
        finished: [],
        counted: [],
        heldUntil: 0,
        queue: Promise.resolve(),
        completed: deferred(),
      };
      this.keys.set(key, state);
    }
    return state;
  }
}

/**
 * The most requests of this client the server window of a request sent now can hold, that request
 * included, by what `answer` said: the server had counted `consumed` in its window when `answer`
 * arrived. A request sent now lands in that window or a later one, and a request that can land
 * there after `answer` is one still in flight or answered since `answer` was sent (one answered
 * before it was sent arrived before it), less those whose own count was lower than `answer`'s (of
 * its window: arrived before it; of a later window: at most `consumed` − 1 of them share one, so
 * `consumed` covers them). `answer` is among those counted, which makes room for the new request.
 * `finished` holds the answer times of the requests no longer in flight, `counted` the answers
 * that gave a count, each read before its request left the flight (`at` <= its time in `finished`).
 * Other clients' requests that arrive after `answer` are not in it, as they are not in the
 * send-to-answer count either: across instances the pacing keeps the route under its limit.
 * It reads `consumed` as the spec gives it ("requests already used in the current duration"): a
 * fixed window, counted one request after another, as the sandbox does. A platform that counted
 * otherwise could answer a 429 where this bound saw room; that call waits its retry-after and is
 * retried like any other.
 */
export function windowBound(
  answer: CountedAnswer,
  inFlight: number,
  finished: readonly number[],
  counted: readonly CountedAnswer[],
): number {
  let since = inFlight;
  for (let i = finished.length - 1; i >= 0 && (finished[i] ?? 0) >= answer.sentAt; i--) since += 1;
  for (let i = counted.length - 1; i >= 0; i--) {
    const other = counted[i];
    if (other === undefined || other.at < answer.sentAt) break;
    if (other.consumed < answer.consumed) since -= 1;
  }
  return answer.consumed + since;
}

/**
 * The pace a claim takes of `target`: an equal share among the busy instances (the settled
 * `others`, the `claiming` others and the claimer), no more than the claimer's part of what the
 * settled ones leave free, split with the others claiming. Instances that claim on the same view
 * of the fleet together take no more than `target`.
 */
export function claimShare(target: number, others: readonly number[], claiming: number): number {
  const used = others.reduce((a, b) => a + b, 0);
  return Math.min((target - used) / (claiming + 1), target / (others.length + claiming + 1));
}

/**
 * Share of the route's limit the fleet leaves free: jitter of a few requests per window (instances'
 * timers, the network) must not cross the limit. Tuned with GAIN and DECREASE_ON_429 on the
 * simulation in test/unit/rate-limiter.test.ts (1 to 10 instances, 50–149 ms latency, a foreign
 * client): less headroom or more gain traded a few adds per second for several times the 429s
 * there (2% against 3%, five instances: 95.1/s and 0.60% against 96.5/s and 0.17%). 3% until the
 * bench of 2026-11-26 (docs/benchmarks-history.md), where 2% made ten instances drain at 95.0
 * adds/s against 94.1 over 14 interleaved pairs (the middle lost 0.47 s against 0.67), five at 95.8
 * against 95.5, and 67.6 against 66.6 beside a foreign client, with 429s as rare (0.21% against
 * 0.19% with ten; 0.87% at most): the bench's separate processes, not the simulation, are what
 * the target is measured on. Windows that run full still widen the margin (HEADROOM_STEP). 1% was
 * tried in the bench later that day and left: 96.0 against 95.6 adds/s with ten instances over
 * twelve interleaved runs, all of it from the first six (docs/benchmarks-history.md). So was 5%
 * while an instance arrives, narrowed back by clean windows: fewer 429s, but 95.1 against 95.5. And
 * 1% with the pacing record only, on the night of 2026-11-26: 95.29 against 95.12 over 14 pairs,
 * ten of 14 at or over 95 in both, the 429s doubled.
 */
const HEADROOM = 0.02;
/** The latest answers `countAllows` tries as its reference (one of the old window can lag one of the new). */
const COUNT_REFERENCES = 8;
/** A window seen full widens the margin by this share of the limit, up to MAX_HEADROOM. */
const HEADROOM_STEP = 0.02;
const MAX_HEADROOM = 0.15;
const GAIN = 0.5;
/**
 * A 429 trims this instance's pace at once (the measured rate then finds the rest of the way). On
 * the bench 0.75 cost a fleet of two 25–40 adds per 429 while it grew back at GAIN, and 0.9 let ten
 * instances, of which only the few that drew the 429s cut, run into full windows again (1.1–1.6%
 * 429s against 0.7–1.0%). 0.85, tried on 2026-11-26, gained on the simulation but not on the bench
 * (95.35 against 95.30 adds/s over 14 pairs at ten instances, docs/benchmarks-history.md). Nor did
 * sparing the paces at or under the fleet's fair share when the route measured under the limit (a
 * window the sandbox counted bunched, not a rate over it): 95.18 against 95.24 over 14 pairs.
 */
const DECREASE_ON_429 = 0.8;
/** An epoch closes early, to ramp, no sooner than this share of a window after it began… */
const EARLY_EPOCH_SHARE = 0.25;
/** …and once its paired answers span this share of the platform's window (fewer are too coarse). */
const EARLY_MIN_SPAN_SHARE = 0.2;
/**
 * Requests a short span's count may have missed: a route reads low only if it is low with these.
 * Only the decision to close an epoch early uses them: a ramp that also stepped from that upper
 * estimate (with the pacing record) drained slower on the bench, 94.71 against 95.40 adds/s over 14
 * pairs at ten instances (docs/benchmarks-history.md), though the simulation gained.
 */
const COUNT_SLACK = 2;
/** An epoch closes early while the route runs (surely) under this share of the target… */
const EARLY_BELOW = 0.9;
/**
 * …and ramps (gain 1, aiming at RAMP_AIM of the target, at most RAMP_GROWTH times its pace per
 * epoch) under this share: a fleet starting, or siblings whose backlog ran out. With a fleet record
 * an instance claims its start there, so the ramp only takes over what siblings left, and it ramps
 * whenever an epoch closes early: the end of a backlog, where the instances run dry one after
 * another, drains faster (5 instances on the bench: 95.3–96.3 adds/s in four runs, 94.5 and 95.5 in
 * two at 80%). Without a record the ramp also starts the fleet, where the higher threshold made a
 * pair overshoot on its first measurements (94.4/s on the simulation against 95.1).
 */
const RAMP_BELOW = 0.8;
/** A ramp stops short of the target: it measures a route its siblings are still speeding up. */
const RAMP_AIM = 0.95;
const RAMP_GROWTH = 3;
/** Share of the distance to the busy fleet's mean pace an instance moves per window. */
const FAIRNESS = 0.5;
/** For a window after its first claim, a key claims its pace again this often (the split settles). */
const RECLAIM_MS = 200;
/** A fleet mean older than this is not used (the instances it averaged may have gone idle). */
const FLEET_FRESH_MS = 2000;
/** Sends an epoch's paired answers must span to measure the route's rate (else `remaining` is used). */
const MIN_MEASURED_SHARE = 0.25;
/** Without a measured rate: an answer that saw less than this share of the route left is at its edge. */
const EDGE = 0.1;
const DECREASE_AT_EDGE = 0.9;

/** The reason `pause` aborts its own timer with (nobody reads it: the sleep's rejection is raced away). */
const PAUSE_OVER = 'pause over';

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

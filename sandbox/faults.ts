import * as z from 'zod';
import { createPrng } from './ids.ts';
import type { FaultSettings } from './types.ts';

const share = z.number().min(0, 'must be between 0 and 1').max(1, 'must be between 0 and 1');
const millis = z.number().int('must be an integer of milliseconds').min(0);

/** Shape of FaultSettings, for the control route, `control.setFaults` and SANDBOX_FAULTS. */
export const FaultSettingsSchema = z.strictObject({
  errorRate: share.optional(),
  errorStatus: z.union([z.literal(500), z.literal(502), z.literal(503), z.literal(422)]).optional(),
  latencyMs: millis.optional(),
  jitterMs: millis.optional(),
  hangRate: share.optional(),
  hangMs: millis.optional(),
  lateWriteRate: share.optional(),
  lateWriteMs: millis.optional(),
  burst429: z.number().int().min(0).optional(),
  burstRetryAfterMs: millis.optional(),
  routes: z
    .array(z.string().startsWith('/', 'must be a route path such as /advertiser/conversions.add'))
    .optional(),
  seed: z.number().int().optional(),
});

export const DEFAULT_HANG_MS = 30_000;
export const DEFAULT_LATE_WRITE_MS = 20_000;
export const DEFAULT_BURST_RETRY_AFTER_MS = 200;
const DEFAULT_FAULT_SEED = 1;

/** What happens to one API request, drawn after auth and before any work. */
export type FaultDecision =
  | { kind: 'none'; delayMs: number }
  | { kind: 'burst'; delayMs: number; retryAfterMs: number }
  | { kind: 'hang'; delayMs: number; hangMs: number }
  | { kind: 'late'; delayMs: number; hangMs: number; lateMs: number }
  | { kind: 'error'; delayMs: number; status: number };

/**
 * Holds the fault settings and draws from a seeded PRNG. A draw is taken only for a fault that is
 * switched on, so the same settings and seed give the same sequence of outcomes on every run.
 */
export class FaultInjector {
  private settings: FaultSettings = {};
  private random: () => number = createPrng(DEFAULT_FAULT_SEED);

  /** Replaces the settings (already validated) and restarts the PRNG from their seed. */
  set(settings: FaultSettings): void {
    this.settings = structuredClone(settings);
    this.random = createPrng(settings.seed ?? DEFAULT_FAULT_SEED);
  }

  get(): FaultSettings {
    return structuredClone(this.settings);
  }

  /** Decides the fate of one request to `route`; a forced burst is consumed here. */
  decide(route: string): FaultDecision {
    const s = this.settings;
    if (s.routes && !s.routes.includes(route)) return { kind: 'none', delayMs: 0 };
    const delayMs = (s.latencyMs ?? 0) + (s.jitterMs ? Math.floor(this.random() * (s.jitterMs + 1)) : 0);
    if (s.burst429 && s.burst429 > 0) {
      s.burst429 -= 1;
      return { kind: 'burst', delayMs, retryAfterMs: s.burstRetryAfterMs ?? DEFAULT_BURST_RETRY_AFTER_MS };
    }
    if (s.hangRate && this.random() < s.hangRate) {
      return { kind: 'hang', delayMs, hangMs: s.hangMs ?? DEFAULT_HANG_MS };
    }
    if (s.lateWriteRate && this.random() < s.lateWriteRate) {
      return {
        kind: 'late',
        delayMs,
        hangMs: s.hangMs ?? DEFAULT_HANG_MS,
        lateMs: s.lateWriteMs ?? DEFAULT_LATE_WRITE_MS,
      };
    }
    if (s.errorRate && this.random() < s.errorRate) {
      return { kind: 'error', delayMs, status: s.errorStatus ?? 503 };
    }
    return { kind: 'none', delayMs };
  }
}

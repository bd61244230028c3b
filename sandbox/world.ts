import type { Currency } from '../shared/affiliate/schemas.ts';
import type { SandboxStore } from './store.ts';
import type { SeedIds } from './types.ts';

/** Settings in force; the runtime ones change through `setOptions`. */
export interface SandboxSettings {
  token: string;
  /** HTTP Basic credentials of the legacy `/2.0/` routes. */
  legacyUserCode: string;
  legacyApiKey: string;
  vendor: string;
  ratePerSecond: number;
  duplicates: 'create' | 'reject';
  addResponse: 'bare' | 'withId';
  lockAfterMs: number;
  autoAcceptAfterMs?: number;
}

/** Everything an action needs, passed in rather than imported, so actions stay plain functions. */
export interface SandboxWorld {
  store: SandboxStore;
  seed: SeedIds;
  settings: SandboxSettings;
  now(): number;
}

export interface SeededProgram {
  id: string;
  title: string;
  currency: Currency;
  rules: { id: string; title: string }[];
}

/** Programs of the seed with their currencies and rules (two per program, in order). */
export function seededPrograms(seed: SeedIds): SeededProgram[] {
  return seed.programs.map((id, i) => ({
    id,
    title: `Sandbox program ${i + 1}`,
    currency: i % 2 === 0 ? 'EUR' : 'USD',
    rules: [0, 1].flatMap((r) => {
      const ruleId = seed.rules[2 * i + r];
      return ruleId === undefined ? [] : [{ id: ruleId, title: `Sandbox rule ${i + 1}.${r + 1}` }];
    }),
  }));
}

export function findProgram(world: SandboxWorld, id: string): SeededProgram | undefined {
  const wanted = id.toLowerCase();
  return seededPrograms(world.seed).find((p) => p.id.toLowerCase() === wanted);
}

export function isSeededPartnership(world: SandboxWorld, id: string): boolean {
  const wanted = id.toLowerCase();
  return world.seed.partnerships.some((p) => p.toLowerCase() === wanted);
}

/** The partnership that owns an affiliate tracking id, if any. */
export function partnershipOfTrackingId(world: SandboxWorld, trackingId: number): string | undefined {
  const index = world.seed.trackingIds.indexOf(trackingId);
  return index < 0 ? undefined : world.seed.partnerships[index];
}

export function isoNow(world: SandboxWorld): string {
  return new Date(world.now()).toISOString();
}

import { randomBytes } from 'node:crypto';
import * as z from 'zod';
import { HexId } from '../shared/domain/ids.ts';
import { firstIssue } from '../shared/validation.ts';
import type { SeedIds } from './types.ts';

/**
 * The seeded advertiser. Fixed, readable ids so that configuration files, tests and the README can
 * name them: `5ad…01xx` programs, `…02xx` rules, `…03xx` partnerships, `…04xx` groups, `…05xx` users.
 */
export const DEFAULT_SEED: SeedIds = deepFreeze({
  advertiser: '5ad000000000000000000001',
  programs: ['5ad000000000000000000101', '5ad000000000000000000102'],
  rules: [
    '5ad000000000000000000201',
    '5ad000000000000000000202',
    '5ad000000000000000000203',
    '5ad000000000000000000204',
  ],
  partnerships: ['5ad000000000000000000301', '5ad000000000000000000302'],
  groups: ['5ad000000000000000000401'],
  users: ['5ad000000000000000000501'],
  trackingIds: [1001, 1002],
});

function deepFreeze(seed: SeedIds): SeedIds {
  for (const value of Object.values(seed)) if (Array.isArray(value)) Object.freeze(value);
  return Object.freeze(seed);
}

const SeedSchema = z
  .strictObject({
    advertiser: HexId,
    programs: z.array(HexId).min(1),
    rules: z.array(HexId),
    partnerships: z.array(HexId).min(1),
    groups: z.array(HexId),
    users: z.array(HexId),
    trackingIds: z.array(z.number().int().positive()),
  })
  .refine((s) => s.rules.length === 2 * s.programs.length, {
    message: 'two rules per program are required (rules[2i] and rules[2i + 1] belong to programs[i])',
    path: ['rules'],
  })
  .refine((s) => s.trackingIds.length === s.partnerships.length, {
    message: 'one tracking id per partnership is required',
    path: ['trackingIds'],
  });

/** Merges a partial seed over DEFAULT_SEED and checks it; throws naming the bad field. */
export function resolveSeed(partial: Partial<SeedIds> = {}): SeedIds {
  const parsed = SeedSchema.safeParse({ ...DEFAULT_SEED, ...partial });
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error);
    throw new Error(`sandbox seed.${field}: ${message}`);
  }
  // The platform's ids are lower-case hex; comparisons below assume it.
  const lower = (ids: string[]) => ids.map((id) => id.toLowerCase());
  const s = parsed.data;
  return {
    advertiser: s.advertiser.toLowerCase(),
    programs: lower(s.programs),
    rules: lower(s.rules),
    partnerships: lower(s.partnerships),
    groups: lower(s.groups),
    users: lower(s.users),
    trackingIds: [...s.trackingIds],
  };
}

/** A fresh random 24-hex id, like the platform's object ids. */
export function randomHexId(): string {
  return randomBytes(12).toString('hex');
}

/** mulberry32: small, fast and good enough to make fault draws repeatable from a seed. */
export function createPrng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

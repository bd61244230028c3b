import * as z from 'zod';
import { SANDBOX_TOKEN } from '../local/defaults.ts';
import { firstIssue } from '../shared/validation.ts';
import { FaultSettingsSchema } from './faults.ts';
import { HttpError, parseOr400 } from './http.ts';
import type { FaultSettings, RuntimeOptions, SandboxOptions } from './types.ts';
import type { SandboxSettings } from './world.ts';

export const DEFAULT_LEGACY_USER_CODE = 'sandbox-user';
export const DEFAULT_LEGACY_API_KEY = 'sandbox-key';
export const DEFAULT_VENDOR = 'svc';
export const DEFAULT_RATE_PER_SECOND = 100;
export const DEFAULT_LOCK_AFTER_MS = 20 * 24 * 60 * 60 * 1000;

const ratePerSecond = z.number().int('must be an integer').positive('must be at least 1');
const lockAfterMs = z.number().int('must be an integer of milliseconds').min(0);

/** Options that `PUT /_sandbox/options` and `control.setOptions` may change. */
export const RuntimeOptionsSchema = z.strictObject({
  duplicates: z.enum(['create', 'reject']).optional(),
  addResponse: z.enum(['bare', 'withId']).optional(),
  ratePerSecond: ratePerSecond.optional(),
  lockAfterMs: lockAfterMs.optional(),
});

const StartOptionsSchema = z.looseObject({
  port: z.number().int().min(0).max(65_535).optional(),
  host: z.string().min(1).optional(),
  token: z.string().min(1, 'must not be empty').optional(),
  legacyUserCode: z
    .string()
    .regex(/^[\x21-\x39\x3b-\x7e]+$/, 'must be printable ASCII without spaces or ":" (HTTP Basic user)')
    .optional(),
  legacyApiKey: z
    .string()
    .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces')
    .optional(),
  vendor: z
    .string()
    .regex(/^[a-z0-9][a-z0-9-]*$/i, 'must be letters, digits and dashes (it goes into header names)')
    .optional(),
  ratePerSecond: ratePerSecond.optional(),
  duplicates: z.enum(['create', 'reject']).optional(),
  addResponse: z.enum(['bare', 'withId']).optional(),
  lockAfterMs: lockAfterMs.optional(),
  autoAcceptAfterMs: lockAfterMs.optional(),
  faults: FaultSettingsSchema.optional(),
  persistPath: z.string().min(1).optional(),
});

/** Checks start options and fills defaults; throws an Error naming the bad option. */
export function resolveSettings(options: SandboxOptions): SandboxSettings {
  const parsed = StartOptionsSchema.safeParse(options);
  if (!parsed.success) {
    const { field, message } = firstIssue(parsed.error);
    throw new Error(`sandbox option ${field}: ${message}`);
  }
  const o = parsed.data;
  return {
    token: o.token ?? SANDBOX_TOKEN,
    legacyUserCode: o.legacyUserCode ?? DEFAULT_LEGACY_USER_CODE,
    legacyApiKey: o.legacyApiKey ?? DEFAULT_LEGACY_API_KEY,
    vendor: (o.vendor ?? DEFAULT_VENDOR).toLowerCase(),
    ratePerSecond: o.ratePerSecond ?? DEFAULT_RATE_PER_SECOND,
    duplicates: o.duplicates ?? 'create',
    addResponse: o.addResponse ?? 'bare',
    lockAfterMs: o.lockAfterMs ?? DEFAULT_LOCK_AFTER_MS,
    autoAcceptAfterMs: o.autoAcceptAfterMs,
  };
}

/** Validates runtime options; a failure is a 400 naming the field (also thrown in process). */
export function parseRuntimeOptions(input: unknown): RuntimeOptions {
  return parseOr400(RuntimeOptionsSchema, input);
}

/** Validates fault settings; unknown route paths are refused so a typo cannot silently disable faults. */
export function parseFaultSettings(input: unknown, knownRoutes: readonly string[]): FaultSettings {
  const faults = parseOr400(FaultSettingsSchema, input);
  const unknown = faults.routes?.findIndex((r) => !knownRoutes.includes(r)) ?? -1;
  if (unknown >= 0) {
    throw new HttpError(
      400,
      `routes.${unknown}: ${faults.routes?.[unknown]} is not an API route (known: ${knownRoutes.join(', ')})`,
      `routes.${unknown}`,
    );
  }
  return faults;
}

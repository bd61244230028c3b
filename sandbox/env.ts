import { SANDBOX_PORT, SANDBOX_TOKEN } from '../local/defaults.ts';
import { resolveSeed } from './ids.ts';
import { parseFaultSettings } from './options.ts';
import { API_ROUTE_PATHS } from './server.ts';
import type { SandboxOptions, SeedIds } from './types.ts';

/** A setting of the sandbox's environment is missing or wrong; the message names the variable. */
export class SandboxEnvError extends Error {
  override readonly name = 'SandboxEnvError';
}

/**
 * Reads the `npm run sandbox` settings from the environment: SANDBOX_PORT (default 4010), SANDBOX_HOST,
 * SANDBOX_TOKEN (default `sandbox-token`), SANDBOX_LEGACY_USER (default `sandbox-user`),
 * SANDBOX_LEGACY_KEY (default `sandbox-key`), SANDBOX_VENDOR, SANDBOX_RATE, SANDBOX_DUPLICATES,
 * SANDBOX_ADD_RESPONSE, SANDBOX_LOCK_AFTER_MS, SANDBOX_AUTO_ACCEPT_AFTER_MS, SANDBOX_FAULTS (JSON),
 * SANDBOX_SEED (JSON) and SANDBOX_PERSIST. Throws SandboxEnvError naming the first bad variable.
 */
export function sandboxOptionsFromEnv(env: NodeJS.ProcessEnv): SandboxOptions {
  const options: SandboxOptions = {
    port: integer(env, 'SANDBOX_PORT', 0, 65_535) ?? SANDBOX_PORT,
    token: env['SANDBOX_TOKEN'] || SANDBOX_TOKEN,
  };
  // Checked by startSandbox, which names the option when one is wrong.
  if (env['SANDBOX_LEGACY_USER']) options.legacyUserCode = env['SANDBOX_LEGACY_USER'];
  if (env['SANDBOX_LEGACY_KEY']) options.legacyApiKey = env['SANDBOX_LEGACY_KEY'];
  const host = env['SANDBOX_HOST'];
  if (host) options.host = host;
  const vendor = env['SANDBOX_VENDOR'];
  if (vendor !== undefined && vendor !== '') {
    if (!/^[a-z0-9][a-z0-9-]*$/i.test(vendor)) {
      throw new SandboxEnvError(`SANDBOX_VENDOR must be letters, digits and dashes (got "${vendor}")`);
    }
    options.vendor = vendor;
  }
  options.ratePerSecond = integer(env, 'SANDBOX_RATE', 1, Number.MAX_SAFE_INTEGER);
  options.duplicates = oneOf(env, 'SANDBOX_DUPLICATES', ['create', 'reject'] as const);
  options.addResponse = oneOf(env, 'SANDBOX_ADD_RESPONSE', ['bare', 'withId'] as const);
  options.lockAfterMs = integer(env, 'SANDBOX_LOCK_AFTER_MS', 0, Number.MAX_SAFE_INTEGER);
  options.autoAcceptAfterMs = integer(env, 'SANDBOX_AUTO_ACCEPT_AFTER_MS', 0, Number.MAX_SAFE_INTEGER);
  const faults = json(env, 'SANDBOX_FAULTS');
  if (faults !== undefined) {
    try {
      // The routes startSandbox and PUT /_sandbox/faults take: the legacy 2.0 ones too.
      options.faults = parseFaultSettings(faults, API_ROUTE_PATHS);
    } catch (error) {
      throw new SandboxEnvError(`SANDBOX_FAULTS: ${messageOf(error)}`);
    }
  }
  const seed = json(env, 'SANDBOX_SEED');
  if (seed !== undefined) {
    if (typeof seed !== 'object' || seed === null || Array.isArray(seed)) {
      throw new SandboxEnvError('SANDBOX_SEED must be a JSON object of seed ids');
    }
    try {
      resolveSeed(seed as Partial<SeedIds>);
    } catch (error) {
      throw new SandboxEnvError(`SANDBOX_SEED: ${messageOf(error)}`);
    }
    options.seed = seed as Partial<SeedIds>;
  }
  const persist = env['SANDBOX_PERSIST'];
  if (persist) options.persistPath = persist;
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as SandboxOptions;
}

function integer(env: NodeJS.ProcessEnv, name: string, min: number, max: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || value < min || value > max) {
    throw new SandboxEnvError(`${name} must be an integer from ${min} to ${max} (got "${raw}")`);
  }
  return value;
}

function oneOf<T extends string>(env: NodeJS.ProcessEnv, name: string, values: readonly T[]): T | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  if (!values.includes(raw as T)) {
    throw new SandboxEnvError(`${name} must be one of ${values.join(', ')} (got "${raw}")`);
  }
  return raw as T;
}

function json(env: NodeJS.ProcessEnv, name: string): unknown {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  try {
    return JSON.parse(raw);
  } catch (error) {
    const detail = error instanceof Error ? error.message : 'unparsable';
    throw new SandboxEnvError(`${name} must be JSON (${detail})`);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

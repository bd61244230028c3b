import { ConfigurationError } from '../errors.ts';
import { parseSources, type SourceConfig } from './sources.ts';

export type Env = Readonly<Record<string, string | undefined>>;

/** Reads a required setting, failing fast with a message that names it. */
export function requireEnv(env: Env, name: string): string {
  const value = env[name];
  if (value === undefined || value.trim() === '') {
    throw new ConfigurationError(`missing required setting ${name}`);
  }
  return value;
}

export function optionalNumber(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0) {
    throw new ConfigurationError(`setting ${name} must be a non-negative number, got "${raw}"`);
  }
  return value;
}

/** `SOURCES`: the JSON array of configured shops (see SourceConfig). */
export function sourcesFromEnv(env: Env): Map<string, SourceConfig> {
  const list = parseSources(requireEnv(env, 'SOURCES'), 'setting SOURCES');
  return new Map(list.map((s) => [s.id, s]));
}

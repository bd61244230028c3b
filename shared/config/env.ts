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

/** The stack's default `queue.maxReceiveCount` (infra/deploy-config.ts). */
export const DEFAULT_MAX_RECEIVE_COUNT = 6;

/**
 * `MAX_RECEIVE_COUNT`: the main queue's redrive `maxReceiveCount`, which the stack gives the worker
 * (6, the stack's default, when unset). A whole number within SQS's bounds, 1 to 1000.
 */
export function maxReceiveCountFromEnv(env: Env): number {
  const raw = env['MAX_RECEIVE_COUNT'];
  if (raw === undefined || raw.trim() === '') return DEFAULT_MAX_RECEIVE_COUNT;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > 1000) {
    throw new ConfigurationError(
      `setting MAX_RECEIVE_COUNT must be a whole number from 1 to 1000 (the main queue's maxReceiveCount), got "${raw}"`,
    );
  }
  return value;
}

/** `SOURCES`: the JSON array of configured shops (see SourceConfig). */
export function sourcesFromEnv(env: Env): Map<string, SourceConfig> {
  const list = parseSources(requireEnv(env, 'SOURCES'), 'setting SOURCES');
  return new Map(list.map((s) => [s.id, s]));
}

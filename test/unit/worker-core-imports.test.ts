import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The worker core (shared/worker/) knows the platform only through its port (`ConversionBackend`):
 * which backend serves a source (the current API or the legacy 2.0 interface) is chosen in the
 * worker's wiring (functions/worker.ts), so a third backend touches no line of the core.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const CORE = join(ROOT, 'shared', 'worker');
/** Concrete platform adapters: the clients and the backends built on them. */
const CONCRETE = [
  'shared/legacy/',
  'shared/affiliate/backend.ts',
  'shared/affiliate/client.ts',
  'shared/affiliate/http.ts',
];

function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)\b[^'"]*?from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1] ?? '');
}

describe('the worker core', () => {
  it('imports no concrete platform backend or client', () => {
    const offending = readdirSync(CORE)
      .filter((name) => name.endsWith('.ts'))
      .flatMap((name) =>
        importsOf(join(CORE, name))
          .filter((spec) => spec.startsWith('.'))
          .map((spec) => relative(ROOT, resolve(CORE, spec)))
          .filter((target) => CONCRETE.some((c) => target === c || target.startsWith(c)))
          .map((target) => `shared/worker/${name} → ${target}`),
      );

    expect(offending).toEqual([]);
  });
});

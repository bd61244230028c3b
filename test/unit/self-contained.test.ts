import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * A clone into an empty directory must work alone: no source file may name a path that leaves the
 * repository (a relative path climbing above the root, or an absolute path of some machine).
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SKIP = new Set(['node_modules', '.git', 'cdk.out', 'coverage', 'reports']);
const SOURCE = /\.(ts|mts|cts|js|mjs|cjs|json)$/;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (SKIP.has(entry.name)) return [];
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return SOURCE.test(entry.name) ? [path] : [];
  });
}

function inside(path: string): boolean {
  return path === ROOT || path.startsWith(ROOT + sep);
}

/** The paths `text` (the content of `file`) names that resolve outside the repository. */
function pathsLeavingRepo(file: string, text: string): string[] {
  const found: string[] = [];
  const base = dirname(file);
  // A quoted relative path ('../x', "./../x", new URL('../../x', import.meta.url)).
  for (const m of text.matchAll(/['"`]((?:\.\.?\/)*\.\.(?:\/[^'"`\s]*)?)['"`]/g)) {
    const path = m[1] ?? '';
    if (!inside(resolve(base, path))) found.push(path);
  }
  // join(here, '..', '..', 'x'): a run of '..' arguments, taken from the file's own directory.
  for (const m of text.matchAll(/(?:['"]\.\.['"]\s*,\s*)+/g)) {
    const ups = (m[0].match(/\.\./g) ?? []).length;
    if (!inside(resolve(base, ...Array<string>(ups).fill('..')))) found.push(m[0].trim());
  }
  // An absolute path of a machine: the team's /work tree, a home directory.
  for (const m of text.matchAll(/['"`]((?:\/work|\/home|\/Users|[A-Z]:\\\\)[^'"`]*)['"`]/g)) {
    found.push(m[1] ?? '');
  }
  return found;
}

describe('a clone of the repository works alone', () => {
  it('finds the paths that would leave the repository', () => {
    const file = join(ROOT, 'test', 'unit', 'platforms', 'support.ts');
    expect(pathsLeavingRepo(file, `const dir = join(here, '../../../../shared/fixtures');`)).toEqual([
      '../../../../shared/fixtures',
    ]);
    expect(pathsLeavingRepo(file, `join(here, '..', '..', '..', '..', 'shared')`)).toHaveLength(1);
    expect(pathsLeavingRepo(file, `readFileSync('/work/shared/api/NOTES.md')`)).toEqual([
      '/work/shared/api/NOTES.md',
    ]);
    expect(pathsLeavingRepo(file, `import { x } from '../../../shared/errors.ts';`)).toEqual([]);
    expect(pathsLeavingRepo(file, `join(here, '..', '..', 'fixtures')`)).toEqual([]);
  });

  it('has no source file naming a path outside the repository', () => {
    const self = fileURLToPath(import.meta.url);
    const offenders = sourceFiles(ROOT)
      .filter((file) => file !== self)
      .flatMap((file) =>
        pathsLeavingRepo(file, readFileSync(file, 'utf8')).map((path) => `${relative(ROOT, file)}: ${path}`),
      );
    expect(offenders).toEqual([]);
  });
});

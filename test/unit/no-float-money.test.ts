import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Amounts enter the connector only as decimal strings (webhook bodies, the finance API) or as
 * integers of minor units (Stripe), and leave it as integers. The only way a float can creep into
 * an amount is a decimal string turned into a JS number and scaled: `parseFloat("0.29") * 100` is
 * 28.999999999999996, and `toFixed` rounds binary fractions. So if no source file in shared/,
 * functions/, cli/ or sandbox/ calls `parseFloat` / `toFixed` or scales by 100 (`* 100`, `/ 100`),
 * no amount can go through float arithmetic; `shared/money.ts` parses the digits as strings instead.
 * Comments are stripped before the scan, so documenting the pitfall stays allowed.
 */
const FORBIDDEN: ReadonlyArray<readonly [string, RegExp]> = [
  ['parseFloat(', /\bparseFloat\s*\(/],
  ['toFixed(', /\.toFixed\s*\(/],
  ['* 100', /\*\s*100(?![\d_.])/],
  ['/ 100', /\/\s*100(?![\d_.])/],
];

/** Files allowed to use a pattern, each with why it is not money. */
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  // Formats the sandbox's `retry-after` seconds header (milliseconds / 1000), not an amount.
  'sandbox/rate-limit.ts': ['toFixed('],
  // The legacy 2.0 interface itself speaks floats of major units. This file is the one boundary:
  // `toFixed(exponent)` turns the platform's float back into a decimal string for parseMoney, and
  // `2 ** 53 / 100` is the bound below which that round trip is exact (LEGACY_MAX_EXACT_MINOR).
  'shared/legacy/backend.ts': ['toFixed(', '/ 100'],
};

const root = fileURLToPath(new URL('../../', import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) => relative(root, join(e.parentPath, e.name)));
}

/** Drops block and line comments, keeping line numbers; a `//` inside a literal is rare enough here. */
function withoutComments(text: string): string {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, ''))
    .replace(/(^|[^:\\'"`])\/\/.*$/gm, '$1');
}

describe('no float arithmetic on amounts', () => {
  it('finds no parseFloat, toFixed or scaling by 100 in shared/, functions/, cli/ and sandbox/ outside the allow-list', () => {
    const files = ['shared', 'functions', 'cli', 'sandbox'].flatMap((dir) => sourceFiles(dir));
    const found: string[] = [];

    for (const file of files) {
      const lines = withoutComments(readFileSync(join(root, file), 'utf8')).split('\n');
      for (const [name, pattern] of FORBIDDEN) {
        if (ALLOWED[file]?.includes(name)) continue;
        lines.forEach((line, i) => {
          if (pattern.test(line)) found.push(`${file}:${i + 1}: ${name}`);
        });
      }
    }

    expect(files.length).toBeGreaterThan(20);
    expect(files).toContain('shared/money.ts');
    expect(found).toEqual([]);
  });

  it('recognizes each forbidden pattern (the scan can fail)', () => {
    const samples = ['Number.parseFloat(x)', 'amount.toFixed(2)', 'value * 100', 'cents / 100'];

    const matched = samples.map((s) =>
      FORBIDDEN.filter(([, p]) => p.test(withoutComments(s))).map(([n]) => n),
    );

    expect(matched).toEqual([['parseFloat('], ['toFixed('], ['* 100'], ['/ 100']]);
    expect(FORBIDDEN.some(([, p]) => p.test(withoutComments('// parseFloat("0.29") * 100')))).toBe(false);
    expect(FORBIDDEN.some(([, p]) => p.test('ms / 1000'))).toBe(false);
  });
});

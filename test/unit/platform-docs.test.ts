import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { LOCAL_SECRETS } from '../../local/defaults.ts';
import { SOURCE_PLATFORMS } from '../../shared/domain/platforms.ts';

/**
 * The docs' platform tables follow `SOURCE_PLATFORMS`: a platform added to the list without its row
 * in README's contract table (its webhook URL and local secret) and in docs/shop-platforms.md's
 * tables (signature and dedup key, attribution) fails here, and so does a row left for a platform
 * that is gone.
 */

const root = new URL('../../', import.meta.url);
const readme = readFileSync(new URL('README.md', root), 'utf8');
const shopPlatforms = readFileSync(new URL('docs/shop-platforms.md', root), 'utf8');

/** The Markdown tables of a page: each a list of rows of cells, header first, separator row left out. */
function tables(markdown: string): string[][][] {
  const found: string[][][] = [];
  let current: string[][] | undefined;
  for (const line of markdown.split('\n')) {
    if (!line.trimStart().startsWith('|')) {
      current = undefined;
      continue;
    }
    const cells = line
      .trim()
      .replace(/^\|/, '')
      .replace(/(?<!\\)\|$/, '')
      .split(/(?<!\\)\|/)
      .map((cell) => cell.trim());
    if (cells.every((cell) => /^:?-+:?$/.test(cell))) continue;
    if (current === undefined) {
      current = [];
      found.push(current);
    }
    current.push(cells);
  }
  return found;
}

/** The value cell of README's contract table row named `what`. */
function contractRow(what: string): string {
  const table = tables(readme).find((t) => t[0]?.[0] === 'what' && t[0]?.[1] === 'value');
  const row = table?.find((cells) => cells[0] === what);
  if (row?.[1] === undefined) throw new Error(`README's contract table has no "${what}" row`);
  return row[1];
}

/** The platforms named by the first cells of docs/shop-platforms.md's tables whose first column is `platform`. */
function platformColumns(): string[][] {
  return tables(shopPlatforms)
    .filter((t) => t[0]?.[0] === 'platform')
    .map((t) => t.slice(1).map((cells) => (cells[0] ?? '').toLowerCase()));
}

describe('the docs list every shop platform', () => {
  it("README's contract table gives a webhook URL for each platform, and only for them", () => {
    // Act
    const route = /POST \/webhooks\/\{([^}]*)\}/.exec(contractRow('ingest HTTP'))?.[1];

    // Assess
    expect(route?.split('\\|')).toEqual([...SOURCE_PLATFORMS]);
  });

  it.each(SOURCE_PLATFORMS)("README's contract table names the %s source's local secret", (platform) => {
    // Prepare: the local stack reads each platform's secret from <PLATFORM>_WEBHOOK_SECRET
    const variable = `${platform.toUpperCase()}_WEBHOOK_SECRET`;

    // Act / Assess
    expect(Object.keys(LOCAL_SECRETS)).toContain(variable);
    expect(contractRow('webhook secrets')).toContain(`\`${variable}\``);
  });

  it("docs/shop-platforms.md's platform tables have one row per platform, in the list's order", () => {
    // Act
    const columns = platformColumns();

    // Assess: the signature table and the attribution table
    expect(columns).toHaveLength(2);
    for (const column of columns) expect(column).toEqual([...SOURCE_PLATFORMS]);
  });
});

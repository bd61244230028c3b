import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../cli/program.ts';
import { githubSlug, type MarkdownDoc, namedCommands, readMarkdown } from '../support/markdown.ts';

/**
 * The README and docs/ are what a newcomer follows: a link that leads nowhere or a command that
 * does not exist is a broken promise. Links are checked against the files and GitHub's heading
 * anchors; commands against package.json and the CLI's own commander program, so renaming a script,
 * a command or an option without updating the docs fails here.
 */

const root = fileURLToPath(new URL('../../', import.meta.url));
const docsDir = join(root, 'docs');

const pages = [
  'README.md',
  ...(existsSync(docsDir)
    ? readdirSync(docsDir)
        .filter((name) => name.endsWith('.md'))
        .sort()
        .map((name) => `docs/${name}`)
    : []),
];

const parsed = new Map<string, MarkdownDoc>(
  pages.map((page) => [page, readMarkdown(readFileSync(join(root, page), 'utf8'))]),
);

function doc(page: string): MarkdownDoc {
  const found = parsed.get(page) ?? readMarkdown(readFileSync(join(root, page), 'utf8'));
  parsed.set(page, found);
  return found;
}

/** Problems with one link, or none: a relative file that exists and, for an anchor, its heading. */
function checkLink(page: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // https:, mailto:: not ours to check
  const [pathPart = '', anchor] = target.split('#', 2);
  const file = pathPart === '' ? join(root, page) : resolve(dirname(join(root, page)), decodeURI(pathPart));
  const inRepo = relative(root, file);
  if (inRepo.startsWith('..')) return `${target} leaves the repository`;
  if (!existsSync(file)) return `${target}: no file ${inRepo}`;
  if (anchor === undefined) return undefined;
  if (!statSync(file).isFile() || !file.endsWith('.md')) return `${target}: anchor into a non-Markdown file`;
  const anchors = doc(inRepo).anchors;
  return anchors.has(decodeURIComponent(anchor))
    ? undefined
    : `${target}: no heading #${anchor} in ${inRepo}`;
}

const packageJson = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
  bin: Record<string, string>;
};
// npm's own commands the docs may name; `start`/`test` also need their script.
const NPM_BUILTINS = new Set(['ci', 'install', 'run', 'exec']);
const NPM_SCRIPT_SHORTCUTS = new Set(['start', 'test', 'stop', 'restart']);

function checkNpm(words: readonly string[]): string | undefined {
  const [first, second] = words;
  if (first === undefined || !/^[\w:.-]+$/.test(first)) return undefined; // `npm …`
  if (first === 'run') {
    if (second === undefined || !/^[\w:.-]+$/.test(second)) return undefined; // `npm run …`
    return second in packageJson.scripts
      ? undefined
      : `npm run ${second}: no script "${second}" in package.json`;
  }
  if (NPM_SCRIPT_SHORTCUTS.has(first)) {
    return first in packageJson.scripts ? undefined : `npm ${first}: no script "${first}" in package.json`;
  }
  return NPM_BUILTINS.has(first) ? undefined : `npm ${first}: not an npm command (npm run ${first}?)`;
}

const program = buildProgram({
  stdout: { write: () => true },
  stderr: { write: () => true },
  env: {},
  cwd: root,
});

function findCommand(parent: Command, name: string): Command | undefined {
  return parent.commands.find((c) => c.name() === name || c.aliases().includes(name));
}

function hasOption(chain: readonly Command[], flag: string): boolean {
  const name = flag.split('=', 1)[0] ?? flag;
  if (name === '--help' || name === '-h') return true;
  return chain.some((c) => c.options.some((o) => o.long === name || o.short === name));
}

/** `npx connector <command> [<subcommand>] [--option …]` against the commander program. */
function checkConnector(args: readonly string[]): string | undefined {
  const chain: Command[] = [program];
  let command = program;
  const positional: string[] = [];
  for (const word of args) {
    if (word.startsWith('-')) {
      if (!/^--?[a-z]/i.test(word)) continue;
      if (!hasOption(chain, word)) return `npx connector ${args.join(' ')}: no option ${word}`;
      continue;
    }
    const commandPosition =
      positional.length === chain.length - 1 && (command === program || command.commands.length > 0);
    if (commandPosition) {
      // A placeholder (`<command>`, `…`) names no command: nothing more to check.
      if (!/^[a-z][\w-]*$/.test(word)) return undefined;
      const sub = findCommand(command, word);
      if (!sub) return `npx connector ${args.join(' ')}: no command "${word}"`;
      chain.push(sub);
      command = sub;
    }
    positional.push(word);
  }
  return undefined;
}

function checkNpx(words: readonly string[]): string | undefined {
  const [bin, ...args] = words;
  if (bin === undefined || !/^[a-z][\w.-]*$/.test(bin)) return undefined; // `npx …`
  if (bin in packageJson.bin) return checkConnector(args);
  return existsSync(join(root, 'node_modules', '.bin', bin))
    ? undefined
    : `npx ${bin}: no such binary in node_modules/.bin`;
}

describe('the docs a newcomer follows', () => {
  it('keeps the README a front page: at most 300 lines, linking every page of docs/', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const linked = new Set(doc('README.md').links.map((l) => l.target.split('#', 1)[0]));

    // Lines as `wc -l` counts them.
    expect(readme.match(/\n/g)?.length ?? 0).toBeLessThanOrEqual(300);
    expect(pages.filter((p) => p.startsWith('docs/') && !linked.has(p))).toEqual([]);
    expect(pages.length).toBeGreaterThan(1);
  });

  it('opens every docs page with a title and who it is for', () => {
    const openings = pages
      .filter((p) => p.startsWith('docs/'))
      .map((p) => {
        const lines = readFileSync(join(root, p), 'utf8').split('\n');
        const firstProse = lines.slice(1).find((l) => l.trim() !== '') ?? '';
        return {
          page: p,
          title: lines[0]?.startsWith('# ') ?? false,
          forWhom: firstProse.startsWith('**For** '),
        };
      });

    expect(openings.filter((o) => !o.title || !o.forWhom)).toEqual([]);
  });

  it('resolves every relative link in README.md and docs/*.md to a file, and every #anchor to a heading', () => {
    const broken = pages.flatMap((page) =>
      doc(page).links.flatMap(({ target, line }) => {
        const problem = checkLink(page, target);
        return problem ? [`${page}:${line}: ${problem}`] : [];
      }),
    );

    expect(broken).toEqual([]);
  });

  it('names only npm scripts, binaries and connector commands and options that exist', () => {
    const commands = pages.flatMap((page) =>
      namedCommands(doc(page).code).map((command) => ({ page, ...command })),
    );
    const unknown = commands.flatMap(({ page, tool, words, line }) => {
      const problem = tool === 'npm' ? checkNpm(words) : checkNpx(words);
      return problem ? [`${page}:${line}: ${problem}`] : [];
    });

    expect(unknown).toEqual([]);
    // The scan itself must see the commands the README is built around.
    const seen = commands.map((c) => `${c.tool} ${c.words.slice(0, 2).join(' ')}`);
    expect(seen).toEqual(expect.arrayContaining(['npm ci', 'npm start', 'npm test', 'npx connector send']));
  });
});

describe('the checks themselves', () => {
  it('derives anchors the way GitHub does', () => {
    expect(githubSlug('The `connector` command line')).toBe('the-connector-command-line');
    expect(githubSlug('Benchmarks (`npm run bench`)')).toBe('benchmarks-npm-run-bench');
    expect(githubSlug('1. Create the secrets')).toBe('1-create-the-secrets');
    expect(githubSlug('Try it: send a signed sample — and see it')).toBe(
      'try-it-send-a-signed-sample--and-see-it',
    );
    expect(githubSlug('Retries, deadline and timeouts')).toBe('retries-deadline-and-timeouts');
    expect(githubSlug('`retry_after` and [links](x.md)')).toBe('retry_after-and-links');
  });

  it('numbers repeated headings and ignores headings, links and commands inside code blocks', () => {
    const sample = readMarkdown(
      [
        '# Sandbox',
        '## Sandbox',
        'See [the API](api.md#routes) and `[not a link](nowhere.md)`.',
        '```sh',
        '# not a heading',
        'npm run nothing-here   # [no link](x.md)',
        '```',
        'Run `npx connector send shopify --click-id x`.',
      ].join('\n'),
    );

    expect([...sample.anchors]).toEqual(['sandbox', 'sandbox-1']);
    expect(sample.links).toEqual([{ target: 'api.md#routes', line: 3 }]);
    expect(namedCommands(sample.code).map((c) => [c.tool, ...c.words].join(' '))).toEqual([
      'npm run nothing-here',
      'npx connector send shopify --click-id x',
    ]);
  });

  it('reports a broken file, a broken anchor, an unknown script, command and option', () => {
    expect(checkLink('README.md', 'docs/no-such-page.md')).toMatch(/no file docs\/no-such-page\.md/);
    expect(checkLink('README.md', '#no-such-heading')).toMatch(/no heading #no-such-heading in README\.md/);
    expect(checkLink('README.md', '../outside.md')).toMatch(/leaves the repository/);
    expect(checkLink('README.md', 'package.json')).toBeUndefined();
    expect(checkNpm(['run', 'no-such-script'])).toMatch(/no script "no-such-script"/);
    expect(checkNpm(['typecheck'])).toMatch(/not an npm command/);
    expect(checkNpm(['run', 'typecheck'])).toBeUndefined();
    expect(checkNpx(['connector', 'sned', 'shopify'])).toMatch(/no command "sned"/);
    expect(checkNpx(['connector', 'dlq', 'lsit'])).toMatch(/no command "lsit"/);
    expect(checkNpx(['connector', 'dlq', 'replay', '--dry-run', '--yes'])).toBeUndefined();
    expect(checkNpx(['connector', 'send', 'shopify', '--click-idd', 'x'])).toMatch(/no option --click-idd/);
    expect(checkNpx(['connector', 'status', '1001', '--json'])).toBeUndefined();
    expect(checkNpx(['no-such-bin'])).toMatch(/no such binary/);
  });
});

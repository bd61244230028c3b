/**
 * Just enough Markdown reading to check the docs: links and headings outside code, and the code
 * (fenced blocks and inline spans) where commands are written. Not a Markdown parser: the docs keep
 * to plain CommonMark (no nested backtick runs, no HTML blocks other than anchors).
 */

export interface MarkdownLink {
  readonly target: string;
  readonly line: number;
}

export interface MarkdownCode {
  readonly text: string;
  readonly line: number;
}

export interface MarkdownDoc {
  readonly links: readonly MarkdownLink[];
  /** The anchors GitHub gives the headings (with its `-1`, `-2` suffixes), plus explicit `<a id>`s. */
  readonly anchors: ReadonlySet<string>;
  /** Fenced blocks line by line, and inline code spans. */
  readonly code: readonly MarkdownCode[];
}

const FENCE = /^\s*(`{3,}|~{3,})/;
const INLINE_CODE = /`([^`\n]+(?:\n[^`\n]+)*)`/g;
const LINK = /!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g;
const REFERENCE_LINK = /^\s{0,3}\[[^\]]+\]:\s*<?([^\s>]+)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/;
const HTML_ANCHOR = /<a\s+(?:id|name)="([^"]+)"/g;

/**
 * The anchor GitHub derives from a heading's text (github-slugger): lower case, every character
 * that is not a letter, mark, number, connector (`_`), hyphen or space dropped, spaces to hyphens.
 * Markup is dropped first: code backticks, emphasis stars, link targets.
 */
export function githubSlug(heading: string): string {
  const text = heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .trim();
  return text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Line numbers (1-based) of each offset's line, for reporting inline code found across lines. */
function lineAt(text: string, offset: number): number {
  let line = 1;
  for (let i = 0; i < offset; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

export function readMarkdown(source: string): MarkdownDoc {
  const links: MarkdownLink[] = [];
  const anchors = new Set<string>();
  const code: MarkdownCode[] = [];
  const seen = new Map<string, number>();
  // Prose with the fenced blocks blanked out (lines kept, so line numbers stay right).
  const prose: string[] = [];
  let fence: string | undefined;

  source.split('\n').forEach((text, index) => {
    const line = index + 1;
    const marker = FENCE.exec(text)?.[1];
    if (fence !== undefined) {
      if (marker && marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      else code.push({ text, line });
      prose.push('');
      return;
    }
    if (marker) {
      fence = marker;
      prose.push('');
      return;
    }
    prose.push(text);
    const heading = HEADING.exec(text);
    if (heading) {
      const base = githubSlug(heading[2] ?? '');
      const count = seen.get(base) ?? 0;
      seen.set(base, count + 1);
      anchors.add(count === 0 ? base : `${base}-${count}`);
    }
    for (const match of text.matchAll(HTML_ANCHOR)) anchors.add(match[1] ?? '');
  });

  const text = prose.join('\n');
  for (const match of text.matchAll(INLINE_CODE)) {
    code.push({ text: (match[1] ?? '').replace(/\n/g, ' '), line: lineAt(text, match.index) });
  }
  // Inline code is not a link: blank it (same length, so offsets still give the right line).
  const withoutCode = text.replace(INLINE_CODE, (span) => span.replace(/[^\n]/g, 'x'));
  for (const match of withoutCode.matchAll(LINK)) {
    links.push({ target: match[1] ?? '', line: lineAt(withoutCode, match.index) });
  }
  withoutCode.split('\n').forEach((lineText, index) => {
    const reference = REFERENCE_LINK.exec(lineText);
    if (reference) links.push({ target: reference[1] ?? '', line: index + 1 });
  });
  return { links, anchors, code };
}

/** A command as written in the docs: `npm …` or `npx <bin> …`, its words up to a shell operator. */
export interface NamedCommand {
  readonly tool: 'npm' | 'npx';
  readonly words: readonly string[];
  readonly line: number;
}

const COMMAND_START = /(?:^|[\s;&|(`$"'])(npm|npx)\s+/g;
const COMMAND_END = new Set(['|', '||', '&&', ';', '>', '>>', '2>', '#', '\\', '<', ')']);

/** Every `npm …` / `npx …` in the code of a document, split into words. */
export function namedCommands(code: readonly MarkdownCode[]): NamedCommand[] {
  const commands: NamedCommand[] = [];
  for (const { text, line } of code) {
    for (const match of text.matchAll(COMMAND_START)) {
      const rest = text.slice(match.index + match[0].length);
      const words: string[] = [];
      for (const word of rest.split(/\s+/)) {
        if (word === '' || COMMAND_END.has(word) || word.startsWith('#')) break;
        const cut = word.search(/[;|&)`]/);
        if (cut === 0) break;
        words.push((cut > 0 ? word.slice(0, cut) : word).replace(/["']/g, ''));
        if (cut > 0) break;
      }
      commands.push({ tool: match[1] as 'npm' | 'npx', words, line });
    }
  }
  return commands;
}

import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, posix, relative, sep } from 'node:path';
import ts from 'typescript';

/** Repository-relative source file (`shared/ingest.ts`) → the repository files it imports. */
export type ImportGraph = ReadonlyMap<string, readonly string[]>;

/** An import that breaks a rule, `from -> to`, with the rule's words. */
export interface Violation {
  readonly from: string;
  readonly to: string;
  readonly rule: string;
}

/** The TypeScript sources (declarations aside) under these top-level folders, repository-relative. */
export function sourceFiles(root: string, dirs: readonly string[]): string[] {
  return dirs
    .filter((dir) => existsSync(join(root, dir)))
    .flatMap((dir) =>
      readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
        .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
        .map((e) => relative(root, join(e.parentPath, e.name)).split(sep).join('/')),
    )
    .sort();
}

/**
 * Every module specifier of a source: static imports, `import type`, re-exports (`export … from`),
 * side-effect imports and `import('…')` with a literal. TypeScript's own pre-parser reads them, so
 * an import split over lines or written in a comment is judged as the compiler judges it.
 */
export function specifiersOf(text: string): string[] {
  return ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
}

/** The import graph of these files: relative specifiers resolved to repository paths; packages left out. */
export function importGraph(root: string, files: readonly string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    graph.set(
      file,
      specifiersOf(text)
        .filter((s) => s.startsWith('.'))
        .map((s) => posix.normalize(posix.join(posix.dirname(file), s))),
    );
  }
  return graph;
}

/** Every edge of the graph, as `[from, to]`. */
export function edges(graph: ImportGraph): Array<readonly [string, string]> {
  return [...graph].flatMap(([from, tos]) => tos.map((to) => [from, to] as const));
}

/** The files reachable from `entries` by following imports (the entries included). */
export function reachable(graph: ImportGraph, entries: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const todo = [...entries];
  for (let file = todo.pop(); file !== undefined; file = todo.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    todo.push(...(graph.get(file) ?? []));
  }
  return seen;
}

/** Each import circle once, as `a -> b -> a` (found by depth-first search, so one per back edge). */
export function circles(graph: ImportGraph): string[] {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const found: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    path.push(file);
    for (const next of graph.get(file) ?? []) {
      const seen = state.get(next);
      if (seen === 'open') found.push([...path.slice(path.indexOf(next)), next].join(' -> '));
      else if (seen === undefined && graph.has(next)) visit(next);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return found;
}

/** True when `file` is `prefix` itself, or inside it when `prefix` ends with `/`. */
export function within(file: string, prefix: string): boolean {
  return prefix.endsWith('/') ? file.startsWith(prefix) : file === prefix;
}

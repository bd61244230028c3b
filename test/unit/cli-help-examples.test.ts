import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../cli/io.ts';
import { buildProgram, run } from '../../cli/program.ts';

/**
 * docs/cli.md promises that every command has `--help` with examples: a new user reads the command's
 * own help before the docs. Each command that does something (not a group of commands) shows at least
 * one `$ npx connector <command> …` line.
 */

const silent: CliIo = { stdout: { write: () => true }, stderr: { write: () => true }, env: {}, cwd: '/' };

function leafCommands(command: Command, path: readonly string[] = []): string[][] {
  return command.commands
    .filter((c) => c.name() !== 'help')
    .flatMap((c) => (c.commands.length > 0 ? leafCommands(c, [...path, c.name()]) : [[...path, c.name()]]));
}

async function helpOf(path: readonly string[]): Promise<{ code: number; text: string }> {
  let text = '';
  const code = await run([...path, '--help'], {
    ...silent,
    stdout: { write: (t: string) => (text += t) },
    stderr: { write: (t: string) => (text += t) },
  });
  return { code, text };
}

describe('connector <command> --help', () => {
  it('shows examples of the command itself for every command', async () => {
    // Prepare
    const commands = leafCommands(buildProgram(silent));
    // Act
    const helps = await Promise.all(commands.map(async (path) => ({ path, ...(await helpOf(path)) })));
    // Assess
    expect(commands).toEqual(expect.arrayContaining([['reservations'], ['dlq', 'show'], ['dlq', 'discard']]));
    const without = helps
      .filter(
        (h) =>
          h.code !== 0 ||
          !h.text.includes(`\nExamples:\n`) ||
          !h.text.includes(`$ npx connector ${h.path.join(' ')}`),
      )
      .map((h) => h.path.join(' '));
    expect(without).toEqual([]);
  });
});

import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../cli/program.ts';

/** Every command and subcommand under `parent`, with its path (`dlq replay`). */
function allCommands(parent: Command, prefix = ''): { path: string; command: Command }[] {
  return parent.commands.flatMap((command) => {
    const path = `${prefix}${command.name()}`;
    return [{ path, command }, ...allCommands(command, `${path} `)];
  });
}

describe('the commands’ --help', () => {
  it('leaves the wrapping of each description to commander, so no line breaks half-way', () => {
    // Prepare: commander wraps a description to the terminal's width; a hard line break inside it
    // is kept as well, so at 80 columns `status --help` read "… with its" / "refunds. Exit code …".
    const program = buildProgram({
      stdout: { write: () => true },
      stderr: { write: () => true },
      env: {},
      cwd: process.cwd(),
    });
    // Act
    const broken = allCommands(program)
      .filter(({ command }) => command.description().includes('\n'))
      .map(({ path }) => path);
    // Assess
    expect(broken).toEqual([]);
  });
});

import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../cli/io.ts';
import { rowProgress } from '../../cli/progress.ts';

/**
 * Where a run's per-row lines go: stdout is the command's output. A text report takes them there
 * (the plain log of CI); JSON or CSV must reach a program alone, so the lines go to stderr.
 */
function capture(tty: { stdout: boolean; stderr: boolean }) {
  const written = { stdout: '', stderr: '' };
  const io: CliIo = {
    stdout: { write: (t: string) => (written.stdout += t), isTTY: tty.stdout },
    stderr: { write: (t: string) => (written.stderr += t), isTTY: tty.stderr },
    env: {},
    cwd: '.',
  };
  return { io, written };
}

function runTwoRows(io: CliIo, format: 'text' | 'json' | 'csv'): void {
  const progress = rowProgress(io, 2, 'backfill', format);
  progress.row('order 1001: queued');
  progress.row('order 1002: already applied');
  progress.stop();
}

describe('rowProgress and a command whose stdout carries data', () => {
  it.each(['json', 'csv'] as const)(
    '%s: with stderr a pipe, the [i/n] lines go to stderr and stdout stays empty',
    (format) => {
      // Prepare
      const { io, written } = capture({ stdout: false, stderr: false });
      // Act
      runTwoRows(io, format);
      // Assess
      expect(written.stdout).toBe('');
      expect(written.stderr).toBe('[1/2] order 1001: queued\n[2/2] order 1002: already applied\n');
    },
  );

  it('json: with stderr a terminal, the bar and the lines are on stderr and stdout stays empty', () => {
    // Prepare
    const { io, written } = capture({ stdout: false, stderr: true });
    // Act
    runTwoRows(io, 'json');
    // Assess
    expect(written.stdout).toBe('');
    expect(written.stderr).toContain('order 1001: queued\n');
    expect(written.stderr).toContain('order 1002: already applied\n');
  });
});

describe('rowProgress and a text report', () => {
  it('with stderr a pipe (CI), writes the plain [i/n] log on stdout, as before', () => {
    // Prepare
    const { io, written } = capture({ stdout: false, stderr: false });
    // Act
    runTwoRows(io, 'text');
    // Assess
    expect(written.stdout).toBe('[1/2] order 1001: queued\n[2/2] order 1002: already applied\n');
    expect(written.stderr).toBe('');
  });

  it('with stderr a terminal and stdout redirected, writes each line to stdout unchanged', () => {
    // Prepare
    const { io, written } = capture({ stdout: false, stderr: true });
    // Act
    runTwoRows(io, 'text');
    // Assess
    expect(written.stdout).toBe('order 1001: queued\norder 1002: already applied\n');
    expect(written.stderr).not.toContain('order 1001');
  });
});

import { describe, expect, it } from 'vitest';
import type { CliIo } from '../../cli/io.ts';
import { failureExit } from '../../cli/program.ts';
import { ConfigurationError, TransientError } from '../../shared/errors.ts';

/**
 * The CLI's exit codes (`connector --help`): 2 for a missing or wrong setting, 1 for work that
 * failed. A command that lets a `ConfigurationError` through (a secret that cannot be read, a
 * setting a new command forgot to convert) still exits 2 with its one line, no stack trace.
 */
/** An io whose stderr the test reads. */
function memoryIo(): { io: CliIo; stderr: () => string } {
  let text = '';
  const io: CliIo = {
    stdout: { write: () => true },
    stderr: { write: (t: string) => (text += t) },
    env: {},
    cwd: '/',
  };
  return { io, stderr: () => text };
}

describe('the exit code of a command that threw', () => {
  it('is 2 for a ConfigurationError, its message on stderr', () => {
    // Prepare
    const { io, stderr } = memoryIo();

    // Act
    const code = failureExit(new ConfigurationError('missing setting FINANCE_API_URL'), io);

    // Assess
    expect({ code, stderr: stderr() }).toEqual({
      code: 2,
      stderr: 'error: missing setting FINANCE_API_URL\n',
    });
  });

  it('is 1 for work that failed', () => {
    // Prepare
    const { io, stderr } = memoryIo();

    // Act
    const code = failureExit(new TransientError('the platform answered 503'), io);

    // Assess
    expect(code).toBe(1);
    expect(stderr()).toContain('the platform answered 503');
    expect(stderr()).not.toContain('    at ');
  });
});

import { afterEach, beforeEach, vi } from 'vitest';

/**
 * What the process writes to stdout and stderr in each test of the file that calls this at its top
 * level: Powertools' logger writes a JSON line per call there. Emptied before each test; the streams
 * are given back after it.
 */
export function captureOutput(): string[] {
  const written: string[] = [];
  beforeEach(() => {
    written.length = 0;
    const capture = (chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    };
    vi.spyOn(process.stdout, 'write').mockImplementation(capture);
    vi.spyOn(process.stderr, 'write').mockImplementation(capture);
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  return written;
}

import { closeSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What one `npm start` holds on this machine, so that a second one neither shares it nor takes it
 * away: the LOCAL_DATA_DIR (dynalite's LevelDB and fauxqs's SQLite file are one process's each: a
 * second dynalite on the same directory dies of "Database is closed" after fauxqs opened the file),
 * and the `.local-stack.json` of the directory it was started from (the CLI follows one stack).
 */

/** The file in LOCAL_DATA_DIR naming the process that uses it. */
export const DATA_DIR_LOCK = 'npm-start.pid';

/** Another live process holds the LOCAL_DATA_DIR. */
export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';
  readonly dir: string;
  readonly pid: number;
  constructor(dir: string, pid: number) {
    super(
      `LOCAL_DATA_DIR ${dir} is in use by another npm start (pid ${pid}): stop that one first, or give this ` +
        `one another LOCAL_DATA_DIR (if pid ${pid} is no npm start, delete ${join(dir, DATA_DIR_LOCK)})`,
    );
    this.dir = dir;
    this.pid = pid;
  }
}

/** Whether a process with this id runs (EPERM: it does, as another user). */
export function isRunning(pid: unknown): pid is number {
  if (typeof pid !== 'number' || !Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes `dir` for this process, or throws `DataDirInUseError` while a live process holds it. The
 * lock of a process that died (`kill -9`, a crash) is taken over. Returns what gives it back.
 */
export function claimDataDir(dir: string, pid = process.pid): () => void {
  const lock = join(dir, DATA_DIR_LOCK);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(lock, 'wx');
      writeSync(fd, String(pid));
      closeSync(fd);
      return () => {
        if (readPid(lock) === pid) rmSync(lock, { force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = readPid(lock);
    if (holder !== pid && isRunning(holder)) throw new DataDirInUseError(dir, holder);
    rmSync(lock, { force: true });
  }
  throw new Error(`could not take ${lock}: another npm start is starting on LOCAL_DATA_DIR ${dir}`);
}

function readPid(path: string): number | undefined {
  try {
    return Number(readFileSync(path, 'utf8').trim());
  } catch {
    return undefined;
  }
}

/**
 * Writes the state file of the stack run by `pid`. A live stack's file found there is kept aside
 * and written back when this one stops, so that the CLI goes back to it; a file another stack wrote
 * since is left alone. Returns the pid of the stack found running, and what to call on stop.
 */
export function writeStateFile(
  path: string,
  state: Record<string, unknown>,
  pid = process.pid,
): { readonly runningBefore: number | undefined; release(): void } {
  const found = readState(path);
  const previous = found && found['pid'] !== pid && isRunning(found['pid']) ? found : undefined;
  writeFileSync(path, JSON.stringify({ ...state, pid }, null, 2));
  return {
    runningBefore: previous?.['pid'] as number | undefined,
    release() {
      if (readState(path)?.['pid'] !== pid) return;
      if (previous && isRunning(previous['pid'])) writeFileSync(path, JSON.stringify(previous, null, 2));
      else rmSync(path, { force: true });
    },
  };
}

function readState(path: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

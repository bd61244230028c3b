import { MultiBar, Presets, SingleBar } from 'cli-progress';
import { type CliIo, type OutputStream, printable, writeLine } from './io.ts';

/**
 * Progress of a run over rows or messages. On a terminal (stderr is a TTY) a cli-progress bar on
 * stderr, with each row's outcome printed above it; otherwise (a pipe, a log file, CI) one plain
 * line per row, prefixed `[i/n]`, and no control characters. Either way a row's line is made
 * `printable`: it carries ids and reasons shops wrote. Where the rows' lines go is decided by the
 * command's output format, which every caller states: a `text` report takes them on stdout (the
 * plain log CI keeps); `json` or `csv` keeps stdout for the data alone, and they go to stderr.
 */
export interface RowProgress {
  /** One row is done; `line` is its outcome. */
  row(line: string): void;
  /** The total turned out larger (messages that appeared while replaying). */
  grow(total: number): void;
  stop(): void;
}

/** What the command prints on stdout: a report for people (`text`), or data for a program. */
export type OutputFormat = 'text' | 'json' | 'csv';

/**
 * `format`: the command's output on stdout; anything but `text` gets no row line there.
 * `more`: rows may come up that the total does not count yet (DLQ messages behind the ones read);
 * the plain lines then show the total so far as a lower bound, `[2/2+]`, instead of claiming it.
 */
export function rowProgress(
  io: CliIo,
  total: number,
  label: string,
  format: OutputFormat,
  options: { readonly more?: boolean } = {},
): RowProgress {
  let done = 0;
  let expected = total;
  const open = options.more === true ? '+' : '';
  const report = format === 'text';
  if (!io.stderr.isTTY) {
    const lines: OutputStream = report ? io.stdout : io.stderr;
    return {
      row(line) {
        done++;
        writeLine(lines, `[${done}/${Math.max(expected, done)}${open}] ${printable(line)}`);
      },
      grow(next) {
        expected = Math.max(expected, next);
      },
      stop() {},
    };
  }
  const bars = new MultiBar(
    {
      stream: io.stderr as NodeJS.WritableStream,
      format: `${label} [{bar}] {value}/{total}  {percentage}%  eta {eta_formatted}`,
      // A hidden cursor would stay hidden after Ctrl-C.
      hideCursor: false,
      clearOnComplete: false,
      stopOnComplete: false,
    },
    Presets.shades_classic,
  );
  const bar = bars.create(total, 0);
  return {
    row(unsafeLine) {
      done++;
      const line = printable(unsafeLine);
      // Above the bar on a shared terminal, or when stdout holds data; a report's redirected stdout
      // gets it unchanged.
      if (!report || io.stdout.isTTY) bars.log(`${line}\n`);
      else writeLine(io.stdout, line);
      if (done > expected) {
        expected = done;
        bar.setTotal(expected);
      }
      bar.increment();
    },
    grow(next) {
      if (next > expected) {
        expected = next;
        bar.setTotal(expected);
      }
    },
    stop() {
      // Logged lines wait for the next redraw; the last ones would be lost without this one.
      bars.update();
      bars.stop();
    },
  };
}

/** Progress of reading pages of a list: how many items so far, of how many. */
export interface PageProgress {
  page(read: number, total: number): void;
  stop(): void;
}

/**
 * A bar on stderr while pages are read, on a terminal only: stdout stays the report's alone (JSON or
 * CSV piped to a file), and a pipe or log gets no control characters.
 */
export function pageProgress(io: CliIo, label: string): PageProgress {
  if (!io.stderr.isTTY) return { page() {}, stop() {} };
  const bar = new SingleBar(
    {
      stream: io.stderr as NodeJS.WritableStream,
      format: `${label} [{bar}] {value}/{total}`,
      hideCursor: false,
      clearOnComplete: true,
    },
    Presets.shades_classic,
  );
  let started = false;
  return {
    page(read, total) {
      if (!started) {
        bar.start(total, read);
        started = true;
        return;
      }
      bar.setTotal(total);
      bar.update(read);
    },
    stop() {
      if (started) bar.stop();
    },
  };
}

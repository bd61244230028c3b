import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Sleep } from '../shared/affiliate/retry.ts';
import { foreignMessage, isConnectorError } from '../shared/errors.ts';

/**
 * What a command may touch of the outside world. `bin/connector.ts` passes the process's streams and
 * environment; tests pass their own, so every command runs in process with nothing global.
 */

/** The part of a writable stream the CLI uses; `isTTY` decides between a progress bar and plain lines. */
export interface OutputStream {
  write(chunk: string): unknown;
  readonly isTTY?: boolean;
}

export interface CliIo {
  readonly stdout: OutputStream;
  readonly stderr: OutputStream;
  /** Where confirmations are read from; absent when there is no one to ask. */
  readonly stdin?: NodeJS.ReadableStream & { readonly isTTY?: boolean };
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Directory searched first for `.local-stack.json`. */
  readonly cwd: string;
  /**
   * The connector's own checkout, where `npm start` writes `.local-stack.json`; searched after `cwd`.
   * No other directory is: a state file in a parent directory may be anyone's.
   */
  readonly projectRoot?: string;
  /** @default () => new Date() */
  readonly now?: () => Date;
  /** Waits between retries (`connector refund`). @default a timer (`sleep` of shared/affiliate/retry.ts) */
  readonly sleep?: Sleep;
  /** Uniform in [0, 1): the retries' jitter. @default Math.random */
  readonly random?: () => number;
}

/** The running process's streams, environment and directory. */
export function processIo(): CliIo {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    cwd: process.cwd(),
    projectRoot: fileURLToPath(new URL('../', import.meta.url)),
  };
}

/**
 * A failure the user can act on: printed as `error: <message>` (never with a stack) and turned into
 * the exit code. 2 = usage or configuration (a missing setting, an invalid CSV), 1 = the work failed.
 * An empty message exits with the code and prints nothing (the command has already reported).
 */
export class CliError extends Error {
  override readonly name = 'CliError';
  readonly exitCode: number;

  constructor(message: string, exitCode = 2) {
    super(message);
    this.exitCode = exitCode;
  }
}

export function nowOf(io: CliIo): Date {
  return io.now ? io.now() : new Date();
}

export function writeLine(stream: OutputStream, line = ''): void {
  stream.write(`${line}\n`);
}

/**
 * C0 and C1 controls (ESC starts terminal escape sequences, 0x9b is a one-byte CSI) and the bidi
 * overrides that reorder what a terminal shows. Tables print values shops and buyers wrote.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/** A cell as a terminal may show it: control characters dropped, line breaks and tabs as spaces. */
export function printable(text: string): string {
  return text.replace(/[\t\n\r]/g, ' ').replace(CONTROL, '');
}

/** `\u202e`: a character as a JSON and JavaScript escape, visible and harmless on a terminal. */
function escapeOf(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/**
 * Text that keeps its lines (a message body) as a terminal may show it: what `printable` drops, and a
 * carriage return, written as `\uXXXX` escapes instead, so nothing is hidden and nothing obeyed.
 */
export function visibleText(text: string): string {
  return text.replace(CONTROL, escapeOf).replace(/\r/g, escapeOf);
}

/**
 * `JSON.stringify(value, null, 2)` as a terminal may show it. JSON.stringify escapes C0 controls but
 * not DEL, C1 controls or bidi overrides; these can only be inside strings, where `\uXXXX` is the same
 * character: the text parses to the same value.
 */
export function terminalJson(value: unknown): string {
  return visibleText(JSON.stringify(value, null, 2));
}

/** Pads columns to their widest cell; the last column is not padded. Control characters are dropped. */
export function formatTable(headers: readonly string[], unsafeRows: readonly (readonly string[])[]): string {
  const rows = unsafeRows.map((r) => r.map(printable));
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** Cuts a text for a table cell, on one line. */
export function cell(text: string | undefined, max = 60): string {
  const flat = printable(text ?? '')
    .replace(/\s+/g, ' ')
    .trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** `42s`, `5m`, `3h`, `2d`. */
export function formatAge(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86_400)}d`;
}

const RELATIVE = /^(\d+)\s*(s|m|h|d|w)$/i;
const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
/** An ISO 8601 calendar date: `2026-05-01`. */
const ISO_DAY = /^(\d{4})-(\d{2})-(\d{2})$/;
/** An ISO 8601 date and time, seconds and fraction optional, offset optional (`Z`, `+02:00`, `+0200`). */
const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?$/;

/** Whether `text` is a bare ISO date (`2026-05-01`), which a period's end counts to the end of. */
export function isIsoDay(text: string): boolean {
  return ISO_DAY.test(text.trim());
}

/**
 * A point in time from an ISO 8601 date (`2026-05-01`: midnight UTC), an ISO 8601 date and time
 * (`2026-05-01T10:00:00Z`, `2026-05-01T12:00+02:00`; without an offset, local time as in JavaScript)
 * or a duration back from now (`30s`, `30m`, `1h`, `2d`, `1w`). Nothing else: `Date.parse` would read
 * a duration missing its unit ("2") as 2001-02-01, and "2026-02-30" as March 2nd.
 *
 * @throws CliError naming `flag` and the accepted forms
 */
export function parseWhen(text: string, now: Date, flag: string): Date {
  const trimmed = text.trim();
  const refuse = (why: string): never => {
    throw new CliError(`${flag}: "${cell(text, 40)}" ${why}`);
  };
  const relative = RELATIVE.exec(trimmed);
  if (relative) {
    const unit = UNIT_MS[(relative[2] ?? '').toLowerCase()] ?? 0;
    const time = now.getTime() - Number(relative[1]) * unit;
    const at = new Date(time);
    return Number.isNaN(at.getTime()) ? refuse('reaches further back than a date can') : at;
  }
  const day = ISO_DAY.exec(trimmed);
  const time = day ?? ISO_TIME.exec(trimmed);
  if (!time) {
    const unit = /^\d+$/.test(trimmed) ? `: give its unit, as in ${trimmed}d or ${trimmed}h` : '';
    return refuse(
      `is neither a date (2026-05-01, 2026-05-01T10:00:00Z) nor a duration back from now (30m, 1h, 2d, 1w)${unit}`,
    );
  }
  const field = (i: number) => Number(time[i] ?? 0);
  const [year, month, date, hour, minute, second] = [
    field(1),
    field(2),
    field(3),
    field(4),
    field(5),
    field(6),
  ];
  const ms = Number((time[7] ?? '').padEnd(3, '0').slice(0, 3));
  const utc = day !== null || time[8] !== undefined || time[9] !== undefined;
  const offsetMinutes = (time[9] === '-' ? -1 : 1) * (field(10) * 60 + field(11));
  const lastDay = month === 2 && !leapYear(year) ? 28 : (DAYS_IN_MONTH[month - 1] ?? 0);
  if (
    date < 1 ||
    date > lastDay ||
    hour > 23 ||
    minute > 59 ||
    second > 59 ||
    field(10) > 23 ||
    field(11) > 59
  ) {
    return refuse('is no such day or time (2026-05-01, 2026-05-01T10:00:00Z)');
  }
  // Set field by field: Date.UTC and new Date(y, …) would read a year below 100 as 19xx.
  const at = new Date(0);
  if (!utc) {
    at.setFullYear(year, month - 1, date);
    at.setHours(hour, minute, second, ms);
    return at;
  }
  at.setUTCFullYear(year, month - 1, date);
  at.setUTCHours(hour, minute, second, ms);
  return new Date(at.getTime() - offsetMinutes * 60_000);
}

const DAYS_IN_MONTH = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function leapYear(year: number): boolean {
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
}

/**
 * Asks on stderr and reads one line from stdin. Resolves undefined when there is no stdin or it ends
 * before a line (a script without `--yes`).
 */
export async function ask(io: CliIo, question: string): Promise<string | undefined> {
  const input = io.stdin;
  if (!input) return undefined;
  io.stderr.write(question);
  const lines = createInterface({ input, terminal: false });
  try {
    for await (const line of lines) return line;
    return undefined;
  } finally {
    lines.close();
    // A piped answer is not echoed: end the prompt's line so the next message starts on its own.
    if (!input.isTTY) io.stderr.write('\n');
  }
}

/** Codes of a connection that never got an answer: nothing listens there, or no such host. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ECONNRESET',
]);

export interface Unreachable {
  readonly code: string;
  /** `host:port` when the failure names it. */
  readonly address?: string;
}

/** The connection failure somewhere in an error's cause chain (fetch, the AWS SDK, our clients). */
export function unreachable(error: unknown): Unreachable | undefined {
  let found: Unreachable | undefined;
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    const e = current as Error & { code?: unknown; address?: unknown; port?: unknown; hostname?: unknown };
    const code = typeof e.code === 'string' ? e.code : /\b(E[A-Z_]+)\b/.exec(e.message)?.[1];
    if (code && UNREACHABLE.has(code)) {
      const host =
        typeof e.address === 'string' ? e.address : typeof e.hostname === 'string' ? e.hostname : undefined;
      const fromMessage = /(\d{1,3}(?:\.\d{1,3}){3}:\d+|\[[0-9a-f:]+\]:\d+)/i.exec(e.message)?.[1];
      const address = host && typeof e.port === 'number' ? `${host}:${e.port}` : (fromMessage ?? host);
      // Wrappers name the code; the innermost failure names the address.
      found = { code, ...(address ? { address } : found?.address ? { address: found.address } : {}) };
      if (address) return found;
    }
    current = (e as { cause?: unknown }).cause;
  }
  return found;
}

/**
 * What to tell the user when `error` is a connection that got no answer, naming the address tried
 * and how to start the local stack; undefined for any other failure.
 */
export function unreachableHint(
  error: unknown,
  urls: readonly (string | undefined)[] = [],
): string | undefined {
  const failure = unreachable(error);
  if (!failure) return undefined;
  const port = failure.address?.split(':').at(-1);
  const url = urls.find((u) => u !== undefined && port !== undefined && new RegExp(`:${port}(/|$)`).test(u));
  const where = url ?? (failure.address ? `http://${failure.address}` : 'the service');
  return `could not reach ${where} (${failure.code}). Is the local stack running? Start it with npm start, or point the command at your deployment (see --help)`;
}

/** A short, safe description of anything thrown: the message and, for network failures, the code. */
export function explain(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  const code = (cause as { code?: unknown } | undefined)?.code ?? (error as { code?: unknown }).code;
  if (error.message === 'fetch failed' && cause instanceof Error) {
    const message = foreignMessage(cause.message);
    return typeof code === 'string' ? `${code} (${message})` : message;
  }
  // The CLI aborts an AWS call only when its time is up (awsCall), so an abort is a timeout.
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return 'timed out';
  const failure = unreachable(error);
  if (failure) return failure.address ? `${failure.code} at ${failure.address}` : failure.code;
  // An AWS service's error name is its documented error code (ResourceNotFoundException); our own
  // and JavaScript's class names tell the user nothing, so only the message is shown for those.
  // A message from outside (AWS echoes a request it could not authenticate, session token included)
  // is shown as `foreignMessage` makes it.
  if ('$metadata' in error && error.name && error.name !== 'Error')
    return `${error.name}: ${foreignMessage(error.message)}`;
  if (isConnectorError(error)) return error.message || error.name;
  return foreignMessage(error.message) || error.name;
}

/**
 * Text a sender wrote, made fit to store, send on or show: no zod, no locale, so the lowest modules
 * (validation.ts) may use it without configuring zod for every program that loads them.
 */

const CONTROL_IN_TEXT_ALL = /(?![\t\n\r])\p{Cc}/gu;

/**
 * Text a shop wrote (a refund note, a cancel reason), made fit for `freeText(max)`: control
 * characters but tab and line breaks dropped, a lone surrogate replaced, cut to `max` without halving
 * a character. Such text only describes the change; refusing the delivery for it would lose the
 * refund or the order it came with, since the shop resends the same body until it gives up.
 * Bidirectional controls (U+202A–U+202E, U+2066–U+2069) are kept: right-to-left text may need them,
 * and the value reaches the platform as the shop wrote it; what shows shop text escapes them
 * (`displayed`, `quoted`; the CLI's `visibleText`) or drops them (the CLI's tables).
 */
export function shopText(value: string, max: number): string {
  const text = value.replace(CONTROL_IN_TEXT_ALL, '').toWellFormed();
  if (text.length <= max) return text;
  // A cut between the halves of a pair would leave a lone surrogate: cut before the pair instead.
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/** Bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069). */
const BIDI_CONTROL = /^[\u202a-\u202e\u2066-\u2069]$/;

/**
 * Text a sender wrote (a topic, an id, a key, a path) as an answer, a log line or a terminal shows
 * it: on one line, without control characters (`shopText`), each bidirectional control written as
 * a `\u202e` escape as the CLI writes them, cut to `max` characters with an ellipsis. The sender
 * controls its length and bytes: an escape sequence or a line break would forge a log line, and an
 * override would make the reader see other text than was sent (Trojan Source).
 */
export function displayed(value: string, max: number): string {
  return shown(oneLine(value), max);
}

/** The most characters of a sender's value an answer or a log line quotes (`quoted`). */
const MAX_QUOTED = 64;

/**
 * A value the sender wrote (a topic header, an event type, a status, an id) as an answer and its log
 * line quote it: `displayed`, without white space at either end, at most 64 characters by default.
 */
export function quoted(value: string, max = MAX_QUOTED): string {
  return shown(oneLine(value).trim(), max);
}

/** `value` on one line (each run of white space one space), without control characters, uncut. */
function oneLine(value: string): string {
  return shopText(value.replace(/\s+/g, ' '), Number.POSITIVE_INFINITY);
}

/** `text` with its bidirectional controls escaped, cut to `max` on a whole character or escape. */
function shown(text: string, max: number): string {
  let out = '';
  let cut = -1;
  for (const char of text) {
    const piece = BIDI_CONTROL.test(char) ? `\\u${char.charCodeAt(0).toString(16)}` : char;
    if (cut === -1 && out.length + piece.length > max - 1) cut = out.length;
    out += piece;
    if (out.length > max) return `${out.slice(0, cut)}…`;
  }
  return out;
}

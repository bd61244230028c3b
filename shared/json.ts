import { isUtf8 } from 'node:buffer';
import { BadInputError } from './errors.ts';

/** What Node 24 (V8's JSON.parse source text access) hands a reviver for primitive values. */
interface ReviverContext {
  readonly source?: string;
}
type SourceReviver = (this: unknown, key: string, value: unknown, context?: ReviverContext) => unknown;

/**
 * The deepest nesting of arrays and objects a body may have (the body itself is level 1). Shops'
 * payloads nest about 10 deep. JSON.parse alone reads any depth, but with a reviver V8 walks the
 * parsed value recursively and runs out of stack a little past 2,000 levels (less on a deeper call
 * stack): a body holding a 16-digit number was refused as "not valid JSON" where its twin without
 * one was read. One limit for every body answers both alike, and honestly.
 */
export const MAX_JSON_DEPTH = 256;

const INTEGER_TEXT = /^-?[0-9]+$/;
/**
 * The most significant digits any decimal can have and still come back from the nearest double as
 * written (DBL_DIG): past it, `90071992547409.91` reads as `90071992547409.9`.
 */
const DOUBLE_DIGITS = 15;
/** Every number with more than `DOUBLE_DIGITS` significant digits has such a run (its mantissa). */
const LONG_NUMBER = /[0-9.]{16}/;

/**
 * Parses a webhook body as JSON, keeping every number a double cannot hold as written exact: such a
 * number comes back as its source text (a string). An integer beyond 2^53, so Shopify's 64-bit ids
 * never round (`6502208077897` is safe, `9007199254740993` would silently become `…992` as a number);
 * any other number with more than 15 significant digits, so an amount written as a JSON number is
 * read from its digits (`90071992547409.91` would become `…409.9`, a cent lost, and
 * `0.10000000000000001` would pass as `0.1`). Every other number stays a number; callers turn ids
 * into strings and read amounts from either. Needs Node ≥ 21 (`context.source`), which the
 * project's Node 24 has.
 *
 * @throws BadInputError (`field: 'body'`) when the body is not valid UTF-8 JSON or is nested over
 *   `MAX_JSON_DEPTH` levels; the message never quotes the body, which may hold personal data.
 */
export function parseJsonBody(raw: Buffer): unknown {
  // Decoding would turn each invalid byte into U+FFFD and queue the order with its voucher or click
  // id changed (a Latin-1 `Ü` signed by the module itself): JSON is UTF-8 (RFC 8259), the sender fixes it.
  if (!isUtf8(raw)) throw new BadInputError('request body is not valid UTF-8', { field: 'body' });
  let text = raw.toString('utf8');
  // A BOM is not JSON, but some PHP stacks (WooCommerce plugins) emit one; drop it, nothing else.
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (nestedDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new BadInputError(`request body is nested too deep (over ${MAX_JSON_DEPTH} levels)`, {
      field: 'body',
    });
  }
  // Without such a run the reviver could change nothing, and JSON.parse without one is several
  // times faster (most bodies: ids of 13 digits, amounts as strings).
  if (!LONG_NUMBER.test(text)) return parseOrRefuse(text);
  const reviver: SourceReviver = (_key, value, context) => {
    const source = context?.source;
    if (typeof value !== 'number' || source === undefined || source.length <= DOUBLE_DIGITS) return value;
    if (INTEGER_TEXT.test(source)) return Number.isSafeInteger(value) ? value : source;
    return significantDigits(source) > DOUBLE_DIGITS ? source : value;
  };
  return parseOrRefuse(text, reviver as (this: unknown, key: string, value: unknown) => unknown);
}

/** The significant digits of a JSON number's text: its mantissa's, from the first to the last non-zero. */
function significantDigits(source: string): number {
  const exponent = source.search(/[eE]/);
  const mantissa = exponent === -1 ? source : source.slice(0, exponent);
  return mantissa.replace(/[-.]/g, '').replace(/^0+/, '').replace(/0+$/, '').length;
}

function parseOrRefuse(
  text: string,
  reviver?: (this: unknown, key: string, value: unknown) => unknown,
): unknown {
  try {
    return JSON.parse(text, reviver);
  } catch {
    throw new BadInputError('request body is not valid JSON', { field: 'body' });
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;

/**
 * Whether arrays and objects nest over `max` levels, counting brackets outside strings only. Runs
 * before parsing, in one pass and without recursion, so no depth can exhaust the stack; on text that
 * is not JSON the answer is a guess, and the body is refused either way.
 */
function nestedDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = closingQuote(text, i);
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      depth++;
      if (depth > max) return true;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) {
      depth--;
    }
  }
  return false;
}

/** The index of the quote that ends the string opened at `open` (the text's length when none does). */
function closingQuote(text: string, open: number): number {
  let at = text.indexOf('"', open + 1);
  while (at !== -1) {
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
    at = text.indexOf('"', at + 1);
  }
  return text.length;
}

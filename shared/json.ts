import { isUtf8 } from 'node:buffer';
import { BadInputError } from './errors.ts';

/** What Node 24 (V8's JSON.parse source text access) hands a reviver for primitive values. */
interface ReviverContext {
  readonly source?: string;
}
type SourceReviver = (this: unknown, key: string, value: unknown, context?: ReviverContext) => unknown;

const INTEGER_TEXT = /^-?[0-9]+$/;
const SIXTEEN_DIGITS = /[0-9]{16}/;

/**
 * Parses a webhook body as JSON, keeping every integer beyond 2^53 exact: such a number comes back
 * as its source text (a string), so Shopify's 64-bit ids never round (`6502208077897` is safe,
 * `9007199254740993` would silently become `…992` as a number). Safe numbers stay numbers; callers
 * turn ids into strings. Needs Node ≥ 21 (`context.source`), which the project's Node 24 has.
 *
 * @throws BadInputError (`field: 'body'`) when the body is not valid UTF-8 JSON; the message never
 *   quotes the body, which may hold personal data.
 */
export function parseJsonBody(raw: Buffer): unknown {
  // Decoding would turn each invalid byte into U+FFFD and queue the order with its voucher or click
  // id changed (a Latin-1 `Ü` signed by the module itself): JSON is UTF-8 (RFC 8259), the sender fixes it.
  if (!isUtf8(raw)) throw new BadInputError('request body is not valid UTF-8', { field: 'body' });
  let text = raw.toString('utf8');
  // A BOM is not JSON, but some PHP stacks (WooCommerce plugins) emit one; drop it, nothing else.
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  // An integer beyond 2^53 has at least 16 digits; without such a run the reviver could change
  // nothing, and JSON.parse without one is several times faster (most bodies: ids of 13 digits).
  if (!SIXTEEN_DIGITS.test(text)) return parseOrRefuse(text);
  const reviver: SourceReviver = (_key, value, context) => {
    if (typeof value === 'number' && !Number.isSafeInteger(value) && context?.source !== undefined) {
      if (INTEGER_TEXT.test(context.source)) return context.source;
    }
    return value;
  };
  return parseOrRefuse(text, reviver as (this: unknown, key: string, value: unknown) => unknown);
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

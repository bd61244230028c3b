/** How the project's HTTP clients read a server's "wait this long" headers. */

/**
 * Milliseconds in a header of decimal seconds (`2`, `2.0`, `0.412`), or `undefined` for anything
 * else: a sign, an exponent, hex or a negative value is no number of seconds.
 */
export function secondsToMs(value: string): number | undefined {
  const text = value.trim();
  if (!/^\d+(\.\d+)?$/.test(text)) return undefined;
  // Round away float noise (0.29 * 1000 = 290.00000000000006) before rounding up.
  return Math.ceil(Math.round(Number(text) * 1e6) / 1e3);
}

/**
 * RFC 9110's HTTP-date in its three forms: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete
 * RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`, GMT unsaid).
 */
const IMF_FIXDATE = /^[a-z]{3}, \d{2} [a-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/i;
const RFC_850 = /^[a-z]{6,9}, \d{2}-[a-z]{3}-\d{2} \d{2}:\d{2}:\d{2} GMT$/i;
const ASCTIME = /^[a-z]{3} [a-z]{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/i;

/**
 * Milliseconds a `Retry-After` value asks to wait from `now`: a non-negative number of seconds
 * (decimals taken, as Shopify sends `2.0`), or an HTTP-date (0 once it has passed). Anything else is
 * `undefined`, so the caller falls back to its own backoff: `Date.parse` alone reads `-1`, `+2` or
 * `later 5` as dates in 2001, which would make the wait 0.
 */
export function retryAfterMs(value: string, now: number): number | undefined {
  const seconds = secondsToMs(value);
  if (seconds !== undefined) return seconds;
  const text = value.trim();
  let at: number;
  if (IMF_FIXDATE.test(text) || RFC_850.test(text)) at = Date.parse(text);
  else if (ASCTIME.test(text)) at = Date.parse(`${text} GMT`);
  else return undefined;
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

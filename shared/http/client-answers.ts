/** What the project's HTTP clients say of answers they will not take. */

const MIB = 1024 * 1024;

/**
 * What a client says when an answer is larger than it reads (the platform's transport, the shop
 * clients): "the answer passed 16 MiB, the most this client reads".
 */
export function answerTooLargeMessage(maxBytes: number): string {
  const size = maxBytes % MIB === 0 ? `${maxBytes / MIB} MiB` : `${Math.floor(maxBytes / 1024)} KiB`;
  return `the answer passed ${size}, the most this client reads`;
}

/** The most of a redirect's path a message quotes. */
const MAX_PATH_CHARS = 200;

/**
 * Where a redirect points, for a client that follows none (it would carry its credentials there):
 * "a redirect to https://shop.example/path", without the query, which may hold anything, and the
 * path cut at 200 characters; an address that is not http(s) (`data:` can carry anything) is not
 * quoted; or that it named none.
 */
export function redirectTarget(from: URL | string, location: string | null): string {
  if (location === null) return 'a redirect without a Location';
  let to: URL;
  try {
    to = new URL(location, from);
  } catch {
    return 'a redirect to an address that is not a URL';
  }
  const quoted = quotedAddress(to);
  return quoted === undefined ? 'a redirect to an address that is not http(s)' : `a redirect to ${quoted}`;
}

/**
 * An address as a client's error may quote it: its origin and path (cut at 200 characters), never
 * its query, which may hold anything; undefined when it is not http(s) (`data:` can carry anything).
 */
export function quotedAddress(to: URL): string | undefined {
  if (to.protocol !== 'http:' && to.protocol !== 'https:') return undefined;
  return `${to.origin}${clipped(to.pathname, MAX_PATH_CHARS)}`;
}

/** At most `max` characters of a text a server sent, for a message: cut, with `…`, past that. */
export function clipped(text: string, max = MAX_PATH_CHARS): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** Whether an answer is a redirect, which the project's clients never follow. */
export function isRedirect(status: number): boolean {
  return status >= 300 && status < 400;
}

/**
 * What a client that follows no redirect says of one: "answered 301, a redirect to
 * https://b.example/api: set shopApi.url to where the API is (a redirect is not followed, as it
 * would carry the credentials)".
 */
export function redirectRefusal(
  status: number,
  from: URL | string,
  location: string | null,
  fix: { readonly setting: string; readonly what: string; readonly carries: string },
): string {
  return `answered ${status}, ${redirectTarget(from, location)}: set ${fix.setting} to where ${fix.what} is (a redirect is not followed, as it would carry ${fix.carries})`;
}

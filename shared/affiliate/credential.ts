import { ConfigurationError, TransientError } from '../errors.ts';

/**
 * Reads a credential again, for one rotated while the process lives (a warm Lambda): with
 * `fresh: false` it may answer from a cache, with `fresh: true` it skips the cache (the platform has
 * just refused the value in hand). The platform clients (the current API's and the legacy 2.0 one)
 * take one to follow their credential.
 */
export type CredentialSource = (options: { readonly fresh: boolean }) => Promise<string>;

/** The credential a client sends: what it is called in messages, the one in hand, and how to switch. */
export interface HeldCredential {
  /** `token`, `credentials`: named in the message when the fresh read fails, never the value. */
  readonly what: string;
  /** Something equal exactly when the credential sent is the same (the header value). */
  current(): string;
  /** Sends this value's credential from now on; throws naming its origin when the value is malformed. */
  use(value: string): void;
}

/**
 * Sends one platform call following the credential's rotation: before the call the cached read (so
 * a rotation is taken up within the cache's max age; should the store fail, the credential in hand
 * is still the best guess), and after a 401 one fresh read and, when it gives another credential,
 * the call once more. A 401 carried nothing out, so even an add may be sent again; a 403 is a
 * permission, not a rotation. Without a source the credential is fixed.
 */
export async function followingCredential<T>(
  source: CredentialSource | undefined,
  held: HeldCredential,
  send: () => Promise<T>,
): Promise<T> {
  if (!source) return send();
  await source({ fresh: false }).then(
    (value) => held.use(value),
    () => undefined,
  );
  try {
    return await send();
  } catch (error) {
    if (!(error instanceof ConfigurationError) || error.status !== 401) throw error;
    const refused = held.current();
    let fresh: string;
    try {
      fresh = await source({ fresh: true });
    } catch (cause) {
      throw new TransientError(
        `${error.message}; the ${held.what} could not be read again (${(cause as Error).name}), retry later`,
        { status: 401, cause },
      );
    }
    held.use(fresh);
    if (held.current() === refused) throw error;
    return send();
  }
}

/**
 * Resolves with a promise's outcome and when it came, or with `stillWaitingAfterMs` once `limitMs`
 * passed: for tests that a call ends within its bound, and fail (rather than hang) when it does not.
 */
export async function timed<T>(
  promise: Promise<T>,
  limitMs: number,
): Promise<{ value?: T; thrown?: unknown; afterMs?: number; stillWaitingAfterMs?: number }> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<{ stillWaitingAfterMs: number }>((resolve) => {
    timer = setTimeout(() => resolve({ stillWaitingAfterMs: Date.now() - started }), limitMs);
  });
  try {
    return await Promise.race([
      promise.then(
        (value) => ({ value, afterMs: Date.now() - started }),
        (thrown: unknown) => ({ thrown, afterMs: Date.now() - started }),
      ),
      limit,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

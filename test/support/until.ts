/**
 * Resolves with `read()`'s value once `done` holds for it, reading again every `everyMs`; rejects
 * naming `what` and the last value once `timeoutMs` passed. For state that changes without telling
 * anyone (a queue's counts, a ledger record, a sandbox's call counts, another process's): the test
 * goes on at the change itself, however long it took, and the deadline only turns a change that never
 * came into a failure instead of a hang. It decides nothing: a slow machine waits longer, no test
 * passes or fails by it.
 */
export async function until<T>(
  read: () => T | Promise<T>,
  done: (value: T) => boolean,
  what: string,
  { timeoutMs = 30_000, everyMs = 20 }: { timeoutMs?: number; everyMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`gave up after ${timeoutMs} ms waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

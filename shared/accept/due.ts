import type { SourceConfig } from '../config/sources.ts';

/** One day in ms: a return window counts whole days of 24 h from the order's instant, in UTC. */
export const DAY_MS = 86_400_000;

/**
 * When an order of `source` is due for acceptance: its time plus the source's `acceptAfterDays`;
 * undefined when the source has no return window (or the time is not a date). `orderedAt` is the
 * shop's order date, else when the connector received the order.
 */
export function acceptDueAt(
  source: Pick<SourceConfig, 'acceptAfterDays'>,
  orderedAt: string,
): string | undefined {
  if (source.acceptAfterDays === undefined) return undefined;
  const at = Date.parse(orderedAt);
  if (Number.isNaN(at)) return undefined;
  return new Date(at + source.acceptAfterDays * DAY_MS).toISOString();
}

/**
 * The shape of the multi-instance drain's fleet. Deployed, the worker's event source holds at most
 * `maxConcurrency` batches of `batchSize` messages at once, one per container, and each container
 * starts at its share of 80% of the limit (`workerInitialRatePerSecond`). The bench runs N
 * processes, not `maxConcurrency`, on its 2 cores: each holds its part of those batches (as many
 * pollers) and starts at their containers' pace together, so the fleet holds what the deployed one
 * holds and starts at 80% of the limit at every N. Each instance then holds about a second of its
 * work at the limit (5 × 20 messages among the fleet), as a deployed container does; batches of ten
 * (`--batch-size 10`, the stack's until 2026-11-27) held two, and ten pollers per instance whatever N
 * (the earlier rounds' shape, `maxConcurrency` 10 × N) held ten seconds of it among ten instances,
 * which the event source never gives a container.
 */
export interface FleetShape {
  /** Batches the instance holds at once. */
  readonly pollers: number;
  /** Messages per batch (the event source's batchSize). */
  readonly batchSize: number;
  /** AFFILIATE_INITIAL_RATE_PER_SECOND for the instance's adaptive pacing. */
  readonly initialRatePerSecond: number;
}

export function fleetShape(options: {
  instances: number;
  maxConcurrency: number;
  batchSize: number;
  limitPerSecond: number;
  /** Pollers per instance instead of its part of `maxConcurrency`. */
  pollers?: number;
}): FleetShape {
  const { instances, maxConcurrency, batchSize, limitPerSecond } = options;
  const pollers = options.pollers ?? Math.max(1, Math.ceil(maxConcurrency / instances));
  const start = Math.floor((limitPerSecond * 0.8 * pollers) / maxConcurrency);
  return { pollers, batchSize, initialRatePerSecond: Math.min(limitPerSecond, Math.max(1, start)) };
}

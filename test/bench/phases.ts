/**
 * Where a multi-instance drain's time goes, against the route's budget (its limit, less what a
 * foreign client takes): the start (until the last instance has made its first add: processes
 * booting, claims), the middle (every instance adding) and the tail (from the first instance's last
 * add: siblings run dry while the last ones finish what they hold). A phase's loss is its length
 * less the time its adds take at the budget, so the losses add up to the whole drain's: its span
 * less its adds at the budget.
 */
export interface DrainPhase {
  readonly name: 'start' | 'all adding' | 'tail';
  readonly seconds: number;
  /** Adds after the drain's first (its zero) up to the phase's end. */
  readonly adds: number;
  /** Negative where the phase ran over the budget. */
  readonly lostSeconds: number;
}

const ms = (x: number) => Math.round(x * 1000) / 1000;

/**
 * The drain's adds, sorted, and its phases' bounds (epoch ms): its first add, the last instance's
 * first add, the tail's beginning (the first instance's last add, not before the start ends) and
 * its last add. Undefined when no instance made an add.
 */
function phaseBounds(
  instances: readonly (readonly number[])[],
): { adds: number[]; bounds: [number, number, number, number] } | undefined {
  const busy = instances.filter((adds) => adds.length > 0);
  const adds = busy.flat().sort((a, b) => a - b);
  const first = adds[0];
  const last = adds.at(-1);
  if (first === undefined || last === undefined) return undefined;
  const allStarted = Math.max(...busy.map((a) => a[0] ?? first));
  const tailFrom = Math.max(allStarted, Math.min(...busy.map((a) => a.at(-1) ?? last)));
  return { adds, bounds: [first, allStarted, tailFrom, last] };
}

/** `instances`: each one's add times (epoch ms, ascending); instances without an add are left out. */
export function drainPhases(
  instances: readonly (readonly number[])[],
  budgetPerSecond: number,
): DrainPhase[] {
  const found = phaseBounds(instances);
  if (found === undefined) return [];
  const { adds, bounds } = found;
  const [first, allStarted, tailFrom, last] = bounds;
  // Each add after the first closes a stretch of the drain: count it in the phase it falls in.
  const later = adds.slice(1);
  const counts = [
    later.filter((t) => t <= allStarted).length,
    later.filter((t) => t > allStarted && t <= tailFrom).length,
    later.filter((t) => t > tailFrom).length,
  ];
  return (['start', 'all adding', 'tail'] as const).map((name, i) => {
    const seconds = ((bounds[i + 1] ?? last) - (bounds[i] ?? first)) / 1000;
    const n = counts[i] ?? 0;
    return { name, seconds: ms(seconds), adds: n, lostSeconds: ms(seconds - n / budgetPerSecond) };
  });
}

const signed = (x: number) => (x < -0.005 ? `−${(-x).toFixed(2)}` : Math.abs(x).toFixed(2));

/** `start 0.50 s, 26 adds (0.24 s lost); …; 0.49 s lost in all`. */
export function phasesLine(phases: readonly DrainPhase[]): string {
  const parts = phases.map(
    (p) => `${p.name} ${p.seconds.toFixed(2)} s, ${p.adds} adds (${signed(p.lostSeconds)} s lost)`,
  );
  const total = phases.reduce((n, p) => n + p.lostSeconds, 0);
  return `${parts.join('; ')}; ${signed(ms(total))} s lost in all`;
}

/** One AWS SDK call of an instance: when it began (epoch ms) and how long its answer took (ms). */
export type TimedCall = readonly [startedAt: number, ms: number];

/** The calls that began in a phase of the drain, and the mean time their answers took. */
export interface PhaseCalls {
  readonly name: 'before the first add' | DrainPhase['name'];
  readonly calls: number;
  /** 0 when the phase had none. */
  readonly meanMs: number;
}

/**
 * The instances' calls to a service (the ledger's DynamoDB, the queue's SQS) by the phase of the
 * drain they began in (`drainPhases`'), with the calls made before the first add as a phase of
 * their own and those after the last add in the tail: where the emulators answered slowly, the
 * adds that waited on them are missing from that phase.
 */
export function callsByPhase(
  instances: readonly (readonly number[])[],
  calls: readonly TimedCall[],
): PhaseCalls[] {
  const found = phaseBounds(instances);
  if (found === undefined) return [];
  const [first, allStarted, tailFrom] = found.bounds;
  const sums = [0, 0, 0, 0];
  const counts = [0, 0, 0, 0];
  for (const [at, took] of calls) {
    const i = at < first ? 0 : at <= allStarted ? 1 : at <= tailFrom ? 2 : 3;
    sums[i] = (sums[i] ?? 0) + took;
    counts[i] = (counts[i] ?? 0) + 1;
  }
  return (['before the first add', 'start', 'all adding', 'tail'] as const).map((name, i) => {
    const n = counts[i] ?? 0;
    return { name, calls: n, meanMs: n > 0 ? (sums[i] ?? 0) / n : 0 };
  });
}

/** `before the first add 420 ms (40); start 650 ms (180); …`: the phases that had calls. */
export function callsLine(phases: readonly PhaseCalls[]): string {
  return phases
    .filter((p) => p.calls > 0)
    .map((p) => `${p.name} ${Math.round(p.meanMs)} ms (${p.calls})`)
    .join('; ');
}

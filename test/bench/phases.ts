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

/** `instances`: each one's add times (epoch ms, ascending); instances without an add are left out. */
export function drainPhases(
  instances: readonly (readonly number[])[],
  budgetPerSecond: number,
): DrainPhase[] {
  const busy = instances.filter((adds) => adds.length > 0);
  const adds = busy.flat().sort((a, b) => a - b);
  const first = adds[0];
  const last = adds.at(-1);
  if (first === undefined || last === undefined) return [];
  const allStarted = Math.max(...busy.map((a) => a[0] ?? first));
  const tailFrom = Math.max(allStarted, Math.min(...busy.map((a) => a.at(-1) ?? last)));
  const bounds = [first, allStarted, tailFrom, last];
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

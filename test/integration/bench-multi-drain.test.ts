import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleInstance, type MultiDrainOptions, multiDrain } from '../bench/multi-drain.ts';

/**
 * The bench's multi-instance drain, run for real on a small row: two worker processes (the
 * instance bundle, built as the bench builds it), 20 orders and 2 refunds through the door, the
 * emulators in this process, the sandbox in one of its own. What `npm run bench` reports for issue
 * 16 rests on it: every order added once with the right amount, and every add counted.
 */
const dir = mkdtempSync(join(tmpdir(), 'bench-multi-drain-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let instanceModule = '';
beforeAll(async () => {
  instanceModule = await bundleInstance(dir, false);
}, 60_000);

const row = (changes: Partial<MultiDrainOptions> = {}): MultiDrainOptions => ({
  pacing: 'adaptive',
  instances: 2,
  orders: 20,
  pollers: 2,
  batchSize: 5,
  initialRatePerSecond: 40,
  foreignPerSecond: 0,
  warm: false,
  instanceModule,
  ...changes,
});

describe('a multi-instance row', () => {
  for (const pacing of ['adaptive', 'static'] as const) {
    it(`drains every order once with the right amount, ${pacing}, each add counted`, async () => {
      const result = await multiDrain(row({ pacing }));
      expect(result).toMatchObject({ lost: 0, duplicated: 0, wrongAmounts: 0, instances: 2, orders: 20 });
      expect(result.instanceAdds).toHaveLength(2);
      expect(result.instanceAdds.reduce((a, b) => a + b, 0)).toBe(20);
      expect(result.addsBySecond.reduce((a, b) => a + b, 0)).toBe(20);
      expect(result.routes['conversions.add']?.calls).toBeGreaterThanOrEqual(20);
      expect(result.addsPerSecond).toBeGreaterThan(0);
      // The sandbox answered from its own process, as the platform is its own server.
      expect(result.cpuSandbox).toBeGreaterThan(0);
      // Each instance's calls to the emulators were timed: ledger writes for each order, receives.
      const count = (phases: readonly { calls: number }[]) => phases.reduce((n, p) => n + p.calls, 0);
      expect(count(result.awsByPhase.dynamodb)).toBeGreaterThanOrEqual(40);
      expect(count(result.awsByPhase.sqs)).toBeGreaterThanOrEqual(4);
      expect(result.awsByPhase.dynamodb.some((p) => p.meanMs > 0)).toBe(true);
    }, 60_000);
  }

  it('fails with the reason when its instances cannot start, instead of waiting for them', async () => {
    await expect(multiDrain(row({ instanceModule: join(dir, 'missing.js') }))).rejects.toThrow(
      /a bench instance exited with 1/,
    );
  }, 60_000);
});

import { afterEach, describe, expect, it, vi } from 'vitest';
import { lambdaPipeline } from '../../shared/lambda.ts';
import { makeLogger, makeMetrics } from '../../shared/observability.ts';

/**
 * The Lambda entry points' pipeline (shared/lambda.ts): wiring at the first invocation, not cached
 * when it fails, and the invocation's metrics flushed even when it throws.
 */

const ENV = { POWERTOOLS_SERVICE_NAME: 'pipeline-test', POWERTOOLS_METRICS_NAMESPACE: 'PipelineTest' };

/** Lines Powertools writes (through its own Console on process.stdout / stderr) while `run` runs. */
async function written(run: () => Promise<unknown>): Promise<string[]> {
  const lines: string[] = [];
  for (const stream of [process.stdout, process.stderr]) {
    vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      return true;
    });
  }
  try {
    await run();
  } finally {
    vi.restoreAllMocks();
  }
  return lines;
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('lambdaPipeline', () => {
  it('wires again after a failed cold start, then keeps what it wired', async () => {
    // Prepare: the first wiring fails (a secret not readable yet), the next one works.
    const logger = makeLogger(ENV);
    let attempts = 0;
    const handler = lambdaPipeline(
      async () => {
        attempts += 1;
        if (attempts === 1) throw new Error('secret not readable yet');
        return async (event: { n: number }) => event.n * 2;
      },
      { logger },
    );

    // Act
    const first = handler({ n: 1 }, {});
    await expect(first).rejects.toThrow('secret not readable yet');
    const second = await handler({ n: 2 }, {});
    const third = await handler({ n: 3 }, {});

    // Assess
    expect([second, third]).toEqual([4, 6]);
    expect(attempts).toBe(2);
  });

  it('flushes the metrics of an invocation that throws, as one EMF line, and warns of nothing when there are none', async () => {
    // Prepare
    const logger = makeLogger(ENV);
    const metrics = makeMetrics(ENV, logger);
    const handler = lambdaPipeline(
      async () => async (event: { fail: boolean }) => {
        if (!event.fail) return 'nothing counted';
        metrics.addMetric('TransientFailures', 'Count', 1);
        throw new Error('platform down');
      },
      { logger, metrics },
    );

    // Act
    const lines = await written(async () => {
      await handler({ fail: true }, {}).catch(() => undefined);
      await handler({ fail: false }, {});
    });

    // Assess: every line is JSON; the failed invocation's metric was published; the quiet one said nothing.
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(parsed.filter((line) => 'TransientFailures' in line)).toEqual([
      expect.objectContaining({ TransientFailures: 1, service: 'pipeline-test' }),
    ]);
    expect(parsed.filter((line) => !('_aws' in line))).toEqual([]);
  });

  it("ends an invocation that overruns 5 ms before Lambda's deadline with a TimeoutError, its metrics flushed", async () => {
    // Prepare: Lambda gives 30 ms; the handler counts a metric, then never answers
    const logger = makeLogger(ENV);
    const metrics = makeMetrics(ENV, logger);
    const handler = lambdaPipeline(
      async () => async () => {
        metrics.addMetric('Overran', 'Count', 1);
        return new Promise<never>(() => {});
      },
      { logger, metrics },
    );
    const context = { getRemainingTimeInMillis: () => 30 };

    // Act
    let failure: unknown;
    const lines = await written(async () => {
      await handler({}, context).catch((error: unknown) => {
        failure = error;
      });
    });

    // Assess: middy's own timeout ended it, and the invocation's metric went out with it
    expect(failure).toMatchObject({ name: 'TimeoutError' });
    const parsed = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(parsed.filter((line) => 'Overran' in line)).toEqual([expect.objectContaining({ Overran: 1 })]);
  });
});

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { emptyDir, runCli } from '../support/cli.ts';

/**
 * `connector refund` sends again a refund the connector answered 502/503/504 (a refund id counts once,
 * so a repeat is harmless), a bounded number of times, after a wait drawn at random: finance tools
 * that all failed in the same outage must not come back in step. The waits asserted are the ones the
 * command asks its `sleep` for, with its `random` drawing; only the last test reads a clock.
 */

const KEY = 'finance-key-0123456789abcdef0123456789';
const servers: Server[] = [];
afterAll(() => {
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
});

/**
 * A connector that answers 503 `failures` times (with `retryAfter` as its retry-after header, when
 * given), then 202; it notes when each POST came.
 */
async function flakyConnector(
  failures: number,
  retryAfter?: string,
): Promise<{ url: string; times: number[] }> {
  const times: number[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      times.push(performance.now());
      if (times.length <= failures) {
        res.writeHead(503, {
          'content-type': 'application/json',
          ...(retryAfter === undefined ? {} : { 'retry-after': retryAfter }),
        });
        res.end('{"error":"unavailable","message":"queue unavailable, retry later"}');
        return;
      }
      res.writeHead(202, { 'content-type': 'application/json' });
      res.end('{"status":"queued","messageId":"m-1"}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, times };
}

const refundArgs = (url: string) => [
  'refund',
  '--url',
  url,
  '--api-key',
  KEY,
  '--external-id',
  '1001',
  '--refund-id',
  'r-1',
  '--full',
];

/**
 * One refund sent to a connector that fails `failures` times, with `random` drawing `draw`; the
 * waits the command asked for, and how many POSTs the connector got.
 */
async function waitsAskedFor(
  failures: number,
  draw: number,
  retryAfter?: string,
): Promise<{ code: number; waits: number[]; posts: number }> {
  const connector = await flakyConnector(failures, retryAfter);
  const dir = emptyDir();
  const waits: number[] = [];
  try {
    const result = await runCli(refundArgs(connector.url), {
      cwd: dir.dir,
      random: () => draw,
      sleep: async (ms) => {
        waits.push(ms);
      },
    });
    return { code: result.code, waits, posts: connector.times.length };
  } finally {
    dir.remove();
  }
}

describe('connector refund', () => {
  it('waits a random time before sending a refund the connector answered 503 again', async () => {
    // Act: the same failure, the random draw at its two ends.
    const low = await waitsAskedFor(1, 0);
    const high = await waitsAskedFor(1, 0.999);

    // Assess: sent again and queued both times; the wait follows the draw, up to the first
    // attempt's ceiling of 500 ms (full jitter).
    expect(low).toEqual({ code: 0, waits: [0], posts: 2 });
    expect(high).toEqual({ code: 0, waits: [499], posts: 2 });
  });

  it('waits up to twice as long after the second 503, and gives up after its third attempt', async () => {
    // Act
    const twice = await waitsAskedFor(2, 0.999);
    const always = await waitsAskedFor(3, 0.999);

    // Assess: ceilings of 500 then 1,000 ms; no wait after the last attempt, which fails the row.
    expect(twice).toEqual({ code: 0, waits: [499, 999], posts: 3 });
    expect(always).toEqual({ code: 1, waits: [499, 999], posts: 3 });
  });

  it("waits the connector's retry-after instead, up to 5 s", async () => {
    // Act
    const told = await waitsAskedFor(1, 0.999, '2');
    const tooLong = await waitsAskedFor(1, 0.999, '3600');

    // Assess
    expect(told).toEqual({ code: 0, waits: [2_000], posts: 2 });
    expect(tooLong).toEqual({ code: 0, waits: [5_000], posts: 2 });
  });

  it('really waits when no sleep is given: the second POST comes at least the drawn wait later', async () => {
    // Prepare: only the draw is given (499 ms); the command's own timer waits.
    const connector = await flakyConnector(1);
    const dir = emptyDir();

    // Act
    const { code } = await runCli(refundArgs(connector.url), { cwd: dir.dir, random: () => 0.999 }).finally(
      () => dir.remove(),
    );

    // Assess: a lower bound only (a loaded machine waits longer, never shorter); 450 leaves room for
    // a timer's millisecond rounding.
    expect(code).toBe(0);
    const [first, second] = connector.times;
    expect((second ?? 0) - (first ?? 0)).toBeGreaterThanOrEqual(450);
  });
});

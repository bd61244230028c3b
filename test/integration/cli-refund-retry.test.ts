import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { emptyDir, runCli } from '../support/cli.ts';

/**
 * `connector refund` sends again a refund the connector answered 502/503/504 (a refund id counts once,
 * so a repeat is harmless), a bounded number of times, after a wait drawn at random: finance tools
 * that all failed in the same outage must not come back in step.
 */

const KEY = 'finance-key-0123456789abcdef0123456789';
const servers: Server[] = [];
afterEach(() => {
  vi.restoreAllMocks();
});
afterAll(() => {
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
});

/** A connector that answers 503 (no retry-after) `failures` times, then 202; it notes when each POST came. */
async function flakyConnector(failures: number): Promise<{ url: string; times: number[] }> {
  const times: number[] = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      times.push(performance.now());
      if (times.length <= failures) {
        res.writeHead(503, { 'content-type': 'application/json' });
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

/** One refund sent with Math.random drawing `draw`; the waits between its attempts. */
async function waitsWhenRandomDraws(draw: number): Promise<{ code: number; waits: number[] }> {
  const connector = await flakyConnector(1);
  const dir = emptyDir();
  vi.spyOn(Math, 'random').mockReturnValue(draw);
  try {
    const result = await runCli(
      [
        'refund',
        '--url',
        connector.url,
        '--api-key',
        KEY,
        '--external-id',
        '1001',
        '--refund-id',
        'r-1',
        '--full',
      ],
      { cwd: dir.dir },
    );
    return {
      code: result.code,
      waits: connector.times.slice(1).map((t, i) => t - (connector.times[i] ?? t)),
    };
  } finally {
    vi.restoreAllMocks();
    dir.remove();
  }
}

describe('connector refund', () => {
  it('waits a random time before sending a refund the connector answered 503 again', async () => {
    // Act: the same failure, the random draw at its two ends.
    const low = await waitsWhenRandomDraws(0);
    const high = await waitsWhenRandomDraws(0.999);

    // Assess: sent again and queued both times; the wait follows the draw.
    expect(low.code).toBe(0);
    expect(high.code).toBe(0);
    expect(low.waits).toHaveLength(1);
    expect(high.waits).toHaveLength(1);
    expect((high.waits[0] ?? 0) - (low.waits[0] ?? 0)).toBeGreaterThan(200);
  });
});

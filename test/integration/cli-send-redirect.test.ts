import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { emptyDir, runCli } from '../support/cli.ts';

/**
 * `connector send` signs a webhook with the source's secret. A signature over a body is as good as
 * the secret for that body to whoever receives it (it can be sent to the connector again), so like
 * `connector refund` with its API key, `send` follows no redirect: the signed request goes to the
 * connector URL the user gave, or nowhere.
 */

const servers: Server[] = [];
afterAll(() => {
  for (const server of servers) {
    server.closeAllConnections();
    server.close();
  }
});

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('connector send', () => {
  it.each([301, 302, 307, 308])(
    'does not carry the signed webhook to where a %i redirect points, and says why it stopped',
    async (status) => {
      // Prepare: the connector URL answers with a redirect to another host, which records what it gets.
      const elsewhere: { headers: IncomingHttpHeaders; body: string }[] = [];
      const target = await listen(
        createServer((req, res) => {
          let body = '';
          req.on('data', (chunk: Buffer) => {
            body += chunk.toString();
          });
          req.on('end', () => {
            elsewhere.push({ headers: req.headers, body });
            res.writeHead(202, { 'content-type': 'application/json' });
            res.end('{"status":"queued"}');
          });
        }),
      );
      const connector = await listen(
        createServer((req, res) => {
          req.resume();
          res.writeHead(status, { location: `${target}/collect?from=connector` });
          res.end();
        }),
      );
      const dir = emptyDir();

      try {
        // Act
        const result = await runCli(
          ['send', 'generic', '--url', connector, '--secret', 'generic-signing-secret-0123456789'],
          { cwd: dir.dir },
        );

        // Assess: nothing reached the other host; the command failed naming the redirect.
        expect(elsewhere).toEqual([]);
        expect(result.code).toBe(1);
        expect(result.stderr).toMatch(new RegExp(`answered ${status}, a redirect to ${target}/collect`));
        expect(result.stderr).not.toContain('from=connector');
      } finally {
        dir.remove();
      }
    },
  );
});

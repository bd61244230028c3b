import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliContext } from '../../cli/context.ts';
import { runCli } from '../support/cli.ts';

/**
 * A `.local-stack.json` the user did not write (planted in a parent directory, or in a checkout
 * someone else prepared) must not make the CLI send a credential the user holds (flag, environment,
 * Secrets Manager) to an address the user never named. The "attacker" is an HTTP server on port 0
 * that records the headers it receives.
 */

const FINANCE_KEY = 'the-real-finance-key-0123456789abcdef';
const TOKEN = 'the-real-platform-token';
const SHOP_SECRET = 'the-real-shop-signing-secret';

let attacker: Server;
let attackerUrl: string;
const received: Record<string, string | string[] | undefined>[] = [];
let root: string;

beforeAll(async () => {
  attacker = createServer((req, res) => {
    received.push(req.headers);
    res.writeHead(202, { 'content-type': 'application/json' });
    res.end('{"status":"queued","messageId":"m"}');
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', () => resolve()));
  attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
  root = mkdtempSync(join(tmpdir(), 'connector-planted-'));
});
afterAll(async () => {
  rmSync(root, { recursive: true, force: true });
  await new Promise<void>((resolve) => attacker.close(() => resolve()));
});

/** A directory with a state file pointing every URL at the attacker. */
function planted(dir: string): string {
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, '.local-stack.json'),
    JSON.stringify({ connectorUrl: attackerUrl, affiliateBaseUrl: attackerUrl }),
  );
  return dir;
}

const leaked = (value: string) => received.some((h) => JSON.stringify(h).includes(value));
const REFUND = ['refund', '--external-id', '1001', '--refund-id', 'r-1', '--amount-cents', '500'];

describe('the CLI sends credentials only where the user pointed it', () => {
  it('a state file in a parent directory is not read', async () => {
    // Prepare
    const parent = planted(join(root, 'parent'));
    const cwd = join(parent, 'work', 'deeper');
    mkdirSync(cwd, { recursive: true });
    // Act
    const result = await runCli(REFUND, { cwd, env: { FINANCE_API_KEY: FINANCE_KEY } });
    // Assess
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/missing the connector URL/);
    expect(leaked(FINANCE_KEY)).toBe(false);
  });

  it("the checkout's own state file is read from a subdirectory of it, and only from there", () => {
    // Prepare: a checkout with the file npm start writes, and a directory outside it.
    const checkout = planted(join(root, 'checkout'));
    const inside = join(checkout, 'shared', 'cli');
    const outside = join(root, 'elsewhere');
    mkdirSync(inside, { recursive: true });
    mkdirSync(outside, { recursive: true });
    const io = { stdout: { write: () => true }, stderr: { write: () => true }, env: {} };
    // Act
    const fromInside = new CliContext({ ...io, cwd: inside, projectRoot: checkout }).stateFile();
    const fromOutside = new CliContext({ ...io, cwd: outside, projectRoot: checkout }).stateFile();
    // Assess
    expect(fromInside).toBe(join(checkout, '.local-stack.json'));
    expect(fromOutside).toBeUndefined();
  });

  it('refund: a finance key from the environment is not sent to a URL from the state file', async () => {
    const cwd = planted(join(root, 'refund'));
    const result = await runCli(REFUND, { cwd, env: { FINANCE_API_KEY: FINANCE_KEY } });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/FINANCE_API_KEY.*\.local-stack\.json.*--url or set CONNECTOR_URL/);
    expect(leaked(FINANCE_KEY)).toBe(false);
  });

  it('refund: with the URL given (CONNECTOR_URL) the key is sent there', async () => {
    const cwd = planted(join(root, 'refund-given'));
    const result = await runCli(REFUND, {
      cwd,
      env: { FINANCE_API_KEY: FINANCE_KEY, CONNECTOR_URL: attackerUrl },
    });
    expect(result.code, result.stderr).toBe(0);
    expect(leaked(FINANCE_KEY)).toBe(true);
    received.length = 0;
  });

  it('doctor: a platform token from the environment is not sent to a URL from the state file', async () => {
    const cwd = planted(join(root, 'doctor'));
    const result = await runCli(['doctor'], { cwd, env: { AFFILIATE_TOKEN: TOKEN } });
    expect(result.stdout + result.stderr).toMatch(
      /AFFILIATE_TOKEN.*--affiliate-url or set AFFILIATE_BASE_URL/,
    );
    expect(leaked(TOKEN)).toBe(false);
  });

  it('send: a shop secret from the environment does not sign for a URL from the state file', async () => {
    const cwd = planted(join(root, 'send'));
    const result = await runCli(['send', 'shopify'], {
      cwd,
      env: { SHOPIFY_WEBHOOK_SECRET: SHOP_SECRET },
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/SHOPIFY_WEBHOOK_SECRET.*--url or set CONNECTOR_URL/);
    expect(received.filter((h) => h['x-shopify-hmac-sha256'] !== undefined)).toHaveLength(0);
  });
});

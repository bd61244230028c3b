import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliContext } from '../../cli/context.ts';
import { DEFAULT_SEED, type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
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
/** The shop fakes stand for the real shop of a source configured in SOURCES. */
let shops: RunningSandbox;

beforeAll(async () => {
  attacker = createServer((req, res) => {
    received.push(req.headers);
    res.writeHead(202, { 'content-type': 'application/json' });
    res.end('{"status":"queued","messageId":"m"}');
  });
  await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', () => resolve()));
  attackerUrl = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
  root = mkdtempSync(join(tmpdir(), 'connector-planted-'));
  shops = await startSandbox({ port: 0 });
});
afterAll(async () => {
  rmSync(root, { recursive: true, force: true });
  await shops?.close();
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

/** A real WooCommerce shop: SOURCES, its API credentials and its signing secret from the environment. */
function realShopEnv(): Record<string, string> {
  return {
    SOURCES: JSON.stringify([
      {
        id: 'woo',
        platform: 'woocommerce',
        program: DEFAULT_SEED.programs[0],
        rule: DEFAULT_SEED.rules[0],
        secretRef: 'WOO_SIGNING_SECRET',
        shopApi: { url: shops.shops.urls.woocommerce, credentialsRef: 'WOO_API_CREDENTIALS' },
      },
    ]),
    WOO_SIGNING_SECRET: SHOP_SECRET,
    WOO_API_CREDENTIALS: JSON.stringify(shops.shops.credentials.woocommerce),
  };
}
const wooHooks = () =>
  shops.shops.control.subscriptions('woocommerce').map((w) => ({
    topic: w['topic'],
    url: w['delivery_url'],
    signedWithTheRealSecret: w['secret'] === SHOP_SECRET,
  }));

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

  it("subscribe: a real shop's webhooks are not pointed at a connector URL from the state file", async () => {
    // Prepare
    const cwd = planted(join(root, 'subscribe'));
    // Act
    const result = await runCli(['subscribe', '--source', 'woo'], { cwd, env: realShopEnv() });
    // Assess
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/source woo.*\.local-stack\.json.*--url or set CONNECTOR_URL/);
    expect(wooHooks()).toEqual([]);
  });

  it("doctor: a real shop's webhooks are not checked against a connector URL from the state file", async () => {
    // Prepare
    const cwd = planted(join(root, 'doctor-shop'));
    // Act
    const result = await runCli(['doctor'], { cwd, env: realShopEnv() });
    // Assess
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(/✗ shop webhooks woo\s+not checked: .*source woo.*\.local-stack\.json/);
    expect(result.stdout).toContain('pass --url or set CONNECTOR_URL');
  });

  it('subscribe: a signing secret from the environment does not sign for a URL from the state file', async () => {
    // Prepare: the shop's API credentials are the state file's own, the signing secret the user's.
    const cwd = planted(join(root, 'subscribe-secret'));
    writeFileSync(
      join(cwd, '.local-stack.json'),
      JSON.stringify({
        connectorUrl: attackerUrl,
        secrets: { WOO_API_CREDENTIALS: JSON.stringify(shops.shops.credentials.woocommerce) },
      }),
    );
    const { WOO_API_CREDENTIALS: _fromFile, ...env } = realShopEnv();
    // Act
    const result = await runCli(['subscribe', '--source', 'woo'], { cwd, env });
    // Assess
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/WOO_SIGNING_SECRET.*\.local-stack\.json.*--url or set CONNECTOR_URL/);
    expect(wooHooks()).toEqual([]);
  });

  it('subscribe: with the connector URL given (CONNECTOR_URL) the shop is pointed there', async () => {
    // Prepare
    const cwd = planted(join(root, 'subscribe-given'));
    const connector = 'https://connector.example';
    // Act
    const result = await runCli(['subscribe', '--source', 'woo'], {
      cwd,
      env: { ...realShopEnv(), CONNECTOR_URL: connector },
    });
    // Assess
    expect(result.code, result.stderr).toBe(0);
    expect(wooHooks()).toEqual([
      { topic: 'order.created', url: `${connector}/webhooks/woo`, signedWithTheRealSecret: true },
      { topic: 'order.updated', url: `${connector}/webhooks/woo`, signedWithTheRealSecret: true },
    ]);
  });
});

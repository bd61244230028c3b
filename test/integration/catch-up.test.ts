import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildCatchUpDeps, makeHandler, shopAnswerCap } from '../../functions/catch-up.ts';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { LOCAL_SECRETS } from '../../local/defaults.ts';
import { shopifyPageSize } from '../../shared/backfill/deliveries.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { SHOP_MAX_ANSWER_BYTES } from '../../shared/shops/http.ts';
import { startEndlessAnswer } from '../support/endless-answer.ts';

/**
 * The scheduled catch-up: the same backfill in a Lambda function, for every source with a shop API,
 * over the last CATCH_UP_HOURS, with nothing but the shop credentials and the queue (no ledger):
 * the worker's ledger rules make what was applied a no-op.
 */
const CLICK = '0123456789abcdef01234567';
let stack: LocalStack;

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 } });
});
afterAll(async () => {
  await stack?.close();
});
beforeEach(() => {
  stack.sandbox?.shops.control.reset();
});

function handler(env: Record<string, string> = {}) {
  return makeHandler(
    buildCatchUpDeps({
      sqs: stack.emulators.sqs,
      secrets: new EnvSecretStore({ ...LOCAL_SECRETS }),
      env: {
        SOURCES: JSON.stringify([...stack.sources.values()]),
        QUEUE_URL: stack.emulators.queueUrl,
        ...env,
      },
    }),
  );
}
const conversions = () =>
  (stack.sandbox?.control.conversions() ?? []).map((c) => ({
    externalId: c.externalId,
    amount: c.amount,
    status: c.status,
  }));
const hoursAgo = (h: number) => new Date(Date.now() - h * 3600_000).toISOString();

describe('scheduled catch-up', () => {
  it('converts what every shop has from the last 48 hours once, and a second run changes nothing', async () => {
    // Arrange: one order per shop within 48 h (one refunded), one older than 48 h
    const shops = stack.sandbox!.shops.control;
    const shopify = shops.createOrder('shopify', { clickId: CLICK, at: hoursAgo(30) }).orderId;
    const woo = shops.createOrder('woocommerce', { clickId: CLICK, at: hoursAgo(2) }).orderId;
    const stripe = shops.createOrder('stripe', { clickId: CLICK, at: hoursAgo(1) }).orderId;
    shops.createRefund('shopify', shopify, { at: hoursAgo(1) });
    const old = shops.createOrder('shopify', { clickId: CLICK, at: hoursAgo(60) }).orderId;

    // Act
    const first = await handler()({});
    await stack.waitForIdle();
    const after = conversions();
    const second = await handler()({});
    await stack.waitForIdle();

    // Assert
    expect(first).toMatchObject({
      sources: [
        { source: 'shopify', found: 2, queued: 2 },
        { source: 'woocommerce', found: 1, queued: 1 },
        { source: 'stripe', found: 1, queued: 1 },
      ],
    });
    expect(after).toEqual(
      expect.arrayContaining([
        { externalId: shopify, amount: 58_700 - 19_567, status: 'pending' },
        { externalId: woo, amount: 1_800, status: 'pending' },
        expect.objectContaining({ externalId: stripe, status: 'pending' }),
      ]),
    );
    expect(after.find((c) => c.externalId === old)).toBeUndefined();
    expect(second).toMatchObject({ sources: [{ found: 2 }, { found: 1 }, { found: 1 }] });
    expect(conversions()).toEqual(after);
  });

  it('goes on with the other sources when one shop refuses its key, then fails the run naming it', async () => {
    const shops = stack.sandbox!.shops.control;
    const woo = shops.createOrder('woocommerce', { clickId: CLICK, at: hoursAgo(3) }).orderId;
    const wrongKey = buildCatchUpDeps({
      sqs: stack.emulators.sqs,
      secrets: new EnvSecretStore({
        ...LOCAL_SECRETS,
        SHOPIFY_API_CREDENTIALS: '{"accessToken":"shpat_revoked"}',
      }),
      env: { SOURCES: JSON.stringify([...stack.sources.values()]), QUEUE_URL: stack.emulators.queueUrl },
    });

    const error = await makeHandler(wrongKey)({}).catch((e: unknown) => e);
    await stack.waitForIdle();

    expect((error as Error).message).toBe(
      'catch-up failed for source shopify: Shopify API refused the credentials (401 on GET /shopify/admin/api/2025-07/orders.json): check the key and its scopes',
    );
    expect(conversions().filter((c) => c.externalId === woo)).toHaveLength(1);
  });

  it('reads only CATCH_UP_SOURCES and CATCH_UP_HOURS when set, and refuses a wrong value naming it', async () => {
    const shops = stack.sandbox!.shops.control;
    shops.createOrder('shopify', { clickId: CLICK, at: hoursAgo(5) });
    shops.createOrder('woocommerce', { clickId: CLICK, at: hoursAgo(5) });

    const result = await handler({ CATCH_UP_SOURCES: 'woocommerce', CATCH_UP_HOURS: '6' })({});

    expect(result).toMatchObject({ sources: [{ source: 'woocommerce', found: 1 }] });
    expect(() => handler({ CATCH_UP_SOURCES: 'nope' })).toThrow('CATCH_UP_SOURCES: unknown source "nope"');
    expect(() => handler({ CATCH_UP_SOURCES: 'generic' })).toThrow(
      'CATCH_UP_SOURCES: source generic has no shopApi',
    );
  });

  it("reads at most a 32nd of the function's memory of one shop answer, and names the cap", async () => {
    // Prepare: a shop whose orders page runs on for 256 MiB; the function has 32 MB (a 1 MiB cap)
    const shop = await startEndlessAnswer(256 * 1024 * 1024);
    const shopify = stack.sources.get('shopify');
    const source = { ...shopify, shopApi: { ...shopify?.shopApi, url: shop.url } };
    try {
      // Act
      const result = await handler({
        SOURCES: JSON.stringify([source]),
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '32',
      })({}).catch((error: unknown) => error);

      // Assess
      expect(String(result)).toContain('catch-up failed for source shopify: Shopify API: GET /admin/api/');
      expect(String(result)).toContain('the answer passed 1 MiB, the most this client reads');
      expect(await shop.closed).toBe(true);
      expect(shop.written()).toBeLessThan(256 * 1024 * 1024);
      // Pages sized to the cap: 50 orders, the fewest asked for (16 of 64 KB would fit 1 MiB)
      expect(shop.urls()).toEqual([expect.stringContaining('limit=50')]);
    } finally {
      await shop.close();
    }
  });

  it('reads up to 32 MiB of an answer when the function has memory to spare, or runs outside Lambda', () => {
    // Act / Assess
    expect(shopAnswerCap({})).toBe(SHOP_MAX_ANSWER_BYTES);
    expect(shopAnswerCap({ AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '256' })).toBe(8 * 1024 * 1024);
    expect(shopAnswerCap({ AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '10240' })).toBe(SHOP_MAX_ANSWER_BYTES);
    expect(shopAnswerCap({ AWS_LAMBDA_FUNCTION_MEMORY_SIZE: 'lots' })).toBe(SHOP_MAX_ANSWER_BYTES);
  });

  it("asks Shopify for pages its cap holds at 64 KB an order: 128 at the stack's 256 MB, 250 outside Lambda", () => {
    // Act / Assess
    expect(shopifyPageSize(shopAnswerCap({ AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '256' }))).toBe(128);
    expect(shopifyPageSize(shopAnswerCap({}))).toBe(250);
    expect(shopifyPageSize()).toBe(250);
    expect(shopifyPageSize(1024 * 1024)).toBe(50);
  });
});

import type { LocalStack } from '../../infra/local/stack.ts';
import type { StoredConversion } from '../../sandbox/types.ts';
import { formatMoney } from '../../shared/money.ts';
import { genericWebhook } from '../support/webhooks.ts';

/**
 * The bench's workload and its check, shared by the one-process drain (run.ts) and the
 * multi-instance drain (multi-drain.ts): the platform's limit and latency in the sandbox, a burst of
 * signed orders and refunds posted through the connector's door, and what the platform holds after.
 */

/** The click id every order carries (tracking mode). */
export const CLICK = 'a1b2c3d4e5f60718293a4b5c';
/** The sandbox's latency for every call: 50–150 ms, seeded. */
export const PLATFORM_FAULTS = { latencyMs: 50, jitterMs: 100, seed: 1 };
/** The platform's limit per route per token. */
export const LIMIT_PER_SECOND = 100;
/** Order i's amount and its refund's (every tenth order), in minor units. */
const orderAmount = (i: number) => 1_000 + (i % 500) * 13;
const refundAmount = (i: number) => 100 + (i % 7) * 11;

/** Runs `work` over `items` with at most `limit` in flight. */
async function pool<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        await work(item);
      }
    }),
  );
}

/** Every order, then a refund for every tenth, as one burst; the queue holds them all before the drain. */
export async function postBurst(stack: LocalStack, orders: number, prefix: string): Promise<number> {
  const secret = stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '';
  const orderBodies: string[] = [];
  const refundBodies: string[] = [];
  for (let i = 0; i < orders; i++) {
    orderBodies.push(
      JSON.stringify({
        type: 'order',
        orderId: `${prefix}-${i}`,
        amount: formatMoney(orderAmount(i), 'EUR'),
        currency: 'EUR',
        clickIds: [CLICK],
        buyerIp: '198.51.100.4',
      }),
    );
  }
  for (let i = 0; i < orders; i += 10) {
    refundBodies.push(
      JSON.stringify({
        type: 'refund',
        orderId: `${prefix}-${i}`,
        refundId: `r-${i}`,
        amount: formatMoney(refundAmount(i), 'EUR'),
        currency: 'EUR',
      }),
    );
  }
  let failed = 0;
  const send = async (body: string) => {
    const signed = genericWebhook(body, secret);
    const res = await fetch(`${stack.url}/webhooks/generic`, {
      method: 'POST',
      headers: signed.headers,
      body: signed.body,
    });
    await res.arrayBuffer();
    if (res.status !== 202) failed += 1;
  };
  // Refunds only once every order is queued: a refund queued before its order is parked today.
  await pool(orderBodies, 32, send);
  await pool(refundBodies, 32, send);
  if (failed > 0) throw new Error(`${failed} webhooks were not accepted`);
  return refundBodies.length;
}

/** Lost, duplicated and wrongly refunded conversions of the orders posted under `prefix`. */
export function check(
  conversions: readonly StoredConversion[],
  orders: number,
  prefix: string,
): { lost: number; duplicated: number; wrongAmounts: number } {
  const byOrder = new Map<string, (typeof conversions)[number][]>();
  for (const c of conversions) byOrder.set(c.externalId, [...(byOrder.get(c.externalId) ?? []), c]);
  let lost = 0;
  let duplicated = 0;
  let wrongAmounts = 0;
  for (let i = 0; i < orders; i++) {
    const found = byOrder.get(`${prefix}-${i}`) ?? [];
    if (found.length === 0) lost += 1;
    if (found.length > 1) duplicated += found.length - 1;
    const expected = orderAmount(i) - (i % 10 === 0 ? refundAmount(i) : 0);
    if (found.length === 1 && found[0]?.amount !== expected) wrongAmounts += 1;
  }
  return { lost, duplicated, wrongAmounts };
}

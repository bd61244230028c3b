import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import type { RecordReport } from '../../shared/worker/batch.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

const ORDERS = 500;
const CLICK = 'a1b2c3d4e5f60718293a4b5c';

let stack: LocalStack;
const reports: RecordReport[] = [];

beforeAll(async () => {
  stack = await startLocalStack({
    port: 0,
    sandbox: { port: 0, faults: { errorRate: 0.2, seed: 42 } },
    pollers: 4,
    visibilityBaseSeconds: 1,
    client: { baseDelayMs: 20, maxDelayMs: 400 },
    emulators: { maxReceiveCount: 6 },
    observe: (report) => reports.push(report),
  });
});
afterAll(async () => {
  await stack?.close();
});

describe('the worker under a struggling platform', () => {
  it('turns 500 orders into one conversion each through 429 bursts and 20% 5xx, with nothing in the DLQ', async () => {
    const secret = stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? '';
    const ids = Array.from({ length: ORDERS }, (_, i) => `bulk-${i}`);
    const burst = () =>
      stack.sandbox?.control.setFaults({ errorRate: 0.2, seed: 42, burst429: 40, burstRetryAfterMs: 150 });
    burst();
    for (let i = 0; i < ids.length; i += 25) {
      if (i === 250) burst();
      await Promise.all(
        ids.slice(i, i + 25).map(async (id) => {
          const body = JSON.stringify({
            type: 'order',
            eventId: randomUUID(),
            orderId: id,
            amount: '20.00',
            currency: 'EUR',
            clickIds: [CLICK],
            buyerIp: '198.51.100.4',
          });
          expect((await post(`${stack.url}/webhooks/generic`, genericWebhook(body, secret))).status).toBe(
            202,
          );
        }),
      );
    }
    await stack.waitForIdle(180_000);

    const conversions = stack.sandbox?.control.conversions() ?? [];
    const perOrder = new Map<string, number>();
    for (const c of conversions) perOrder.set(c.externalId, (perOrder.get(c.externalId) ?? 0) + 1);
    expect(ids.filter((id) => perOrder.get(id) !== 1)).toEqual([]);
    expect(conversions).toHaveLength(ORDERS);
    expect(stack.emulators.counts(stack.emulators.dlqName)).toEqual({ ready: 0, inflight: 0, delayed: 0 });
    // The faults really happened: the platform answered 429s and 503s that the connector rode out.
    const calls = Object.values(stack.sandbox?.control.calls() ?? {});
    const byStatus = (status: string) => calls.reduce((n, c) => n + (c.byStatus[status] ?? 0), 0);
    expect(byStatus('429')).toBeGreaterThan(0);
    expect(byStatus('503')).toBeGreaterThan(50);
    expect(reports.filter((r) => r.status === 'parked')).toEqual([]);
  }, 240_000);
});

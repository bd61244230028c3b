import { describe, expect, it } from 'vitest';
import { shadowReport } from '../../cli/shadow-report.ts';
import { DEFAULT_SEED } from '../../sandbox/server.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import { AffiliateClient } from '../../shared/affiliate/client.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { PermanentError } from '../../shared/errors.ts';
import { ledgerKey } from '../../shared/ledger.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { CLICK, workerEvent } from '../support/events.ts';
import { workerWorld } from '../support/worker-world.ts';

/**
 * docs/deploy.md, "Shadow mode: before switching the pixel off", attacked at the switch on dynalite
 * and the platform sandbox: the sandbox's seeded conversions stand for the shop's browser pixel, and
 * the same source runs in shadow mode, then live (`lookupBeforeAdd`), and back.
 */

const PROGRAM = DEFAULT_SEED.programs[0]!;
const PILOT = {
  id: 'pilot',
  platform: 'generic' as const,
  program: PROGRAM,
  rule: DEFAULT_SEED.rules[0]!,
  secretRef: 'PILOT_SECRET',
};
const SHADOW = SourceConfig.parse({ ...PILOT, mode: 'shadow' });
const LIVE = SourceConfig.parse({ ...PILOT, mode: 'live', lookupBeforeAdd: true });

const world = workerWorld();
const { sandbox } = world;

const ledger = () => new DynamoLedger(world.emulators.dynamo, world.emulators.tableName);
const worker = (source: SourceConfig): WorkerDeps => ({
  ledger: ledger(),
  sources: new Map([[source.id, source]]),
  backendFor: () => world.platform,
  now: Date.now,
  workerId: `w-${source.mode}`,
  leaseMs: 60_000,
});
const client = () => new AffiliateClient({ baseUrl: sandbox.url, token: sandbox.token, timeoutMs: 5_000 });

/** Order `externalId` of the pilot shop, EUR, with a click id unless `attributed` is false. */
const order = (externalId: string, amount: number, attributed = true): ConnectorEvent =>
  workerEvent('pilot', {
    type: 'OrderPlaced',
    externalId,
    amount,
    currency: 'EUR',
    ...(attributed ? { clickIds: [CLICK], buyerIp: '198.51.100.4' } : {}),
  });
const refund = (externalId: string, refundId: string, amount: number): ConnectorEvent =>
  workerEvent('pilot', {
    type: 'OrderRefunded',
    eventId: `refund-${refundId}`,
    externalId,
    refundId,
    amount,
    currency: 'EUR',
  });

const conversionsOf = (externalId: string) =>
  sandbox.control.conversions().filter((c) => c.externalId === externalId);
const pixel = (externalId: string, amount: number, fields: { currency?: string; status?: 'refused' } = {}) =>
  sandbox.control.seedConversion({ program: PROGRAM, externalId, amount, ...fields });

const period = () => ({ from: new Date(Date.now() - 3_600_000), to: new Date(Date.now() + 3_600_000) });

describe('switching a source from shadow mode to live', () => {
  it("brings the pixel's conversion, on a refund after the switch, to the order's amount less every refund, once", async () => {
    // Prepare: order s-1, 50.00 net; the pixel recorded 59.90 (with tax); a refund of 10.00 in shadow mode.
    await processEvent(worker(SHADOW), order('s-1', 5_000));
    await processEvent(worker(SHADOW), refund('s-1', 's-1-r0', 1_000));
    const recorded = pixel('s-1', 5_990);
    // Act: a refund of 5.00 after the switch
    const outcome = await processEvent(worker(LIVE), refund('s-1', 's-1-r1', 500));
    // Assess: 50.00 − 10.00 − 5.00 on the pixel's conversion, and no second conversion
    expect(outcome).toMatchObject({ result: 'refund_applied', amount: 3_500, conversionId: recorded.id });
    expect(conversionsOf('s-1').map((c) => [c.id, c.amount, c.currency])).toEqual([
      [recorded.id, 3_500, 'EUR'],
    ]);
    const record = await ledger().get(ledgerKey(PROGRAM, 's-1'));
    expect(record).toMatchObject({ state: 'added', conversionId: recorded.id, currentAmount: 3_500 });
    expect(record?.refunds['s-1-r0']?.status).toBe('applied');
  });

  it('reports a pixel conversion in another currency as such, not as the same amount: the switch parks that order', async () => {
    // Prepare: order c-1 is 49.90 EUR; the pixel recorded 49.90 in the buyer's USD.
    await processEvent(worker(SHADOW), order('c-1', 4_990));
    pixel('c-1', 4_990, { currency: 'USD' });
    // Act
    const { from, to } = period();
    const report = await shadowReport(ledger(), client(), [SHADOW], from, to);
    const live = processEvent(worker(LIVE), order('c-1', 4_990));
    // Assess: what the report says and what the switch then does agree
    const row = report.rows.find((r) => r.externalId === 'c-1');
    expect(row).toMatchObject({ kind: 'currency_differs', currency: 'EUR', connectorAmount: 4_990 });
    expect(row?.detail).toContain('USD 49.90');
    expect(row?.difference).toBeUndefined();
    expect(report.atStake).toEqual({});
    await expect(live).rejects.toThrow(PermanentError);
    await expect(live).rejects.toThrow(/is in USD \(USD 49\.90\).*not adopted/);
    expect(conversionsOf('c-1')).toHaveLength(1);
  });

  it('reads every page of the pixel’s conversions and matches order ids past 2^53 by their digits', async () => {
    // Prepare: 1 000 pixel conversions of other orders first, then Shopify-sized ids, one a hair
    // from the next (both round to 9007199254740992 as numbers).
    for (let i = 0; i < 1_000; i++) pixel(`page-${i}`, 1_000);
    pixel('9007199254740993', 4_990);
    await processEvent(worker(SHADOW), order('9007199254740993', 4_990));
    await processEvent(worker(SHADOW), order('9007199254740992', 2_500));
    // Act
    const { from, to } = period();
    const report = await shadowReport(ledger(), client(), [SHADOW], from, to);
    // Assess
    expect(report.pixelConversions).toBe(1_001);
    expect(
      report.rows
        .filter((r) => r.externalId.startsWith('900719925474099'))
        .map((r) => [r.kind, r.externalId, r.difference]),
    ).toEqual([
      ['only_connector', '9007199254740992', 2_500],
      ['same', '9007199254740993', 0],
    ]);
  });

  it("takes a refund after the switch to the pixel's conversion of an order the shadow source skipped (no click id)", async () => {
    // Prepare: order k-1 reached the connector without a click id, so shadow mode skipped it; the
    // pixel saw the click and recorded the order.
    await processEvent(worker(SHADOW), order('k-1', 5_000, false));
    const recorded = pixel('k-1', 5_000);
    // Act
    const outcome = await processEvent(worker(LIVE), refund('k-1', 'k-1-r1', 1_000));
    // Assess: the refund reaches the only conversion the order has, as it would had the connector
    // never seen the order (docs/deploy.md: "A refund of such an order does the same lookup").
    expect(outcome).toMatchObject({ result: 'refund_applied', conversionId: recorded.id, amount: 4_000 });
    expect(conversionsOf('k-1').map((c) => c.amount)).toEqual([4_000]);
  });

  it("settles, on the order's delivery after the switch, a pixel conversion the platform refused, without parking it", async () => {
    // Prepare: order f-1 with a refund in shadow mode; the advertiser refused the pixel's conversion.
    await processEvent(worker(SHADOW), order('f-1', 5_000));
    await processEvent(worker(SHADOW), refund('f-1', 'f-1-r0', 1_000));
    const refused = pixel('f-1', 5_000, { status: 'refused' });
    // Act
    const outcome = await processEvent(worker(LIVE), order('f-1', 5_000));
    // Assess: the ledger says what the platform holds; nothing to send to a refused conversion.
    expect(outcome).toMatchObject({ conversionId: refused.id });
    expect(await ledger().get(ledgerKey(PROGRAM, 'f-1'))).toMatchObject({
      state: 'refused',
      conversionId: refused.id,
    });
    expect(conversionsOf('f-1').map((c) => [c.status, c.amount])).toEqual([['refused', 5_000]]);
  });
});

describe('switching a live source back to shadow mode', () => {
  it('parks the refund of a conversion the connector added while live, and applies it when replayed once live again', async () => {
    // Prepare: order b-1 added while the source was live.
    expect((await processEvent(worker(LIVE), order('b-1', 5_000))).result).toBe('added');
    const rb = refund('b-1', 'b-1-r1', 1_000);
    // Act: the source is back in shadow mode when the shop refunds 10.00; then live again, the
    // parked message is replayed.
    const inShadow = processEvent(worker(SHADOW), rb);
    const inShadowSettled = await inShadow.then(
      (outcome) => ({ outcome }),
      (error: unknown) => ({ error }),
    );
    const amountMeanwhile = conversionsOf('b-1')[0]?.amount;
    const replayed = await processEvent(worker(LIVE), rb);
    // Assess: shadow mode changed nothing on the platform, and did not end the refund's message as
    // if it were done: nothing else would ever send it (a pixel cannot take a refund back).
    expect(inShadowSettled).toMatchObject({ error: expect.any(PermanentError) });
    expect(String((inShadowSettled as { error?: unknown }).error)).toMatch(
      /added .* while the source was live.*replay this message once the source is live/,
    );
    expect(amountMeanwhile).toBe(5_000);
    expect(replayed).toMatchObject({ result: 'refund_applied', amount: 4_000 });
    expect(conversionsOf('b-1').map((c) => c.amount)).toEqual([4_000]);
  });
});

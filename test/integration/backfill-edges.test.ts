import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type RunningSandbox, startSandbox } from '../../sandbox/server.ts';
import { backfill } from '../../shared/backfill/backfill.ts';
import { type Period, readShop } from '../../shared/backfill/deliveries.ts';
import { parseSources, type SourceConfig } from '../../shared/config/sources.ts';
import { adapterFor } from '../../shared/platforms/registry.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { shopCredentials } from '../../shared/shops/credentials.ts';
import { RecordingQueue } from '../support/recording-queue.ts';

/**
 * The edges of what a backfill reads from WooCommerce: numbered pages over a list that shrinks while
 * it is walked (an order modified after the period leaves it), and the bounds of the period, which
 * WooCommerce compares exclusively.
 */
const CLICK = '0123456789abcdef01234567';
const PROGRAM = 'a'.repeat(24);
let sandbox: RunningSandbox;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0 });
});
afterAll(async () => {
  await sandbox.close();
});
beforeEach(() => sandbox.shops.control.reset());

function woocommerce(): SourceConfig {
  return parseSources(
    JSON.stringify([
      {
        id: 'woocommerce',
        platform: 'woocommerce',
        program: PROGRAM,
        rule: 'b'.repeat(24),
        secretRef: 'UNUSED',
        shopApi: { url: sandbox.shops.urls.woocommerce, credentialsRef: 'CREDS' },
      },
    ]),
    'sources',
  )[0]!;
}

async function run(period: Period, onChange?: (found: number) => void) {
  const source = woocommerce();
  const secrets = new EnvSecretStore({ CREDS: JSON.stringify(sandbox.shops.credentials.woocommerce) });
  const credentials = await shopCredentials(secrets, source);
  const read = readShop(source, credentials, period, { now: period.to });
  const queue = new RecordingQueue();
  await backfill(
    { adapterFor, queue, now: () => period.to, onProgress: ({ found }) => onChange?.(found) },
    source,
    read.deliveries,
  );
  return queue.events.filter((e) => e.type === 'OrderPlaced').map((e) => e.externalId);
}

describe('WooCommerce backfill', () => {
  it('places every order of the period when one on the first page is modified while later pages are still to read', async () => {
    // Prepare: 101 orders, two pages of 100; the period ends now
    const at = new Date(Date.now() - 30 * 60_000).toISOString();
    const ids = Array.from(
      { length: 101 },
      () => sandbox.shops.control.createOrder('woocommerce', { clickId: CLICK, at }).orderId,
    );
    const to = new Date();
    let modified: string | undefined;

    // Act: while the first page is queued, the shop completes an order of it (its date_modified
    // moves past the period, so it leaves the list and every later order moves up one place)
    const placed = await run({ from: new Date(to.getTime() - 3600_000), to }, (found) => {
      if (found !== 1) return;
      modified = ids.at(-1)!;
      sandbox.shops.control.cancelOrder('woocommerce', modified, {
        at: new Date(to.getTime() + 5_000).toISOString(),
      });
    });

    // Assess: the order that moved from the second page onto the first is placed too, and none twice
    expect(modified).toBeDefined();
    expect([...placed].sort()).toEqual([...ids].sort());
  });

  it('reads an order modified exactly at the end of one period by that backfill or the next', async () => {
    // Prepare: an order modified on the second that ends one period and starts the next
    const edge = new Date(Math.floor(Date.now() / 1000) * 1000 - 3600_000);
    const { orderId } = sandbox.shops.control.createOrder('woocommerce', {
      clickId: CLICK,
      at: edge.toISOString(),
    });

    // Act: two back-to-back backfills, as `--from … --to <edge>` then `--from <edge>`
    const before = await run({ from: new Date(edge.getTime() - 3600_000), to: edge });
    const after = await run({ from: edge, to: new Date(edge.getTime() + 3600_000) });

    // Assess
    expect([...before, ...after]).toContain(orderId);
  });
});

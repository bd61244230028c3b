import { sleep as realSleep, type Sleep } from '../affiliate/retry.ts';
import type { SourceConfig } from '../config/sources.ts';
import { describeError, isConnectorError } from '../errors.ts';
import type { AdapterLoader } from '../platforms/types.ts';
import type { EventQueue, SecretStore } from '../ports.ts';
import { shopCredentials } from '../shops/credentials.ts';
import type { ShopHttpOptions } from '../shops/http.ts';
import { type BackfillSummary, backfill } from './backfill.ts';
import { readShop } from './deliveries.ts';

/**
 * The scheduled catch-up: `connector backfill` for each source with a shop API, over the last
 * hours, run by a Lambda function. It reads no ledger (its role holds only the shop credentials and
 * the queue): everything mapped is queued, and the worker's ledger rules make what was already
 * applied a no-op.
 *
 * Sources are read one after another, each within its share of the run's time (`shareOf`): the time
 * left until the deadline less a minute kept for each source after it, or an equal part of that time
 * when that is more (many sources). A big shop that is slow but finishes uses the time the shops
 * after it do not need; a shop that keeps answering 429 with long waits, or answers slowly, is cut
 * when its share ends (its reads are aborted, waits included) and reported unfinished, instead of
 * spending the function's whole timeout while the shops after it are never read, run after run.
 * Not concurrently: the function's answer cap (`shopAnswerCap`) is sized for one shop answer in
 * memory at a time, and a parsed answer takes about 13 times its size; and however many reads run
 * at once, a deadline is still needed for when every shop is slow.
 *
 * The cut falls only on a shop request: the page in hand is queued to its end first, so the changes
 * read with an order (a Shopify or WooCommerce order's placement, cancellation and refunds) are
 * queued whole and in order, and what the source did not reach (a later page, a later Stripe slice)
 * is read again by the next run, never queued ahead of what came before it.
 */

export interface CatchUpDeps {
  readonly sources: readonly SourceConfig[];
  readonly hours: number;
  readonly secrets: SecretStore;
  readonly queue: EventQueue;
  readonly adapterFor: AdapterLoader;
  readonly now: () => Date;
  readonly shopHttp?: ShopHttpOptions;
  /** Arms each source's share of the run's time. @default the real timer */
  readonly sleep?: Sleep;
}

export interface CatchUpOptions {
  /**
   * Epoch ms by which every source must be read (the function's timeout, less what it keeps back).
   * Without one, each source is read to its end.
   */
  readonly deadline?: number;
}

/** A source whose share of the run ended before its shop was read to the end. */
export interface UnfinishedSource {
  readonly source: string;
  /** Its share, what the shop was doing when it ended, and how to finish it. */
  readonly reason: string;
  /** Changes found and queued before it was cut. */
  readonly found: number;
  readonly queued: number;
}

export interface CatchUpResult {
  readonly from: string;
  readonly to: string;
  readonly sources: BackfillSummary[];
  /** Sources whose shop or queue failed, with the classified reason. */
  readonly failed: { readonly source: string; readonly reason: string }[];
  /** Sources not read to the end within their share of the run's time. */
  readonly unfinished: UnfinishedSource[];
}

/**
 * Catches every source up, one after another, each within its share of the time left before
 * `deadline`; one failing or slow source does not stop the others.
 */
export async function catchUp(deps: CatchUpDeps, options: CatchUpOptions = {}): Promise<CatchUpResult> {
  const to = deps.now();
  const from = new Date(to.getTime() - deps.hours * 3600_000);
  const result: CatchUpResult = {
    from: from.toISOString(),
    to: to.toISOString(),
    sources: [],
    failed: [],
    unfinished: [],
  };
  const finish = (id: string) =>
    `the next run reads its window again, or now: connector backfill --source ${id} --from ${result.from} --to ${result.to}`;
  for (const [i, source] of deps.sources.entries()) {
    const { deadline } = options;
    const share =
      deadline === undefined ? undefined : shareOf(deadline - deps.now().getTime(), deps.sources.length - i);
    if (share !== undefined && share <= 0) {
      result.unfinished.push({
        source: source.id,
        reason: `not started: the run's time was spent; ${finish(source.id)}`,
        found: 0,
        queued: 0,
      });
      continue;
    }
    const cut = new AbortController();
    const settled = new AbortController();
    if (share !== undefined) {
      (deps.sleep ?? realSleep)(share, settled.signal).then(
        () => cut.abort(new Error(`share of ${share} ms ended`)),
        () => undefined,
      );
    }
    const progress = { found: 0, queued: 0 };
    let lastRetry: { readonly status?: number; readonly waitMs: number } | undefined;
    const http = deps.shopHttp;
    try {
      const credentials = await shopCredentials(deps.secrets, source);
      const shop = readShop(
        source,
        credentials,
        { from, to },
        {
          ...http,
          signal: http?.signal ? AbortSignal.any([http.signal, cut.signal]) : cut.signal,
          onRetry: (info) => {
            lastRetry = info;
            http?.onRetry?.(info);
          },
          now: to,
        },
      );
      const summary = await backfill(
        {
          adapterFor: deps.adapterFor,
          queue: deps.queue,
          now: deps.now,
          onProgress: ({ found, outcome }) => {
            progress.found = found;
            if (outcome === 'queued') progress.queued += 1;
          },
        },
        source,
        shop.deliveries,
        { notices: shop.notices },
      );
      result.sources.push(summary);
    } catch (error) {
      if (cut.signal.aborted && share !== undefined) {
        result.unfinished.push({
          source: source.id,
          reason: `its share of the run (${Math.round(share / 1000)} s) ended ${doing(lastRetry)}; ${finish(source.id)}`,
          ...progress,
        });
      } else {
        result.failed.push({ source: source.id, reason: describeReason(error) });
      }
    } finally {
      settled.abort();
    }
  }
  return result;
}

/**
 * Kept for each source still to read after the one starting: enough to read a healthy shop's window
 * (a few pages), so a slow shop before it cannot take its turn away.
 */
export const CATCH_UP_RESERVE_MS = 60_000;

/**
 * The share of `left` ms for the next of `sources` sources still to read: all of it but
 * `CATCH_UP_RESERVE_MS` for each of the others, or an equal part when that is more. An equal split
 * alone would cut a big first shop at a third of the run while the two after it need seconds.
 */
export function shareOf(left: number, sources: number): number {
  return Math.floor(Math.max(left / sources, left - (sources - 1) * CATCH_UP_RESERVE_MS));
}

/** What the shop was doing when a share ended, from its last retry: what the operator looks into. */
function doing(lastRetry: { readonly status?: number; readonly waitMs: number } | undefined): string {
  if (lastRetry === undefined) return 'while the shop was being read';
  const wait = Math.round(lastRetry.waitMs / 1000);
  if (lastRetry.status === undefined) {
    return `while the shop was not answering (no answer in time or a network failure; retrying after ${wait} s)`;
  }
  return lastRetry.status === 429
    ? `while the shop was answering 429 and asking for ${wait} s waits`
    : `while the shop was answering ${lastRetry.status} (retrying after ${wait} s)`;
}

function describeReason(error: unknown): string {
  // The classes' messages name the shop, the call and the fix; the class name adds nothing. Any
  // other error (the queue's) is described without what its message may echo of the request.
  return isConnectorError(error) ? error.message : describeError(error);
}

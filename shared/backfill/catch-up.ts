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
 */

export interface CatchUpDeps {
  readonly sources: readonly SourceConfig[];
  readonly hours: number;
  readonly secrets: SecretStore;
  readonly queue: EventQueue;
  readonly adapterFor: AdapterLoader;
  readonly now: () => Date;
  readonly shopHttp?: ShopHttpOptions;
}

export interface CatchUpResult {
  readonly from: string;
  readonly to: string;
  readonly sources: BackfillSummary[];
  /** Sources whose shop or queue failed, with the classified reason. */
  readonly failed: { readonly source: string; readonly reason: string }[];
}

/** Catches every source up, one after another; one failing source does not stop the others. */
export async function catchUp(deps: CatchUpDeps): Promise<CatchUpResult> {
  const to = deps.now();
  const from = new Date(to.getTime() - deps.hours * 3600_000);
  const result: CatchUpResult = { from: from.toISOString(), to: to.toISOString(), sources: [], failed: [] };
  for (const source of deps.sources) {
    try {
      const credentials = await shopCredentials(deps.secrets, source);
      const read = readShop(source, credentials, { from, to }, { ...deps.shopHttp, now: to });
      const summary = await backfill(
        { adapterFor: deps.adapterFor, queue: deps.queue, now: deps.now },
        source,
        read.deliveries,
        { notices: read.notices },
      );
      result.sources.push(summary);
    } catch (error) {
      result.failed.push({ source: source.id, reason: describeReason(error) });
    }
  }
  return result;
}

function describeReason(error: unknown): string {
  // The classes' messages name the shop, the call and the fix; the class name adds nothing. Any
  // other error (the queue's) is described without what its message may echo of the request.
  return isConnectorError(error) ? error.message : describeError(error);
}

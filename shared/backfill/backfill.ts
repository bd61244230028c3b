import type { SourceConfig } from '../config/sources.ts';
import type { ConnectorEvent } from '../domain/events.ts';
import { describeError } from '../errors.ts';
import { ledgerKey, type OrderRecord, refundOf } from '../ledger.ts';
import type { AdapterLoader, PlatformAdapter } from '../platforms/types.ts';
import type { EventQueue, Ledger } from '../ports.ts';
import { MAX_EVENT_BYTES, oversizedEvent, sendEvents } from '../queueing.ts';
import { CANCELLATION_REFUND_ID } from '../worker/flow.ts';
import type { Delivery } from './deliveries.ts';

/**
 * The backfill use case: each change read from the shop is mapped by the source's platform adapter
 * as its webhook would have been, and what the ledger does not already hold is queued with the same
 * message group and deduplication id as the webhook's. The worker then applies its usual ledger
 * rules, so a change already applied is a no-op and the rest become exactly one change each.
 */

export interface BackfillDeps {
  readonly adapterFor: AdapterLoader;
  readonly queue: EventQueue;
  /**
   * Read to tell what is already applied (and not queue it again). Without it everything mapped is
   * queued, and the worker's own ledger rules make the repeats no-ops.
   */
  readonly ledger?: Pick<Ledger, 'get'>;
  readonly now: () => Date;
  /** Told after each change found (a progress bar). */
  readonly onProgress?: (progress: {
    readonly found: number;
    readonly label: string;
    /** `queued`, `to queue` (dry run), `already applied`, or `skipped: <reason>`. */
    readonly outcome: string;
  }) => void;
}

export interface BackfillOptions {
  /** Read and map, tell what would be queued, queue nothing. */
  readonly dryRun?: boolean;
}

export interface Skipped {
  readonly label: string;
  readonly reason: string;
}

/** Every change found ends as one of: already applied, queued (or to queue, dry run), skipped. */
export interface BackfillSummary {
  readonly source: string;
  readonly dryRun: boolean;
  found: number;
  alreadyApplied: number;
  queued: number;
  readonly skipped: Skipped[];
  readonly notices: string[];
}

/** Whether the ledger already holds what `event` would do (the worker would make it a no-op). */
export function alreadyInLedger(record: OrderRecord | undefined, event: ConnectorEvent): boolean {
  if (record === undefined) return false;
  switch (event.type) {
    case 'OrderPlaced':
      return record.state === 'added' || record.state === 'skipped' || record.state === 'refused';
    case 'OrderRefunded':
      return refundOf(record, event.refundId) !== undefined;
    case 'OrderCancelled':
      return refundOf(record, CANCELLATION_REFUND_ID) !== undefined;
  }
}

/** Runs the deliveries of one source through its adapter, the ledger check and the queue. */
export async function backfill(
  deps: BackfillDeps,
  source: SourceConfig,
  deliveries: AsyncIterable<Delivery> | Iterable<Delivery>,
  options: BackfillOptions & { readonly notices?: readonly string[] } = {},
): Promise<BackfillSummary> {
  const dryRun = options.dryRun ?? false;
  const summary: BackfillSummary = {
    source: source.id,
    dryRun,
    found: 0,
    alreadyApplied: 0,
    queued: 0,
    skipped: [],
    notices: [...(options.notices ?? [])],
  };
  const adapter = await deps.adapterFor(source.platform);
  for await (const delivery of deliveries) {
    summary.found += 1;
    const outcome = await one(deps, adapter, source, delivery, dryRun);
    let text: string;
    if (outcome.kind === 'skipped') {
      summary.skipped.push({ label: delivery.label, reason: outcome.reason });
      text = `skipped: ${outcome.reason}`;
    } else if (outcome.kind === 'applied') {
      summary.alreadyApplied += 1;
      text = 'already applied';
    } else {
      summary.queued += 1;
      text = dryRun ? 'to queue' : 'queued';
    }
    deps.onProgress?.({ found: summary.found, label: delivery.label, outcome: text });
  }
  return summary;
}

type Outcome = { kind: 'skipped'; reason: string } | { kind: 'applied' } | { kind: 'queued' };

async function one(
  deps: BackfillDeps,
  adapter: PlatformAdapter,
  source: SourceConfig,
  delivery: Delivery,
  dryRun: boolean,
): Promise<Outcome> {
  if ('skipped' in delivery) return { kind: 'skipped', reason: delivery.skipped };
  let events: ConnectorEvent[];
  try {
    // No secrets: the delivery came from the shop's API with the shop's credentials, not the door.
    const result = adapter.map(delivery.request, { source, secrets: [], now: deps.now() });
    if (result.kind === 'ping') return { kind: 'skipped', reason: 'a webhook ping, no order' };
    if (result.kind === 'ignored') return { kind: 'skipped', reason: result.reason };
    events = result.events;
  } catch (error) {
    return { kind: 'skipped', reason: `not mapped: ${describeError(error)}` };
  }
  if (oversizedEvent(events)) {
    return { kind: 'skipped', reason: `an event over ${MAX_EVENT_BYTES} bytes once queued` };
  }
  const pending: ConnectorEvent[] = [];
  for (const event of events) {
    const externalId = `${source.externalIdPrefix ?? ''}${event.externalId}`;
    const record = await deps.ledger?.get(ledgerKey(source.program, externalId));
    if (!alreadyInLedger(record, event)) pending.push(event);
  }
  if (pending.length === 0) return { kind: 'applied' };
  if (!dryRun) await sendEvents(deps.queue, source, pending);
  return { kind: 'queued' };
}

import type { SourceConfig } from '../config/sources.ts';
import type { ConnectorEvent, OrderCancelled, OrderRefunded } from '../domain/events.ts';
import { PermanentError } from '../errors.ts';
import type { CallOptions } from '../ports.ts';
import { CANCELLATION_REFUND_ID, type Outcome, type WorkerDeps } from './flow.ts';
import { placeOrder } from './orders.ts';
import { refundOrder } from './refunds.ts';

/** Applies one event to the platform, exactly once, using the ledger. Throws classified errors. */
export async function processEvent(
  deps: WorkerDeps,
  received: ConnectorEvent,
  call: CallOptions = {},
): Promise<Outcome> {
  const source = deps.sources.get(received.source);
  if (!source) throw new PermanentError(`source "${received.source}" is not configured`);
  const event = withPrefix(source, received);
  switch (event.type) {
    case 'OrderPlaced':
      return placeOrder(deps, source, event, call);
    case 'OrderRefunded':
      return refundOrder(deps, source, event, call);
    case 'OrderCancelled':
      return refundOrder(deps, source, asCancellationRefund(event), call);
  }
}

/** The shop's order id as the platform and the ledger know it. Finance already names that id. */
export function withPrefix(source: SourceConfig, event: ConnectorEvent): ConnectorEvent {
  if (!source.externalIdPrefix) return event;
  if (event.type === 'OrderRefunded' && event.origin === 'finance') return event;
  return { ...event, externalId: `${source.externalIdPrefix}${event.externalId}` };
}

function asCancellationRefund(event: OrderCancelled): OrderRefunded {
  return {
    ...event,
    type: 'OrderRefunded',
    refundId: CANCELLATION_REFUND_ID,
    full: true,
    origin: 'shop',
    reason: event.reason ? `order cancelled: ${event.reason}` : 'order cancelled',
  };
}

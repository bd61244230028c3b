import { ConnectorEvent, type ConnectorEventInput } from '../../shared/domain/events.ts';

/** A click id of the platform's shape (24 hex). */
export const CLICK = '0123456789abcdef01234567';

/**
 * A worker event of a generic source, order 1001 on 2026-05-01, with a fresh event id: `fields`
 * gives the type and overrides the rest.
 */
export const workerEvent = (
  source: string,
  fields: Partial<ConnectorEventInput> & Pick<ConnectorEventInput, 'type'>,
): ConnectorEvent =>
  ConnectorEvent.parse({
    eventId: `e-${Math.random()}`,
    source,
    platform: 'generic',
    externalId: '1001',
    receivedAt: '2026-05-01T10:00:00.000Z',
    ...fields,
  });

/** Order 1001 of `source`: 50.00 EUR, tracked by one click id and the buyer's IP. */
export const trackedOrder = (source: string): ConnectorEvent =>
  workerEvent(source, {
    type: 'OrderPlaced',
    amount: 5_000,
    currency: 'EUR',
    clickIds: [CLICK],
    buyerIp: '198.51.100.4',
  });

/**
 * Refund `refundId` of order 1001 of `source`: `amount` minor units of EUR, its event id named after
 * it, so that a test can hand the same event to a worker again as SQS redelivers a message.
 */
export const partialRefund = (source: string, refundId: string, amount: number): ConnectorEvent =>
  workerEvent(source, {
    type: 'OrderRefunded',
    eventId: `refund-${refundId}`,
    refundId,
    amount,
    currency: 'EUR',
  });

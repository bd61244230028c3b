import { createHash } from 'node:crypto';
import type { ConnectorEvent } from './domain/events.ts';

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * FIFO message group of an order: every event of one order (placed, refunded, cancelled) lands in the
 * same group, so SQS hands them to the worker in order; different orders proceed in parallel.
 */
export function messageGroupId(program: string, externalId: string): string {
  return sha256(`${program}\u0000${externalId}`).slice(0, 64);
}

/**
 * FIFO deduplication id: the platform's delivery id plus what distinguishes events mapped from one
 * delivery (a WooCommerce update can carry several refunds). SQS drops a repeat within 5 minutes; the
 * ledger catches later repeats.
 */
export function deduplicationId(event: ConnectorEvent): string {
  const refund = event.type === 'OrderRefunded' ? event.refundId : '';
  return sha256(
    `${event.source}\u0000${event.eventId}\u0000${event.type}\u0000${event.externalId}\u0000${refund}`,
  ).slice(0, 64);
}

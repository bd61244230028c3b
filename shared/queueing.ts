import { createHash } from 'node:crypto';
import type { ConnectorEvent } from './domain/events.ts';
import type { EventQueue } from './ports.ts';

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

/**
 * The largest SQS message the connector counts on: the queues are created with this
 * `MaximumMessageSize` (infra and the local stack), the value every SQS queue accepts.
 */
export const SQS_MAX_MESSAGE_BYTES = 262_144;

/**
 * The largest encoded event: what is left of a message once the DLQ's failure attributes (at most 10,
 * each cut to 1,000 characters) are added when the worker parks it.
 */
export const MAX_EVENT_BYTES = SQS_MAX_MESSAGE_BYTES - 32 * 1024;

const NOT_PRINTABLE_ASCII = /[^\x20-\x7e]/g;

/**
 * The message body of an event: JSON with every character outside printable ASCII written as a
 * `\uXXXX` escape. SQS refuses characters such as U+FFFF (and fauxqs any emoji); escaped, every valid
 * string goes through, and `JSON.parse` (the worker, the pollers, the DLQ tools) reads it back as is.
 */
export function encodeEvent(event: ConnectorEvent): string {
  return JSON.stringify(event).replace(
    NOT_PRINTABLE_ASCII,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

// What SQS takes in a message attribute (fauxqs also refuses U+10000 and up).
const NOT_SQS_TEXT = /[^\t\n\r\u0020-\ud7ff\ue000-\ufffd]/g;

/**
 * A message attribute's value: a label for operators (the body is what counts), so a character SQS
 * refuses becomes U+FFFD rather than failing the send.
 */
export function attributeText(value: string, max = 1000): string {
  return value.slice(0, max).replace(NOT_SQS_TEXT, '\ufffd');
}

/** The first event too large for a queue message once encoded, if any. */
export function oversizedEvent(events: readonly ConnectorEvent[]): ConnectorEvent | undefined {
  return events.find((e) => encodeEvent(e).length > MAX_EVENT_BYTES);
}

/**
 * Sends a delivery's events in order, each in its order's message group with its deduplication id:
 * what the webhook door and the backfill both do, so both give the worker the same messages. The
 * group is the order's as the ledger names it (the source's `externalIdPrefix` before the shop's
 * id, as the worker applies it), so every message about one ledger record (a finance refund, the
 * accept job's) runs after the others, never beside them.
 */
export async function sendEvents(
  queue: EventQueue,
  source: { readonly program: string; readonly externalIdPrefix?: string | undefined },
  events: readonly ConnectorEvent[],
): Promise<string[]> {
  const messageIds: string[] = [];
  for (const event of events) {
    messageIds.push(
      await queue.send(event, {
        groupId: messageGroupId(source.program, `${source.externalIdPrefix ?? ''}${event.externalId}`),
        deduplicationId: deduplicationId(event),
      }),
    );
  }
  return messageIds;
}

import { createHash } from 'node:crypto';
import { ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import type { ConnectorEventInput } from '../../shared/domain/events.ts';
import { messageGroupId } from '../../shared/queueing.ts';

export interface FifoRecordOptions {
  readonly messageId: string;
  readonly program: string;
  /** When the webhook queued it (epoch ms). */
  readonly sentAt: number;
  readonly receiveCount?: number;
  readonly receiptHandle?: string;
  /** Message attributes over the ones the webhook sets (eventType, externalId, source). */
  readonly attributes?: Record<string, string>;
}

/** A record as Lambda's SQS FIFO event source hands it over, with the attributes producers set. */
export function fifoRecord(event: ConnectorEventInput, options: FifoRecordOptions): SQSRecord {
  const receiveCount = options.receiveCount ?? 1;
  const body = JSON.stringify(event);
  const attributes: Record<string, string> = {
    eventType: event.type,
    externalId: event.externalId,
    source: event.source,
    ...options.attributes,
  };
  return {
    messageId: options.messageId,
    receiptHandle: options.receiptHandle ?? `rh-${options.messageId}-${receiveCount}`,
    body,
    attributes: {
      ApproximateReceiveCount: String(receiveCount),
      SentTimestamp: String(options.sentAt),
      SenderId: 'AROAEXAMPLE:connector-webhook',
      ApproximateFirstReceiveTimestamp: String(options.sentAt + 1_000),
      MessageGroupId: messageGroupId(options.program, event.externalId),
      MessageDeduplicationId: event.eventId,
      SequenceNumber: '18850000000000000000',
    },
    messageAttributes: Object.fromEntries(
      Object.entries(attributes).map(([name, value]) => [
        name,
        { stringValue: value, stringListValues: [], binaryListValues: [], dataType: 'String' },
      ]),
    ),
    md5OfBody: createHash('md5').update(body).digest('hex'),
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:eu-west-1:123456789012:connector-events.fifo',
    awsRegion: 'eu-west-1',
  };
}

/** A message as a test reads it from a queue: its JSON body and its string attributes. */
export interface PeekedMessage {
  readonly body: Record<string, unknown>;
  readonly attributes: Record<string, string | undefined>;
}

/**
 * Up to 10 messages of `queueUrl` (the DLQ, mostly), read without hiding them (visibility 0), so the
 * next read sees them again.
 */
export async function peekQueue(sqs: SQSClient, queueUrl: string): Promise<PeekedMessage[]> {
  const out = await sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queueUrl,
      MaxNumberOfMessages: 10,
      MessageAttributeNames: ['All'],
      VisibilityTimeout: 0,
    }),
  );
  return (out.Messages ?? []).map((m) => ({
    body: JSON.parse(m.Body ?? '{}') as Record<string, unknown>,
    attributes: Object.fromEntries(
      Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, v.StringValue]),
    ),
  }));
}

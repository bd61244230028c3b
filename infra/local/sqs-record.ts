import type { Message } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { LOCAL_AWS } from '../../local/defaults.ts';

/**
 * The record Lambda's SQS event source mapping hands the worker for a received message (the local
 * pollers and the handler tests play the mapping). Kept apart from the stack so a test can build
 * records without loading it.
 */
export function toRecord(message: Message, queueName: string): SQSRecord {
  const attributes = message.Attributes ?? {};
  const messageAttributes: SQSRecord['messageAttributes'] = {};
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
    messageAttributes[name] = {
      stringValue: value.StringValue,
      dataType: value.DataType ?? 'String',
      stringListValues: [],
      binaryListValues: [],
    };
  }
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body: message.Body ?? '',
    attributes: {
      ApproximateReceiveCount: attributes.ApproximateReceiveCount ?? '1',
      SentTimestamp: attributes.SentTimestamp ?? '',
      SenderId: attributes.SenderId ?? '',
      ApproximateFirstReceiveTimestamp: attributes.ApproximateFirstReceiveTimestamp ?? '',
      MessageGroupId: attributes.MessageGroupId,
      MessageDeduplicationId: attributes.MessageDeduplicationId,
      SequenceNumber: attributes.SequenceNumber,
    },
    messageAttributes,
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: `arn:aws:sqs:${LOCAL_AWS.region}:000000000000:${queueName}`,
    awsRegion: LOCAL_AWS.region,
  };
}

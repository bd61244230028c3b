import {
  ChangeMessageVisibilityCommand,
  type MessageAttributeValue,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { ConnectorEvent } from '../domain/events.ts';
import type { EventQueue, FailureAttributes, FailureQueue } from '../ports.ts';
import { attributeText, encodeEvent } from '../queueing.ts';

/** Sends connector events to the main FIFO queue. */
export class SqsEventQueue implements EventQueue {
  readonly #client: SQSClient;
  readonly #queueUrl: string;

  constructor(client: SQSClient, queueUrl: string) {
    this.#client = client;
    this.#queueUrl = queueUrl;
  }

  async send(event: ConnectorEvent, options: { groupId: string; deduplicationId: string }): Promise<string> {
    const out = await this.#client.send(
      new SendMessageCommand({
        QueueUrl: this.#queueUrl,
        MessageBody: encodeEvent(event),
        MessageGroupId: options.groupId,
        MessageDeduplicationId: options.deduplicationId,
        MessageAttributes: {
          eventType: { DataType: 'String', StringValue: event.type },
          externalId: { DataType: 'String', StringValue: attributeText(event.externalId) },
          source: { DataType: 'String', StringValue: attributeText(event.source) },
        },
      }),
    );
    if (!out.MessageId) throw new Error('SQS answered SendMessage without a MessageId');
    return out.MessageId;
  }
}

export class SqsFailureQueue implements FailureQueue {
  readonly #client: SQSClient;
  readonly #queueUrl: string;
  readonly #dlqUrl: string;

  constructor(client: SQSClient, queueUrl: string, dlqUrl: string) {
    this.#client = client;
    this.#queueUrl = queueUrl;
    this.#dlqUrl = dlqUrl;
  }

  async park(
    message: { body: string; groupId: string; deduplicationId: string },
    failure: FailureAttributes,
  ): Promise<void> {
    await this.#client.send(
      new SendMessageCommand({
        QueueUrl: this.#dlqUrl,
        MessageBody: message.body,
        MessageGroupId: message.groupId,
        MessageDeduplicationId: message.deduplicationId,
        MessageAttributes: toAttributes(failure),
      }),
    );
  }

  async delay(receiptHandle: string, seconds: number): Promise<void> {
    await this.#client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: this.#queueUrl,
        ReceiptHandle: receiptHandle,
        VisibilityTimeout: Math.max(0, Math.min(43_200, Math.round(seconds))),
      }),
    );
  }
}

/** SQS allows at most 10 message attributes; reasons are cut to stay readable (and within MAX_EVENT_BYTES' margin). */
function toAttributes(failure: FailureAttributes): Record<string, MessageAttributeValue> {
  const out: Record<string, MessageAttributeValue> = {};
  for (const [name, value] of Object.entries(failure)) {
    if (value === undefined || value === '') continue;
    out[name] = { DataType: 'String', StringValue: attributeText(String(value)) };
  }
  return out;
}

export function fromAttributes(
  attributes: Record<string, MessageAttributeValue> | undefined,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (value.StringValue !== undefined) out[name] = value.StringValue;
  }
  return out;
}

import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  type Message,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { type ReplayEvent, replayQueue } from '../../cli/dlq-reader.ts';
import { OrderRefunded } from '../../shared/domain/events.ts';
import { attributeText, encodeEvent, messageGroupId } from '../../shared/queueing.ts';

/**
 * SendMessage takes in a message attribute only #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
 * #x10000-#x10FFFF, and answers InvalidParameterValue otherwise. The door lets an order id hold
 * U+FFFF or U+FFFE (idText refuses only controls and lone surrogates), and the body keeps it; the
 * producers label messages through `attributeText`. A replay must label its message the same way, or
 * SQS refuses it on every run.
 *
 * A stub SQS client, not fauxqs: fauxqs does not check attribute characters, so only a client that
 * applies SQS's rule can show the refusal. The rest of replay is covered against fauxqs in
 * test/integration/cli-dlq.test.ts.
 */
const SQS_ATTRIBUTE_TEXT = /^[\t\n\r\u0020-\ud7ff\ue000-\ufffd\u{10000}-\u{10ffff}]*$/u;
const DLQ = 'https://sqs.eu-west-1.amazonaws.com/123456789012/connector-events-dlq.fifo';
const MAIN = 'https://sqs.eu-west-1.amazonaws.com/123456789012/connector-events.fifo';
const NOW = new Date('2026-05-02T00:00:00.000Z');

/** A refund the worker parked, labelled as SqsFailureQueue.park labels it (through attributeText). */
function parked(externalId: string, source = 'shopify'): Message {
  const event = OrderRefunded.parse({
    type: 'OrderRefunded',
    eventId: 'finance:rf-1',
    source,
    platform: 'finance',
    externalId,
    receivedAt: '2026-05-01T10:00:00.000Z',
    refundId: 'rf-1',
    full: true,
    origin: 'finance',
  });
  const label = (value: string) => ({ DataType: 'String', StringValue: attributeText(value) });
  return {
    MessageId: 'm-1',
    ReceiptHandle: 'h-1',
    Body: encodeEvent(event),
    Attributes: {
      MessageGroupId: messageGroupId('program-1', externalId),
      SentTimestamp: String(Date.parse('2026-05-01T10:05:00.000Z')),
      ApproximateReceiveCount: '1',
    },
    MessageAttributes: {
      failureClass: label('permanent'),
      reason: label('platform refused'),
      attempts: label('3'),
      externalId: label(externalId),
      eventType: label('OrderRefunded'),
      source: label(source),
    },
  };
}

/** Hands out `messages` once, and checks SendMessage's attributes as SQS does. */
function sqsWithAttributeRule(messages: Message[]) {
  let handedOut = false;
  const sent: NonNullable<SendMessageCommand['input']>[] = [];
  const client = {
    async send(command: unknown) {
      if (command instanceof ReceiveMessageCommand) {
        const out = handedOut ? [] : messages;
        handedOut = true;
        return { Messages: out };
      }
      if (command instanceof SendMessageCommand) {
        for (const [name, value] of Object.entries(command.input.MessageAttributes ?? {})) {
          if (!SQS_ATTRIBUTE_TEXT.test(value.StringValue ?? '')) {
            throw Object.assign(new Error(`Invalid characters found in attribute ${name}`), {
              name: 'InvalidParameterValue',
            });
          }
        }
        sent.push(command.input);
        return { MessageId: `new-${sent.length}` };
      }
      if (command instanceof DeleteMessageCommand) return {};
      if (command instanceof ChangeMessageVisibilityBatchCommand) return { Successful: [], Failed: [] };
      throw new Error(`unexpected command ${(command as object).constructor.name}`);
    },
  };
  return { client: client as unknown as SQSClient, sent };
}

async function replay(messages: Message[]) {
  const sqs = sqsWithAttributeRule(messages);
  const events: ReplayEvent[] = [];
  const result = await replayQueue(sqs.client, DLQ, MAIN, {
    filter: {},
    now: () => NOW,
    onEvent: (e) => events.push(e),
  });
  return { result, events, sent: sqs.sent };
}

describe('dlq replay of an order id SQS does not take in an attribute', () => {
  it.each([
    ['U+FFFF', 'A-1\uffff'],
    ['U+FFFE', '\ufffe1001'],
  ])('replays a message whose order id holds %s, the body unchanged', async (_what, externalId) => {
    // Prepare
    const message = parked(externalId);
    // Act
    const { result, events, sent } = await replay([message]);
    // Assess
    expect(events.map((e) => [e.status, e.error])).toEqual([['replayed', undefined]]);
    expect(result).toEqual({ replayed: 1, failed: 0 });
    expect(sent[0]?.MessageBody).toBe(message.Body);
    expect(JSON.parse(sent[0]?.MessageBody ?? '{}').externalId).toBe(externalId);
    expect(sent[0]?.MessageAttributes?.['externalId']?.StringValue).toBe(attributeText(externalId));
  });

  it('labels the replayed message as the producers do: externalId and source through attributeText', async () => {
    // Prepare
    const message = parked('1001\uffff', 'shop\uffff');
    // Act
    const { sent } = await replay([message]);
    // Assess
    const labels = Object.fromEntries(
      Object.entries(sent[0]?.MessageAttributes ?? {}).map(([name, value]) => [name, value.StringValue]),
    );
    expect(labels).toMatchObject({
      eventType: 'OrderRefunded',
      externalId: attributeText('1001\uffff'),
      source: attributeText('shop\uffff'),
      attempts: '3',
    });
  });

  it('replays an ordinary order id with its labels as they were', async () => {
    // Act
    const { result, sent } = await replay([parked('A-1')]);
    // Assess
    expect(result).toEqual({ replayed: 1, failed: 0 });
    expect(sent[0]?.MessageAttributes?.['externalId']?.StringValue).toBe('A-1');
  });
});

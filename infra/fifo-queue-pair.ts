import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { SQS_MAX_MESSAGE_BYTES } from '../shared/queueing.ts';
import { DEAD_LETTER_RETENTION_DAYS } from './deploy-config.ts';

export interface FifoQueuePairProps {
  /**
   * Visibility timeout of the main queue. Lambda's guidance for an SQS event source is at least six
   * times the consumer's timeout, so a batch still in a retrying invocation is not handed out twice.
   */
  readonly visibilityTimeout: Duration;
  /**
   * Receives before SQS moves a message to the DLQ. Lambda's guidance is at least 5: a throttled
   * invocation also counts as a receive.
   * @default 6
   */
  readonly maxReceiveCount?: number;
  /**
   * How long the main queue keeps a message.
   * @default Duration.days(4)
   */
  readonly retentionPeriod?: Duration;
}

/**
 * A FIFO queue and its FIFO dead-letter queue, both encrypted (SQS-managed keys) and TLS-only.
 *
 * Deduplication is by the message deduplication id the connector sets (the shop's event id), never by
 * content: two webhooks with equal bodies can be two real orders and one order can arrive with
 * different bodies. High-throughput FIFO (deduplication and throughput per message group) lifts the
 * 300 messages/s per-queue ceiling; ordering is only needed within one order's group anyway.
 *
 * The DLQ is retained when the stack is deleted: it holds the orders the connector could not deliver.
 */
export class FifoQueuePair extends Construct {
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;

  constructor(scope: Construct, id: string, props: FifoQueuePairProps) {
    super(scope, id);
    const maxReceiveCount = props.maxReceiveCount ?? 6;
    if (maxReceiveCount < 5) throw new Error(`${this.node.path}: maxReceiveCount must be at least 5`);

    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetterQueue', {
      fifo: true,
      contentBasedDeduplication: false,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      // SQS's maximum; FIFO queues reset the enqueue time when a message is moved, so it is 14 days
      // from the move, not from the order (the DeadLetterExpiring alarm warns days before).
      retentionPeriod: Duration.days(DEAD_LETTER_RETENTION_DAYS),
      // The size ingest checks every event against (413 above it), so a parked message always fits.
      maxMessageSizeBytes: SQS_MAX_MESSAGE_BYTES,
      removalPolicy: RemovalPolicy.RETAIN,
    });

    this.queue = new sqs.Queue(this, 'Queue', {
      fifo: true,
      contentBasedDeduplication: false,
      deduplicationScope: sqs.DeduplicationScope.MESSAGE_GROUP,
      fifoThroughputLimit: sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      visibilityTimeout: props.visibilityTimeout,
      retentionPeriod: props.retentionPeriod ?? Duration.days(4),
      maxMessageSizeBytes: SQS_MAX_MESSAGE_BYTES,
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount },
    });
  }
}

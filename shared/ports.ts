import type { ConnectorEvent } from './domain/events.ts';

/** Attributes an operator reads on a parked message (SQS message attributes, all strings). */
export interface FailureAttributes {
  readonly failureClass: string;
  readonly reason: string;
  readonly platformStatus?: string;
  readonly platformMessage?: string;
  readonly attempts: string;
  readonly firstFailureAt: string;
  readonly lastFailureAt: string;
  readonly eventType?: string;
  readonly externalId?: string;
  readonly source?: string;
}

/** Sends events to the FIFO queue. */
export interface EventQueue {
  /** Resolves with the queue's message id once SQS has stored the message durably. */
  send(event: ConnectorEvent, options: { groupId: string; deduplicationId: string }): Promise<string>;
}

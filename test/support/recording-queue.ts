import type { ConnectorEvent } from '../../shared/domain/events.ts';
import type { EventQueue } from '../../shared/ports.ts';

/** An `EventQueue` that keeps what it is given, in order, with each message's group and dedup id. */
export class RecordingQueue implements EventQueue {
  readonly sent: {
    readonly event: ConnectorEvent;
    readonly groupId: string;
    readonly deduplicationId: string;
  }[] = [];

  async send(event: ConnectorEvent, options: Parameters<EventQueue['send']>[1]): Promise<string> {
    this.sent.push({ event, groupId: options.groupId, deduplicationId: options.deduplicationId });
    return `m${this.sent.length}`;
  }

  /** The events sent, in order. */
  get events(): ConnectorEvent[] {
    return this.sent.map((s) => s.event);
  }
}

import {
  DeleteMessageBatchCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { makeHandler as makeWorkerHandler } from '../../functions/worker.ts';
import { toRecord } from './sqs-record.ts';

/** Where the pollers receive: the queue and the client to reach it. */
export interface PolledQueue {
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  readonly queueName: string;
}

type Worker = ReturnType<typeof makeWorkerHandler>;

/** What the event source mapping is set to: how many batches at once, and their size. */
export interface PollerSettings {
  /** Pollers, each holding one batch at a time (the event source's maxConcurrency). */
  readonly count: number;
  /** Messages per receive, 1 to 10 (the event source's batchSize; `worker.batchSize` deployed). */
  readonly batchSize: number;
}

/**
 * Drives the worker like Lambda's SQS event source mapping does. Kept apart from the local stack so
 * a program that only polls (the bench's worker instances, bundled like the worker function) loads
 * the pollers and the worker, not the emulators, the sandbox and the other functions.
 *
 * Once a receive comes back empty, the pollers take turns to receive (one receive in flight) until
 * one brings messages again. fauxqs answers every waiting long poll when one message becomes
 * available (SQS keeps the others waiting out their wait), so ten pollers waiting at once made ten
 * calls per message that became available, all but one coming back empty: at the end of a
 * ten-process bench drain, where each refund becomes available when its order is deleted, about
 * 3,300 receives for 2,200 messages, each an SDK call in the worker's process (Lambda makes them
 * outside the function). While the queue has messages the pollers receive side by side, as before:
 * taking turns then held back the start of a drain.
 */
export class Pollers {
  readonly #queue: PolledQueue;
  readonly #worker: Worker;
  readonly #settings: PollerSettings;
  #running = false;
  #loops: Promise<void>[] = [];
  /** The last receive came back empty: receive in turns. */
  #drained = false;
  /** The receive in flight while taking turns (or the last one): the next turn begins when it ends. */
  #turn: Promise<unknown> = Promise.resolve();

  constructor(queue: PolledQueue, worker: Worker, settings: PollerSettings) {
    if (!Number.isInteger(settings.batchSize) || settings.batchSize < 1 || settings.batchSize > 10)
      throw new RangeError(`batchSize must be a whole number from 1 to 10, got ${settings.batchSize}`);
    this.#queue = queue;
    this.#worker = worker;
    this.#settings = settings;
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#loops = Array.from({ length: this.#settings.count }, () => this.#loop());
  }

  async stop(): Promise<void> {
    this.#running = false;
    await Promise.all(this.#loops);
    this.#loops = [];
  }

  /** Receives at once while the queue has messages, else after the receive in flight ends. */
  #receive(): Promise<Message[]> {
    const receive = async (): Promise<Message[]> => {
      if (!this.#running) return [];
      const messages = await receiveBatch(this.#queue, this.#settings.batchSize);
      this.#drained = messages.length === 0;
      return messages;
    };
    if (!this.#drained) return receive();
    const turn = this.#turn.then(receive);
    this.#turn = turn.catch(() => undefined);
    return turn;
  }

  async #loop(): Promise<void> {
    while (this.#running) {
      let messages: Message[] = [];
      try {
        messages = await this.#receive();
      } catch {
        if (!this.#running) return;
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      if (messages.length === 0) continue;
      const records = messages.map((m) => toRecord(m, this.#queue.queueName));
      let failed: Set<string>;
      try {
        const response = await this.#worker({ Records: records }, { getRemainingTimeInMillis: () => 30_000 });
        failed = new Set(response.batchItemFailures.map((f) => f.itemIdentifier));
      } catch {
        // A crashed invocation: Lambda leaves the whole batch to the visibility timeout.
        continue;
      }
      await deleteDone(this.#queue, messages, failed).catch(() => undefined);
    }
  }
}

/** One receive as the event source mapping makes it: up to `batchSize` messages, every attribute. */
export async function receiveBatch(
  queue: Pick<PolledQueue, 'sqs' | 'queueUrl'>,
  batchSize = 10,
): Promise<Message[]> {
  const out = await queue.sqs.send(
    new ReceiveMessageCommand({
      QueueUrl: queue.queueUrl,
      MaxNumberOfMessages: batchSize,
      WaitTimeSeconds: 1,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    }),
  );
  return out.Messages ?? [];
}

/** Deletes the messages of a batch the worker's partial batch response did not report as failed. */
export async function deleteDone(
  queue: Pick<PolledQueue, 'sqs' | 'queueUrl'>,
  messages: readonly Message[],
  failed: ReadonlySet<string>,
): Promise<void> {
  const done = messages.filter((m) => m.MessageId && !failed.has(m.MessageId));
  if (done.length === 0) return;
  await queue.sqs.send(
    new DeleteMessageBatchCommand({
      QueueUrl: queue.queueUrl,
      Entries: done.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle ?? '' })),
    }),
  );
}

import { DeleteMessageCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';

/**
 * The simplest connector one could write, as a yardstick for the real worker: one loop, one message
 * and one platform call at a time, no client-side limiter, and a retry that waits a fixed backoff
 * without reading `retry-after` or the rate-limit headers. It gives up after `maxAttempts` and
 * deletes the message anyway (no DLQ, no ledger), as such loops usually do.
 */
export interface BaselineOptions {
  readonly sqs: SQSClient;
  readonly queueUrl: string;
  readonly platformUrl: string;
  readonly token: string;
  readonly program: string;
  readonly rule: string;
  /** @default 5 */
  readonly maxAttempts?: number;
  /** First backoff, doubled per attempt. @default 100 */
  readonly backoffMs?: number;
  /** Told about every answer of the platform (status 0 for a network error). */
  readonly onResponse?: (route: string, status: number) => void;
  /** Told when a conversion was added. */
  readonly onAdded?: (externalId: string, at: number) => void;
}

export interface BaselineStats {
  readonly processed: number;
  readonly gaveUp: number;
}

interface QueuedEvent {
  readonly type: string;
  readonly externalId: string;
  readonly amount?: number;
  readonly currency?: string;
  readonly clickIds?: string[];
  readonly buyerIp?: string;
  readonly full?: boolean;
}

/** Runs until `done()` says the queue is drained. */
export async function runBaseline(options: BaselineOptions, done: () => boolean): Promise<BaselineStats> {
  let processed = 0;
  let gaveUp = 0;
  while (!done()) {
    const out = await options.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: options.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    for (const message of out.Messages ?? []) {
      const event = JSON.parse(message.Body ?? '{}') as QueuedEvent;
      const ok = await handle(options, event).catch(() => false);
      if (!ok) gaveUp += 1;
      processed += 1;
      await options.sqs.send(
        new DeleteMessageCommand({ QueueUrl: options.queueUrl, ReceiptHandle: message.ReceiptHandle ?? '' }),
      );
    }
  }
  return { processed, gaveUp };
}

async function handle(options: BaselineOptions, event: QueuedEvent): Promise<boolean> {
  if (event.type === 'OrderPlaced') {
    const answer = await call(options, 'POST', '/advertiser/conversions.add', {
      kind: 'tracking',
      program: options.program,
      rule: options.rule,
      externalId: event.externalId,
      amount: event.amount,
      currency: event.currency,
      cids: event.clickIds ?? [],
      ip: event.buyerIp ?? '',
    });
    if (answer) options.onAdded?.(event.externalId, Date.now());
    return answer !== undefined;
  }
  if (event.type === 'OrderRefunded') {
    const query = new URLSearchParams({ program: options.program, externalId: event.externalId });
    const info = (await call(options, 'GET', `/advertiser/conversions.info?${query}`)) as
      | { conversion?: { id: string; amount: number } }
      | undefined;
    const conversion = info?.conversion;
    if (!conversion) return false;
    // Relative, read-then-write: what a naive loop does (a repeat would subtract twice).
    const amount = event.full ? 0 : Math.max(0, conversion.amount - (event.amount ?? 0));
    const updated = await call(options, 'POST', '/advertiser/conversions.update', {
      id: conversion.id,
      amount,
      reason: 'refund',
    });
    return updated !== undefined;
  }
  return true;
}

async function call(
  options: BaselineOptions,
  method: string,
  path: string,
  body?: unknown,
): Promise<unknown> {
  const maxAttempts = options.maxAttempts ?? 5;
  let wait = options.backoffMs ?? 100;
  const route = path.split('?')[0] ?? path;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    let status = 0;
    try {
      const res = await fetch(`${options.platformUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${options.token}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      status = res.status;
      const json = (await res.json().catch(() => undefined)) as unknown;
      options.onResponse?.(route, status);
      if (res.ok) return json ?? {};
      if (status < 500 && status !== 429) return undefined;
    } catch {
      options.onResponse?.(route, 0);
    }
    await new Promise((r) => setTimeout(r, wait));
    wait *= 2;
  }
  return undefined;
}

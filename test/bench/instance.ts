import { randomUUID } from 'node:crypto';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import { backendFor, makeHandler as makeWorkerHandler } from '../../functions/worker.ts';
import { Pollers } from '../../infra/local/stack.ts';
import { LOCAL_AWS } from '../../local/defaults.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import { SqsFailureQueue } from '../../shared/adapters/sqs.ts';
import { CurrentApiBackend } from '../../shared/affiliate/backend.ts';
import { AffiliateClient } from '../../shared/affiliate/client.ts';
import { SourceConfig, type SourceConfigInput } from '../../shared/config/sources.ts';
import { LegacyClient } from '../../shared/legacy/client.ts';
import { settleMsFor } from '../../shared/worker/flow.ts';

/**
 * One worker instance of the multi-instance drain, in its own process as a Lambda container is:
 * its own AWS clients, affiliate client, limiter and pollers, sharing only the emulators and the
 * sandbox with the others. Started by run.ts with IPC; answers `stop` with what it measured.
 */
export interface InstanceConfig {
  readonly sqsEndpoint: string;
  readonly dynamoEndpoint: string;
  readonly queueUrl: string;
  readonly dlqUrl: string;
  readonly queueName: string;
  readonly tableName: string;
  readonly platformUrl: string;
  readonly token: string;
  readonly legacy: { readonly userCode: string; readonly apiKey: string };
  readonly sources: SourceConfigInput[];
  readonly pollers: number;
  readonly ratePerSecond: number;
  /** Adaptive pacing from here; a fixed rate when absent. */
  readonly initialRatePerSecond?: number;
}

export interface InstanceReport {
  /** Epoch ms of each successful `conversions.add`. */
  readonly adds: number[];
  /** Milliseconds the client-side limiter made calls wait, summed. */
  readonly limiterWaitMs: number;
  /** Platform call time (send to answer), summed. */
  readonly requestMs: number;
  readonly requests: number;
  /** CPU time of this process, user + system. */
  readonly cpuMs: number;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as InstanceConfig;
  const adds: number[] = [];
  let limiterWaitMs = 0;
  let requestMs = 0;
  let requests = 0;
  const sqs = new SQSClient({ ...LOCAL_AWS, endpoint: config.sqsEndpoint });
  const dynamo = new DynamoDBClient({ ...LOCAL_AWS, endpoint: config.dynamoEndpoint });
  const client = new AffiliateClient({
    baseUrl: config.platformUrl,
    token: config.token,
    ratePerSecond: config.ratePerSecond,
    initialRatePerSecond: config.initialRatePerSecond,
    onEvent: (e) => {
      if (e.type === 'rate_limited' && e.status === undefined) limiterWaitMs += e.waitMs ?? 0;
      if (e.type !== 'request') return;
      requests += 1;
      requestMs += e.durationMs ?? 0;
      if (e.route === 'conversions.add' && e.status === 200) adds.push(Date.now());
    },
  });
  const sources = new Map(config.sources.map((s) => SourceConfig.parse(s)).map((s) => [s.id, s]));
  const worker = makeWorkerHandler({
    ledger: new DynamoLedger(dynamo, config.tableName),
    sources,
    backendFor: backendFor({
      current: new CurrentApiBackend(client),
      legacy: new LegacyClient({ baseUrl: config.platformUrl, ...config.legacy }),
    }),
    failures: new SqsFailureQueue(sqs, config.queueUrl, config.dlqUrl),
    now: Date.now,
    workerId: randomUUID(),
    leaseMs: 60_000,
    settleMs: settleMsFor(5_000),
    visibilityBaseSeconds: 2,
    observe: () => undefined,
  });
  const pollers = new Pollers(
    { sqs, queueUrl: config.queueUrl, queueName: config.queueName },
    worker,
    config.pollers,
  );
  pollers.start();
  process.send?.({ type: 'ready' });
  process.on('message', (message: { type?: string }) => {
    if (message.type !== 'stop') return;
    void pollers.stop().then(() => {
      const cpu = process.cpuUsage();
      const report: InstanceReport = {
        adds,
        limiterWaitMs,
        requestMs,
        requests,
        cpuMs: (cpu.user + cpu.system) / 1000,
      };
      process.send?.({ type: 'report', report }, () => process.exit(0));
    });
  });
}

await main();

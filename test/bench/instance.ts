import { buildWorkerDeps, makeHandler as makeWorkerHandler } from '../../functions/worker.ts';
import { functionClients } from '../../infra/local/function-clients.ts';
import { Pollers } from '../../infra/local/pollers.ts';
import type { Env } from '../../shared/config/env.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { receiveConfig } from './config-channel.ts';
import { exitWithParent } from './leftovers.ts';
import type { TimedCall } from './phases.ts';

/**
 * One worker instance of the multi-instance drain, in its own process as a Lambda container is:
 * its own AWS clients, affiliate client, limiter and pollers, sharing only the emulators and the
 * sandbox with the others. Wired by `buildWorkerDeps` from the settings CDK gives the function, so
 * it runs the deployed worker (lease, settle, backoff, client timeout and pacing included); only
 * the secret store reads `env` instead of Secrets Manager. Started by run.ts with IPC
 * (`forkWithConfig`), which sends it these settings first; answers `stop` with what it measured.
 */
export interface InstanceConfig {
  readonly sqsEndpoint: string;
  readonly dynamoEndpoint: string;
  readonly queueName: string;
  /** The worker's settings as the stack gives them (QUEUE_URL, AFFILIATE_RATE_PER_SECOND, …) and its secrets. */
  readonly env: Env;
  readonly pollers: number;
  /** Messages per batch, as the event source's batchSize. */
  readonly batchSize: number;
  /** Boot, say `ready`, and start polling only on `go` (a warm container), instead of at once. */
  readonly startOnGo?: boolean;
}

/** Where one route's calls spent their time in this instance. */
export interface RouteProfile {
  /** Attempts sent (`request` events). */
  requests: number;
  /** Calls the client-side limiter made wait, and for how long in total. */
  waited: number;
  waitMs: number;
  /** Send to answer, summed. */
  requestMs: number;
  /** The platform's 429s. */
  refused: number;
  /** Epoch ms of each attempt's answer, for the rate second by second. */
  answers: number[];
}

export interface InstanceReport {
  /** Epoch ms of each successful `conversions.add`. */
  readonly adds: number[];
  readonly routes: Record<string, RouteProfile>;
  /** CPU time of this process, user + system. */
  readonly cpuMs: number;
  /** Every call to DynamoDB (ledger, pacing record) and to SQS (receives, deletes, sends), timed. */
  readonly awsCalls: { readonly dynamodb: TimedCall[]; readonly sqs: TimedCall[] };
}

/**
 * An SDK v3 middleware (for the first step of a client's stack, so retries are inside it) that
 * records in `into` when each call began and how long it took. The emulators run in the bench's
 * process, on the cores the instances share: how fast they answer is part of where a drain's time
 * goes.
 */
function timeCalls(into: TimedCall[]) {
  return <A, R>(next: (args: A) => Promise<R>) =>
    async (args: A): Promise<R> => {
      const startedAt = Date.now();
      try {
        return await next(args);
      } finally {
        into.push([startedAt, Date.now() - startedAt]);
      }
    };
}
const CALL_TIMING = { step: 'initialize', name: 'benchCallTiming' } as const;

async function main(): Promise<void> {
  exitWithParent();
  const config = await receiveConfig<InstanceConfig>();
  const adds: number[] = [];
  const routes: Record<string, RouteProfile> = {};
  const route = (name: string): RouteProfile => {
    routes[name] ??= { requests: 0, waited: 0, waitMs: 0, requestMs: 0, refused: 0, answers: [] };
    return routes[name];
  };
  // The functions' clients, as the local stack gives them (infra/local/function-clients.ts).
  const { sqs, dynamo } = functionClients(config);
  const awsCalls: InstanceReport['awsCalls'] = { dynamodb: [], sqs: [] };
  sqs.middlewareStack.add(timeCalls(awsCalls.sqs), CALL_TIMING);
  dynamo.middlewareStack.add(timeCalls(awsCalls.dynamodb), CALL_TIMING);
  const deps = await buildWorkerDeps({
    sqs,
    dynamo,
    secrets: new EnvSecretStore(config.env),
    env: config.env,
    onPlatformEvent: (e) => {
      const profile = route(e.route);
      if (e.type === 'rate_limited') {
        if (e.status === 429) profile.refused += 1;
        else {
          profile.waited += 1;
          profile.waitMs += e.waitMs ?? 0;
        }
      }
      if (e.type !== 'request') return;
      const now = Date.now();
      profile.requests += 1;
      profile.requestMs += e.durationMs ?? 0;
      profile.answers.push(now);
      if (e.route === 'conversions.add' && e.status === 200) adds.push(now);
    },
  });
  const queueUrl = config.env['QUEUE_URL'] ?? '';
  const pollers = new Pollers({ sqs, queueUrl, queueName: config.queueName }, makeWorkerHandler(deps), {
    count: config.pollers,
    batchSize: config.batchSize,
  });
  if (!config.startOnGo) pollers.start();
  process.send?.({ type: 'ready' });
  process.on('message', (message: { type?: string }) => {
    if (message.type === 'go') pollers.start();
    if (message.type !== 'stop') return;
    void pollers.stop().then(() => {
      const cpu = process.cpuUsage();
      const report: InstanceReport = { adds, routes, cpuMs: (cpu.user + cpu.system) / 1000, awsCalls };
      process.send?.({ type: 'report', report }, () => process.exit(0));
    });
  });
}

// The worker's bundling settings make CommonJS, which has no top-level await.
main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

import autocannon from 'autocannon';
import { genericWebhook } from '../support/webhooks.ts';
import { receiveConfig } from './config-channel.ts';
import { exitWithParent } from './leftovers.ts';

/**
 * The ingest bench's load generator, in a process of its own (run.ts forks it): autocannon and the
 * HMAC signing of every request then take none of the event loop that serves the requests, as a
 * shop's deliveries come from elsewhere. Takes its settings on IPC (`forkWithConfig`) and answers
 * there with autocannon's result and the CPU it spent generating the load.
 */
export interface IngestLoadConfig {
  readonly url: string;
  readonly secret: string;
  readonly seconds: number;
  readonly connections: number;
  readonly clickId: string;
}

export interface IngestLoadAnswer {
  readonly result: autocannon.Result;
  /** This process's CPU (user and system) from autocannon's start to its result. */
  readonly loadCpuMicros: number;
  readonly loadMs: number;
}

exitWithParent();
const config = await receiveConfig<IngestLoadConfig>();
let n = 0;
const cpuAtStart = process.cpuUsage();
const startedAt = performance.now();
const result = await autocannon({
  url: config.url,
  connections: config.connections,
  duration: config.seconds,
  requests: [
    {
      method: 'POST',
      path: '/webhooks/generic',
      setupRequest: (request) => {
        n += 1;
        const body = JSON.stringify({
          type: 'order',
          orderId: `ingest-${n}`,
          amount: '19.90',
          currency: 'EUR',
          clickIds: [config.clickId],
        });
        return { ...request, body, headers: genericWebhook(body, config.secret).headers };
      },
    },
  ],
});
const cpu = process.cpuUsage(cpuAtStart);
const answer: IngestLoadAnswer = {
  result,
  loadCpuMicros: cpu.user + cpu.system,
  loadMs: performance.now() - startedAt,
};
process.send?.(answer, () => process.exit(0));

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AWS_TIMEOUT_MS, PLATFORM_CALL_MS } from '../../cli/context.ts';
import { answeringServers } from '../support/answering-servers.ts';
import { emptyDir, runCli, statusOf1001 } from '../support/cli.ts';
import { type HungServer, startHungServer } from '../support/hung-server.ts';
import { timed } from '../support/timed.ts';

/**
 * Every outbound call of the CLI is bounded in time, whoever makes it and whatever the other side
 * says: a call sent without the per-call signal (`awsCall`) still ends, and a platform that asks
 * the CLI to wait an hour before retrying does not hold a terminal for that hour.
 *
 * Each bound is asserted with a wide margin over the expected time (stated beside it); a missing
 * bound (the SDK's default request timeout is none) always fails.
 */

const PROGRAM = '0123456789abcdef01234567';
const RULE = '76543210fedcba9876543210';

let hung: HungServer;
const servers = answeringServers();
const serve = servers.serve;

beforeAll(async () => {
  hung = await startHungServer();
});
afterAll(async () => {
  await hung?.close();
  servers.close();
});

/** DynamoDB's JSON protocol answering every call with `{}`: GetItem finds nothing. */
const emptyDynamo = () =>
  serve((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' });
    res.end('{}');
  });

describe("the CLI's AWS clients", () => {
  it('`connector backfill` stops with an error line when SQS hangs, instead of waiting for ever', async () => {
    // Prepare: a generic source, one order in the file; the ledger answers at once, SQS never does.
    const dir = emptyDir();
    const file = join(dir.dir, 'orders.jsonl');
    writeFileSync(
      file,
      `${JSON.stringify({ type: 'order', orderId: 'T-1', amount: '10.00', currency: 'EUR' })}\n`,
    );
    const dynamo = await emptyDynamo();
    const sources = [{ id: 'generic', platform: 'generic', program: PROGRAM, rule: RULE, secretRef: 'S' }];
    const before = hung.connections();
    try {
      // Act: expected within the CLI client's attempts (2 with an endpoint override) of
      // AWS_TIMEOUT_MS each; without a request timeout it would still be waiting at the limit.
      const outcome = await timed(
        runCli(
          [
            'backfill',
            '--source',
            'generic',
            '--file',
            file,
            '--ledger-table',
            'connector-ledger',
            '--dynamodb-endpoint',
            dynamo,
            '--sqs-endpoint',
            hung.endpoint,
            '--queue-url',
            `${hung.endpoint}/000000000000/connector-events.fifo`,
          ],
          { cwd: dir.dir, env: { AWS_REGION: 'us-east-1', SOURCES: JSON.stringify(sources) } },
        ),
        4 * AWS_TIMEOUT_MS,
      );

      // Assess
      expect(hung.connections()).toBeGreaterThan(before);
      expect(outcome.stillWaitingAfterMs).toBeUndefined();
      expect(outcome.value?.code, outcome.value?.stderr).toBe(1);
      expect(outcome.value?.stderr).toMatch(/^error: backfill stopped: /);
    } finally {
      dir.remove();
    }
  }, 90_000);
});

describe("the CLI's platform calls", () => {
  it('`connector status` does not sleep for the hour a 429 asks: it ends with an error line', async () => {
    // Prepare: the ledger answers at once (no record); the platform refuses every call for an hour.
    const dir = emptyDir();
    const dynamo = await emptyDynamo();
    let platformCalls = 0;
    const platform = await serve((_req, res) => {
      platformCalls++;
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '3600' });
      res.end(JSON.stringify({ message: 'daily quota used up' }));
    });
    try {
      // Act: a bounded call ends within seconds; one that honours the hour is still asleep at 60 s.
      const outcome = await timed(
        runCli(statusOf1001(PROGRAM, dynamo, platform), {
          cwd: dir.dir,
          env: { AFFILIATE_TOKEN: 'test-token', AWS_REGION: 'us-east-1' },
        }),
        60_000,
      );

      // Assess
      expect(platformCalls).toBeGreaterThan(0);
      expect(outcome.stillWaitingAfterMs).toBeUndefined();
      expect(outcome.value?.code, outcome.value?.stderr).toBe(1);
      expect(outcome.value?.stderr).toMatch(/^error: .*429/);
      expect(outcome.afterMs).toBeLessThan(PLATFORM_CALL_MS + 10_000);
    } finally {
      dir.remove();
    }
  }, 90_000);
});

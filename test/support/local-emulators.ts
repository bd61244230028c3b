import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { LOCAL_AWS, LOCAL_STATE_FILE } from '../../local/defaults.ts';
import { type AwsCallBudget, dynamoClient, sqsClient } from '../../shared/adapters/aws-clients.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';
import type { OrderRecord } from '../../shared/ledger.ts';

/** Calls to emulators on a machine busy with other tests: generous, but bounded. */
const TEST_BUDGET: AwsCallBudget = { connectionTimeoutMs: 5_000, requestTimeoutMs: 10_000, maxAttempts: 2 };

/** What a test reads of an `npm start` running as a child process. */
export interface LocalEmulators {
  /** Messages of the main queue, ready, in flight or delayed. */
  queueLeft(): Promise<number>;
  /** The ledger's record of the order `externalId`, whatever its program. */
  ledgerRecord(externalId: string): Promise<OrderRecord | undefined>;
  close(): void;
}

/**
 * The queue and the ledger of the `npm start` serving from `cwd`, found as `npx connector` finds
 * them: through the `.local-stack.json` it wrote there before its banner.
 */
export function localEmulators(cwd: string): LocalEmulators {
  const state = JSON.parse(readFileSync(join(cwd, LOCAL_STATE_FILE), 'utf8')) as {
    sqsEndpoint: string;
    queueUrl: string;
    dynamoEndpoint: string;
    ledgerTable: string;
  };
  const sqs = sqsClient(TEST_BUDGET, { ...LOCAL_AWS, endpoint: state.sqsEndpoint });
  const dynamo = dynamoClient(TEST_BUDGET, { ...LOCAL_AWS, endpoint: state.dynamoEndpoint });
  const ledger = new DynamoLedger(dynamo, state.ledgerTable);
  return {
    async queueLeft() {
      const out = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: state.queueUrl, AttributeNames: ['All'] }),
      );
      const a = out.Attributes ?? {};
      return (
        Number(a['ApproximateNumberOfMessages'] ?? 0) +
        Number(a['ApproximateNumberOfMessagesNotVisible'] ?? 0) +
        Number(a['ApproximateNumberOfMessagesDelayed'] ?? 0)
      );
    },
    async ledgerRecord(externalId) {
      for await (const record of ledger.list()) if (record.externalId === externalId) return record;
      return undefined;
    },
    close() {
      sqs.destroy();
      dynamo.destroy();
    },
  };
}

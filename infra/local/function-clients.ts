import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { LOCAL_AWS } from '../../local/defaults.ts';
import { type AwsCallBudget, dynamoClient, sqsClient } from '../../shared/adapters/aws-clients.ts';

/**
 * The budget of the functions' AWS calls on this machine: the deployed clients' settings, with time
 * limits the emulators can meet. At the start of a ten-instance drain a thousand ledger writes reach
 * dynalite at once, on the 2 cores the workers share with it, and some take seconds (DynamoDB
 * answers in milliseconds). Under the functions' 1.5 s budget they time out; a create that timed out
 * but was written leaves the order leased with no add sent, which the worker treats as an add
 * without a clear answer: the lease's two minutes, then the verification window (10 minutes) before
 * the order is added.
 */
export const EMULATOR_BUDGET: AwsCallBudget = {
  connectionTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  maxAttempts: 3,
};

/** Where the emulators listen (`Emulators`, or what the bench hands a worker process). */
export interface EmulatorEndpoints {
  readonly sqsEndpoint: string;
  readonly dynamoEndpoint: string;
}

/**
 * The SQS and DynamoDB clients a function gets on this machine: built by the same builders as in
 * AWS (`sqsClient`, `dynamoClient`: each command's middleware chain built once, no SDK logger
 * middleware, every call bounded), pointed at the emulators with `EMULATOR_BUDGET`. The local
 * stack's functions and the bench's worker processes use them, so that what they spend per call is
 * what the deployed functions spend. Until 2026-11-28 the local stack gave its functions the
 * emulators' own plain clients, which rebuilt each command's chain on every call.
 */
export function functionClients(endpoints: EmulatorEndpoints): { sqs: SQSClient; dynamo: DynamoDBClient } {
  return {
    sqs: sqsClient(EMULATOR_BUDGET, { ...LOCAL_AWS, endpoint: endpoints.sqsEndpoint }),
    dynamo: dynamoClient(EMULATOR_BUDGET, { ...LOCAL_AWS, endpoint: endpoints.dynamoEndpoint }),
  };
}

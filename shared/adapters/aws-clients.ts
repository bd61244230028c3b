import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';

/**
 * How long one AWS call may take. The SDK's defaults have no request timeout at all: a hung
 * endpoint holds the call (3 attempts) until the Lambda itself times out.
 */
export interface AwsCallBudget {
  /** Milliseconds to open the TCP connection. */
  readonly connectionTimeoutMs: number;
  /** Milliseconds for one attempt, from sending the request to the whole answer. */
  readonly requestTimeoutMs: number;
  /** Attempts per call, the first one included; a timed-out attempt is retried like a 5xx. */
  readonly maxAttempts: number;
}

/**
 * The Lambda functions' budget. SQS, DynamoDB and Secrets Manager answer in tens of milliseconds
 * within a region, a cold TLS handshake included, so 1.5 s per attempt is ample headroom. A hung
 * service costs at most 2 × 1.5 s plus the SDK's jittered backoff (≤ ~0.2 s), about 3.2 s: the
 * webhook answers 503 with retry-after within Shopify's 5 s and a third of its 10 s Lambda timeout;
 * even a cold start where Secrets Manager and SQS both hang ends near 6.5 s, before the 10 s.
 */
export const LAMBDA_AWS_BUDGET: AwsCallBudget = {
  connectionTimeoutMs: 1_000,
  requestTimeoutMs: 1_500,
  maxAttempts: 2,
};

/**
 * SDK client settings for `budget`, to spread into a client's configuration. `throwOnRequestTimeout`
 * is needed: without it @smithy/node-http-handler 4 only logs a warning when `requestTimeout` passes
 * and goes on waiting. `cacheMiddleware`: the client builds each command type's middleware chain
 * once instead of on every call (a few percent of a worker's CPU, issue 16); it applies to calls
 * sent without per-call options, and no code here adds middleware to a client after its first call.
 */
export function awsClientConfig(budget: AwsCallBudget = LAMBDA_AWS_BUDGET) {
  return {
    maxAttempts: budget.maxAttempts,
    cacheMiddleware: true,
    requestHandler: {
      connectionTimeout: budget.connectionTimeoutMs,
      requestTimeout: budget.requestTimeoutMs,
      throwOnRequestTimeout: true,
    },
  };
}

// Credentials: the SDK's default chain, which in the Lambda bundles is the environment only (where
// Lambda puts the role's); see shared/adapters/lambda-credentials.ts.

/** Where a client sends its calls when not to AWS's regional endpoint: the emulators (bench, tests). */
export interface ClientTarget {
  readonly endpoint?: string;
  readonly region?: string;
  readonly credentials?: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

/**
 * Leaves out the SDK's logger middleware. On every call it filters the input and the output for
 * sensitive fields (walking them against the operation's schema) to hand them to the client's
 * logger, and the functions give their clients none: the default discards them. That was about 5%
 * of a DynamoDB call's CPU in the SDK (an UpdateItem with a canned answer, no network: 294 µs
 * against 309, four interleaved runs of 20,000) and 1.4% of a busy worker's in the bench's profile
 * (issue 16). Nothing logged is lost: with no logger given, the SDK wrote nothing before either.
 */
function withoutSdkLogging<C extends { middlewareStack: { remove(name: string): boolean } }>(client: C): C {
  client.middlewareStack.remove('loggerMiddleware');
  return client;
}

/** An SQS client whose calls are bounded by `budget`. Build once per cold start. */
export function sqsClient(budget: AwsCallBudget = LAMBDA_AWS_BUDGET, target: ClientTarget = {}): SQSClient {
  return withoutSdkLogging(new SQSClient({ ...awsClientConfig(budget), ...target }));
}

/** A DynamoDB client whose calls are bounded by `budget`. Build once per cold start. */
export function dynamoClient(
  budget: AwsCallBudget = LAMBDA_AWS_BUDGET,
  target: ClientTarget = {},
): DynamoDBClient {
  return withoutSdkLogging(new DynamoDBClient({ ...awsClientConfig(budget), ...target }));
}

/** A Secrets Manager client whose calls are bounded by `budget`. Build once per cold start. */
export function secretsManagerClient(budget: AwsCallBudget = LAMBDA_AWS_BUDGET): SecretsManagerClient {
  return withoutSdkLogging(new SecretsManagerClient(awsClientConfig(budget)));
}

import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { dynamoClient, sqsClient } from '../shared/adapters/aws-clients.ts';
import { DynamoLedger } from '../shared/adapters/dynamo-ledger.ts';
import { SqsEventQueue } from '../shared/adapters/sqs.ts';
import { type Env, requireEnv, sourcesFromEnv } from '../shared/config/env.ts';
import { type FinanceDeps, submitFinanceRefund } from '../shared/finance.ts';
import { requestFromEvent, resultFromAnswer } from '../shared/http/apigw.ts';
import { lambdaPipeline } from '../shared/lambda.ts';
import { makeLogger, makeMetrics, observeFinance } from '../shared/observability.ts';
import type { Ledger, SecretStore } from '../shared/ports.ts';
import { awsSecretStore } from '../shared/secrets.ts';

export type RefundsHandler = (
  event: APIGatewayProxyEventV2,
  context?: Context,
) => Promise<APIGatewayProxyStructuredResultV2>;

/** `POST /refunds`: finance staff's refunds, authenticated with the finance key. */
export function makeHandler(deps: FinanceDeps): RefundsHandler {
  return async (event) => {
    const request = requestFromEvent(event);
    return resultFromAnswer(await submitFinanceRefund(deps, request.headers, request.rawBody));
  };
}

/** What the refunds function is wired from, in AWS and in the local stack alike. */
export interface RefundsWiring {
  readonly sqs: SQSClient;
  readonly dynamo: DynamoDBClient;
  readonly secrets: SecretStore;
  /** The settings CDK gives the function: SOURCES, QUEUE_URL, LEDGER_TABLE, FINANCE_API_KEY_SECRET. */
  readonly env: Env;
  /** Lets tests wrap the ledger's records (not the refund reservations kept beside them). */
  readonly wrapLedger?: (ledger: Ledger) => Ledger;
  /** Told the outcome of every request (the log line). */
  readonly observe?: FinanceDeps['observe'];
}

/** The refunds function's dependencies; fails fast naming a missing or wrong setting. */
export function buildRefundsDeps(wiring: RefundsWiring): FinanceDeps {
  const { env } = wiring;
  const ledger = new DynamoLedger(wiring.dynamo, requireEnv(env, 'LEDGER_TABLE'));
  return {
    sources: sourcesFromEnv(env),
    ledger: wiring.wrapLedger ? wiring.wrapLedger(ledger) : ledger,
    reservations: ledger,
    queue: new SqsEventQueue(wiring.sqs, requireEnv(env, 'QUEUE_URL')),
    secrets: wiring.secrets,
    keyRef: requireEnv(env, 'FINANCE_API_KEY_SECRET'),
    now: () => new Date(),
    ...(wiring.observe ? { observe: wiring.observe } : {}),
  };
}

const logger = makeLogger();
const metrics = makeMetrics(process.env, logger);

/** The Lambda entry point. */
export const handler: RefundsHandler = lambdaPipeline(
  async () =>
    makeHandler(
      buildRefundsDeps({
        sqs: sqsClient(),
        dynamo: dynamoClient(),
        secrets: awsSecretStore(process.env),
        env: process.env,
        observe: observeFinance(logger, metrics),
      }),
    ),
  { logger, metrics },
);

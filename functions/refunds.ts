import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { dynamoClient, sqsClient } from '../shared/adapters/aws-clients.ts';
import { DynamoLedger } from '../shared/adapters/dynamo-ledger.ts';
import { SqsEventQueue } from '../shared/adapters/sqs.ts';
import { optionalNumber, requireEnv, sourcesFromEnv } from '../shared/config/env.ts';
import { type FinanceDeps, submitFinanceRefund } from '../shared/finance.ts';
import { requestFromEvent, resultFromAnswer } from '../shared/http/apigw.ts';
import { makeLogger, observeFinance } from '../shared/observability.ts';
import { AwsSecretStore } from '../shared/secrets.ts';

export type RefundsHandler = (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;

/** `POST /refunds`: finance staff's refunds, authenticated with the finance key. */
export function makeHandler(deps: FinanceDeps): RefundsHandler {
  return async (event) => {
    const request = requestFromEvent(event);
    return resultFromAnswer(await submitFinanceRefund(deps, request.headers, request.rawBody));
  };
}

const logger = makeLogger();

function fromEnv(env: NodeJS.ProcessEnv): RefundsHandler {
  return makeHandler({
    sources: sourcesFromEnv(env),
    ledger: new DynamoLedger(dynamoClient(), requireEnv(env, 'LEDGER_TABLE')),
    queue: new SqsEventQueue(sqsClient(), requireEnv(env, 'QUEUE_URL')),
    secrets: new AwsSecretStore(optionalNumber(env, 'SECRETS_MAX_AGE_SECONDS', 300)),
    keyRef: requireEnv(env, 'FINANCE_API_KEY_SECRET'),
    now: () => new Date(),
    observe: observeFinance(logger),
  });
}

let wired: RefundsHandler | undefined;
export const handler: RefundsHandler = async (event) => {
  wired ??= fromEnv(process.env);
  return wired(event);
};

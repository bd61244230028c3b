import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { dynamoClient, sqsClient } from '../shared/adapters/aws-clients.ts';
import { DynamoLedger } from '../shared/adapters/dynamo-ledger.ts';
import { SqsEventQueue } from '../shared/adapters/sqs.ts';
import { optionalNumber, requireEnv, sourcesFromEnv } from '../shared/config/env.ts';
import { type FinanceDeps, submitFinanceRefund } from '../shared/finance.ts';
import { requestFromEvent, resultFromAnswer } from '../shared/http/apigw.ts';
import { makeLogger } from '../shared/observability.ts';
import { AwsSecretStore } from '../shared/secrets.ts';

export type RefundsHandler = (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;

/** `POST /refunds`: finance staff's refunds, authenticated with the finance key. */
export function makeHandler(
  deps: FinanceDeps,
  log?: (line: Record<string, unknown>) => void,
): RefundsHandler {
  return async (event) => {
    const request = requestFromEvent(event);
    const answer = await submitFinanceRefund(deps, request.headers, request.rawBody);
    log?.({
      status: answer.status,
      source: answer.body['source'],
      externalId: answer.body['externalId'],
      refundId: answer.body['refundId'],
      messageId: answer.body['messageId'],
      field: answer.body['field'],
    });
    return resultFromAnswer(answer);
  };
}

const logger = makeLogger();

function fromEnv(env: NodeJS.ProcessEnv): RefundsHandler {
  return makeHandler(
    {
      sources: sourcesFromEnv(env),
      ledger: new DynamoLedger(dynamoClient(), requireEnv(env, 'LEDGER_TABLE')),
      queue: new SqsEventQueue(sqsClient(), requireEnv(env, 'QUEUE_URL')),
      secrets: new AwsSecretStore(optionalNumber(env, 'SECRETS_MAX_AGE_SECONDS', 300)),
      keyRef: requireEnv(env, 'FINANCE_API_KEY_SECRET'),
      now: () => new Date(),
    },
    (line) => logger.info('finance refund', line),
  );
}

let wired: RefundsHandler | undefined;
export const handler: RefundsHandler = async (event) => {
  wired ??= fromEnv(process.env);
  return wired(event);
};

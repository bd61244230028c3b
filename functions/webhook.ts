import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { sqsClient } from '../shared/adapters/aws-clients.ts';
import { SqsEventQueue } from '../shared/adapters/sqs.ts';
import { optionalNumber, requireEnv, sourcesFromEnv } from '../shared/config/env.ts';
import { requestFromEvent, resultFromAnswer } from '../shared/http/apigw.ts';
import { type IngestDeps, ingestWebhook } from '../shared/ingest.ts';
import { makeLogger, makeMetrics, observeIngest, publishMetrics } from '../shared/observability.ts';
import { adapterFor } from '../shared/platforms/registry.ts';
import { AwsSecretStore } from '../shared/secrets.ts';

export type WebhookHandler = (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;

/**
 * The source a request is for. The stack gives each source its own route (`POST /webhooks/shop-1`,
 * throttled on its own), so the id is the route key's last segment; a `{source}` path parameter
 * (a catch-all route, the local stack) is read first.
 */
export function sourceOf(event: Pick<APIGatewayProxyEventV2, 'pathParameters' | 'routeKey'>): string {
  const parameter = event.pathParameters?.['source'];
  if (parameter !== undefined) return parameter;
  return /^POST \/webhooks\/([^/{}]+)$/.exec(event.routeKey)?.[1] ?? '';
}

/** `POST /webhooks/<source>`: verify, map, queue; answer once the message is durable. */
export function makeHandler(deps: IngestDeps): WebhookHandler {
  return async (event) => {
    return resultFromAnswer(await ingestWebhook(deps, sourceOf(event), requestFromEvent(event)));
  };
}

const logger = makeLogger();
const metrics = makeMetrics();

/**
 * Built at cold start from the environment CDK sets; fails fast naming a missing setting. The AWS
 * clients' time budget (LAMBDA_AWS_BUDGET) makes a hung SQS a 503 within Shopify's 5 s.
 */
function fromEnv(env: NodeJS.ProcessEnv): WebhookHandler {
  return makeHandler({
    sources: sourcesFromEnv(env),
    adapterFor,
    secrets: new AwsSecretStore(optionalNumber(env, 'SECRETS_MAX_AGE_SECONDS', 300)),
    queue: new SqsEventQueue(sqsClient(), requireEnv(env, 'QUEUE_URL')),
    now: () => new Date(),
    observe: observeIngest(logger, metrics),
  });
}

let wired: WebhookHandler | undefined;
export const handler: WebhookHandler = async (event) => {
  wired ??= fromEnv(process.env);
  try {
    return await wired(event);
  } finally {
    publishMetrics(metrics);
  }
};

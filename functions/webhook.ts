import type { SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { sqsClient } from '../shared/adapters/aws-clients.ts';
import { SqsEventQueue } from '../shared/adapters/sqs.ts';
import { type Env, requireEnv, sourcesFromEnv } from '../shared/config/env.ts';
import { requestFromEvent, resultFromAnswer } from '../shared/http/apigw.ts';
import { type IngestDeps, type IngestOutcome, ingestWebhook } from '../shared/ingest.ts';
import { lambdaPipeline } from '../shared/lambda.ts';
import { makeLogger, makeMetrics, observeIngest } from '../shared/observability.ts';
import { adapterFor } from '../shared/platforms/registry.ts';
import type { SecretStore } from '../shared/ports.ts';
import { awsSecretStore } from '../shared/secrets.ts';

export type WebhookHandler = (
  event: APIGatewayProxyEventV2,
  context?: Context,
) => Promise<APIGatewayProxyStructuredResultV2>;

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

/** What the webhook function is wired from, in AWS and in the local stack alike. */
export interface WebhookWiring {
  readonly sqs: SQSClient;
  readonly secrets: SecretStore;
  /** The settings CDK gives the function: SOURCES, QUEUE_URL. */
  readonly env: Env;
  readonly observe?: (outcome: IngestOutcome) => void;
}

/** The webhook's dependencies; fails fast naming a missing or wrong setting. */
export function buildWebhookDeps(wiring: WebhookWiring): IngestDeps {
  return {
    sources: sourcesFromEnv(wiring.env),
    adapterFor,
    secrets: wiring.secrets,
    queue: new SqsEventQueue(wiring.sqs, requireEnv(wiring.env, 'QUEUE_URL')),
    now: () => new Date(),
    observe: wiring.observe,
  };
}

const logger = makeLogger();
const metrics = makeMetrics(process.env, logger);

/**
 * The Lambda entry point. The AWS clients' time budget (LAMBDA_AWS_BUDGET) makes a hung SQS a 503
 * within Shopify's 5 s.
 */
export const handler: WebhookHandler = lambdaPipeline(
  async () =>
    makeHandler(
      buildWebhookDeps({
        sqs: sqsClient(),
        secrets: awsSecretStore(process.env),
        env: process.env,
        observe: observeIngest(logger, metrics),
      }),
    ),
  { logger, metrics },
);

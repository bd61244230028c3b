import { buildRefundsDeps, makeHandler } from '../../functions/refunds.ts';
import type { LocalStack } from '../../infra/local/stack.ts';
import type { EventQueue } from '../../shared/ports.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { refundsEvent } from './finance-door.ts';

/** Finance's `POST /refunds` to the local stack, with its API key: the status and the body. */
export async function postRefund(
  stack: LocalStack,
  body: Record<string, unknown>,
): Promise<{ status: number; text: string }> {
  const res = await fetch(`${stack.url}/refunds`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-api-key': stack.secrets['FINANCE_API_KEY'] ?? '',
    },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

/**
 * Finance's `POST /refunds` through the refunds handler wired to the stack's ledger, with a queue that
 * cannot be reached: the reservation is made and the answer is a 503. Answers the status.
 */
export async function postRefundWithQueueDown(
  stack: LocalStack,
  body: Record<string, unknown>,
): Promise<number> {
  const deps = buildRefundsDeps({
    sqs: stack.emulators.sqs,
    dynamo: stack.emulators.dynamo,
    secrets: new EnvSecretStore(stack.secrets),
    env: {
      SOURCES: JSON.stringify([...stack.sources.values()]),
      QUEUE_URL: stack.emulators.queueUrl,
      LEDGER_TABLE: stack.emulators.tableName,
      FINANCE_API_KEY_SECRET: 'FINANCE_API_KEY',
    },
  });
  const queue: EventQueue = {
    send: async () => {
      throw Object.assign(new Error('connect ECONNREFUSED'), { name: 'TimeoutError' });
    },
  };
  const result = await makeHandler({ ...deps, queue })(
    refundsEvent({ 'x-api-key': stack.secrets['FINANCE_API_KEY'] ?? '' }, body),
  );
  return result.statusCode ?? 0;
}

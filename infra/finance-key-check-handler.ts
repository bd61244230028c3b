import { GetSecretValueCommand, type SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { secretsManagerClient } from '../shared/adapters/aws-clients.ts';
import { MIN_FINANCE_KEY_LENGTH } from '../shared/finance.ts';

/**
 * The `onEvent` function of the deploy-time finance key check (a CloudFormation custom resource
 * behind CDK's Provider framework). Synth only knows the secret's name, so the length is checked
 * here, in the account, on every Create and Update. A throw fails the deployment: the Provider
 * framework reports the error's message as CloudFormation's status reason and rolls back. The value
 * never leaves this function: only its length is logged, thrown or returned.
 */
export interface FinanceKeyCheckDeps {
  readonly client: SecretsManagerClient;
}

export interface FinanceKeyCheckResult {
  readonly PhysicalResourceId: string;
  readonly Data?: { readonly Length: number };
}

export function makeHandler(deps: FinanceKeyCheckDeps) {
  return async (event: CloudFormationCustomResourceEvent): Promise<FinanceKeyCheckResult> => {
    const secretId = String(event.ResourceProperties['SecretId'] ?? '');
    // Stable across deploys, so an Update never looks like a replacement (which would Delete the old one).
    const PhysicalResourceId = `finance-key-check:${secretId}`;
    if (event.RequestType === 'Delete') return { PhysicalResourceId };
    const length = await currentLength(deps.client, secretId);
    if (length < MIN_FINANCE_KEY_LENGTH) {
      throw new Error(
        `finance API key secret ${secretId} holds ${length} characters; at least ${MIN_FINANCE_KEY_LENGTH} are required: put a longer value (openssl rand -base64 48) and deploy again`,
      );
    }
    console.log(JSON.stringify({ message: 'finance API key long enough', secretId, length }));
    return { PhysicalResourceId, Data: { Length: length } };
  };
}

async function currentLength(client: SecretsManagerClient, secretId: string): Promise<number> {
  let value: string | undefined;
  try {
    const answer = await client.send(
      new GetSecretValueCommand({ SecretId: secretId, VersionStage: 'AWSCURRENT' }),
    );
    value = answer.SecretString;
  } catch (error) {
    // Only the error's name: an SDK error's message or metadata is never worth the risk here.
    const name = error instanceof Error ? error.name : 'unknown error';
    throw new Error(
      `cannot read the finance API key secret ${secretId} (${name}): create it (docs/deploy.md, step 1), or set checkFinanceKeyAtDeploy to false where the deployment cannot read secrets`,
    );
  }
  if (value === undefined) {
    throw new Error(
      `finance API key secret ${secretId} holds no string (a binary secret?): put a string of at least ${MIN_FINANCE_KEY_LENGTH} characters (openssl rand -base64 48) and deploy again`,
    );
  }
  return value.length;
}

let wired: ReturnType<typeof makeHandler> | undefined;

export const handler = (event: CloudFormationCustomResourceEvent): Promise<FinanceKeyCheckResult> => {
  wired ??= makeHandler({ client: secretsManagerClient() });
  return wired(event);
};

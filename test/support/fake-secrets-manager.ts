import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';

/**
 * Secrets Manager has no emulator among ours, so this stands in for it on the wire (AWS JSON 1.1,
 * `x-amz-target: secretsmanager.<Action>`), for DescribeSecret and GetSecretValue only: enough for
 * the real SDK client, pointed here with AWS_ENDPOINT_URL_SECRETS_MANAGER, to be tested end to end.
 * Each secret has an AWSCURRENT and, once rotated, an AWSPREVIOUS version, as Secrets Manager keeps
 * them; asking for a stage the secret does not have is a ResourceNotFoundException, as in AWS.
 */
export interface FakeSecretsManager {
  readonly endpoint: string;
  /**
   * Actions received, in order, with the SecretId and the VersionStage asked for, and the access key
   * id the request was signed with (from its SigV4 Authorization header).
   */
  readonly calls: { action: string; secretId: string; versionStage?: string; accessKeyId?: string }[];
  /** What `put-secret-value` does: the new value becomes AWSCURRENT, the current one AWSPREVIOUS. */
  rotate(secretId: string, value: string): void;
  close(): Promise<void>;
}

/** A value, or its versions by stage label (a secret that has been rotated). */
export type FakeSecret = string | { readonly AWSCURRENT: string; readonly AWSPREVIOUS?: string };

const CHANGED = Date.parse('2026-11-01T00:00:00Z') / 1000;

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1' });
  res.end(JSON.stringify(body));
}

async function bodyOf(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  } catch {
    return {};
  }
}

export async function startFakeSecretsManager(
  initial: Record<string, FakeSecret>,
): Promise<FakeSecretsManager> {
  const calls: FakeSecretsManager['calls'] = [];
  const secrets = new Map<string, Record<string, string | undefined>>(
    Object.entries(initial).map(([id, v]) => [id, typeof v === 'string' ? { AWSCURRENT: v } : { ...v }]),
  );
  const server = createServer((req, res) => {
    void bodyOf(req).then((body) => {
      const action = String(req.headers['x-amz-target'] ?? '').replace(/^secretsmanager\./, '');
      const secretId = String(body['SecretId'] ?? '');
      const versionStage = typeof body['VersionStage'] === 'string' ? body['VersionStage'] : undefined;
      const accessKeyId = /Credential=([^/]+)\//.exec(String(req.headers.authorization ?? ''))?.[1];
      calls.push({
        action,
        secretId,
        ...(versionStage ? { versionStage } : {}),
        ...(accessKeyId ? { accessKeyId } : {}),
      });
      const versions = secrets.get(secretId);
      const value = versions?.[versionStage ?? 'AWSCURRENT'];
      if (versions === undefined || (action === 'GetSecretValue' && value === undefined)) {
        send(res, 400, {
          __type: 'ResourceNotFoundException',
          Message: "Secrets Manager can't find the specified secret.",
        });
        return;
      }
      const arn = `arn:aws:secretsmanager:us-east-1:000000000000:secret:${secretId}-AbCdEf`;
      if (action === 'DescribeSecret') {
        send(res, 200, { ARN: arn, Name: secretId, LastChangedDate: CHANGED });
      } else if (action === 'GetSecretValue') {
        const stages = [versionStage ?? 'AWSCURRENT'];
        send(res, 200, {
          ARN: arn,
          Name: secretId,
          SecretString: value,
          VersionStages: stages,
          CreatedDate: CHANGED,
        });
      } else {
        send(res, 400, { __type: 'InvalidRequestException', Message: `${action} is not served here` });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    calls,
    rotate(secretId, value) {
      const current = secrets.get(secretId)?.['AWSCURRENT'];
      secrets.set(secretId, { AWSCURRENT: value, AWSPREVIOUS: current });
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The real SDK client pointed at `fake`, with test credentials and no SDK retries. */
export function secretsManagerClientFor(fake: FakeSecretsManager): SecretsManagerClient {
  return new SecretsManagerClient({
    endpoint: fake.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    maxAttempts: 1,
  });
}

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ChangeMessageVisibilityCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmulators } from '../../infra/local/emulators.ts';
import { recoverAfterCrash } from '../../infra/local/recover.ts';
import { DynamoLedger } from '../../shared/adapters/dynamo-ledger.ts';

const dir = mkdtempSync(join(tmpdir(), 'connector-queues-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('queues kept in LOCAL_DATA_DIR', () => {
  it('keep a DLQ message peeked and released (visibility 0), across a restart too', async () => {
    // Prepare
    let emulators = await startEmulators({ sqsDataDir: dir });
    const { sqs, dlqUrl, dlqName } = emulators;
    await sqs.send(
      new SendMessageCommand({
        QueueUrl: dlqUrl,
        MessageBody: '{}',
        MessageGroupId: 'g',
        MessageDeduplicationId: 'd',
      }),
    );
    const [peeked] = (await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlqUrl }))).Messages ?? [];
    // Act
    await sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: dlqUrl,
        ReceiptHandle: peeked?.ReceiptHandle ?? '',
        VisibilityTimeout: 0,
      }),
    );
    const released = emulators.counts(dlqName);
    await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlqUrl }));
    await emulators.close();
    emulators = await startEmulators({ sqsDataDir: dir });
    const afterRestart = emulators.counts(dlqName);
    const recovered = await recoverAfterCrash(
      emulators,
      new DynamoLedger(emulators.dynamo, emulators.tableName),
      true,
    );
    const afterRecovery = emulators.counts(dlqName);
    await emulators.close();
    // Assess
    expect(released).toEqual({ ready: 1, inflight: 0, delayed: 0 });
    expect(afterRestart).toEqual({ ready: 0, inflight: 1, delayed: 0 });
    expect(recovered.messages).toBe(1);
    expect(afterRecovery).toEqual({ ready: 1, inflight: 0, delayed: 0 });
  });
});

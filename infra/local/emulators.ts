import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import {
  type AttributeValue,
  CreateTableCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  PutItemCommand,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { SQSClient } from '@aws-sdk/client-sqs';
import dynalite from 'dynalite';
import { startFauxqs } from 'fauxqs';
import { LOCAL_AWS, LOCAL_QUEUE_NAME, LOCAL_TABLE_NAME } from '../../local/defaults.ts';
import { ACCEPT_DUE_INDEX } from '../../shared/adapters/dynamo-ledger.ts';
import { SQS_MAX_MESSAGE_BYTES } from '../../shared/queueing.ts';

/**
 * The AWS side of the local stack, on real wire protocols: fauxqs (SQS) and dynalite (DynamoDB),
 * both in process, on loopback. The queue pair and the table are created with the same settings the
 * CDK stack deploys (FIFO, redrive to a FIFO DLQ after `maxReceiveCount` receives).
 */
export interface EmulatorOptions {
  /** 0 = any free port. */
  readonly sqsPort?: number;
  readonly dynamoPort?: number;
  /** Directory for dynalite's LevelDB; in memory when absent. */
  readonly dynamoPath?: string;
  /**
   * Directory for fauxqs's SQLite file (queues and their messages, in flight ones included); in
   * memory when absent. fauxqs 2.4.1 does not keep the FIFO deduplication cache: a copy sent again
   * after a restart is queued twice, and the ledger makes the second one a no-op.
   */
  readonly sqsDataDir?: string;
  readonly maxReceiveCount?: number;
  readonly visibilityTimeoutSeconds?: number;
  readonly queueName?: string;
  readonly tableName?: string;
}

export interface Emulators {
  readonly sqs: SQSClient;
  readonly dynamo: DynamoDBClient;
  readonly sqsEndpoint: string;
  readonly dynamoEndpoint: string;
  readonly queueUrl: string;
  readonly dlqUrl: string;
  readonly queueName: string;
  readonly dlqName: string;
  readonly tableName: string;
  /** The workers' pacing record (PACING_TABLE), as the stack's `Pacing` table. */
  readonly pacingTableName: string;
  readonly maxReceiveCount: number;
  /** Messages of a queue by state, read from the emulator without receiving them. */
  counts(queueName: string): { ready: number; inflight: number; delayed: number };
  /** Every message of a queue, whatever its state, read from the emulator without receiving it. */
  messages(queueName: string): QueuedMessage[];
  close(): Promise<void>;
}

export interface QueuedMessage {
  readonly messageId: string;
  readonly body: string;
  readonly groupId: string | undefined;
  readonly state: 'ready' | 'inflight' | 'delayed';
  /** The handle of the receive that holds it, while in flight. */
  readonly receiptHandle?: string;
}

export async function startEmulators(options: EmulatorOptions = {}): Promise<Emulators> {
  const queueName = options.queueName ?? LOCAL_QUEUE_NAME;
  const dlqName = queueName.replace(/\.fifo$/, '-dlq.fifo');
  const tableName = options.tableName ?? LOCAL_TABLE_NAME;
  const maxReceiveCount = options.maxReceiveCount ?? 6;

  const fauxqs = await startFauxqs({
    port: options.sqsPort ?? 0,
    host: '127.0.0.1',
    logger: false,
    ...(options.sqsDataDir ? { dataDir: options.sqsDataDir } : {}),
  });
  if (options.sqsDataDir) keepMessagesMadeVisible(options.sqsDataDir);
  const sqsEndpoint = `http://127.0.0.1:${fauxqs.port}`;
  // A queue loaded from the data directory is kept as it is: createQueue would replace it with an
  // empty one, and its INSERT OR REPLACE would cascade-delete the persisted messages.
  const ensureQueue = (name: string, attributes: Record<string, string>) => {
    const loaded = fauxqs.inspectQueue(name);
    if (!loaded) return fauxqs.createQueue(name, { attributes });
    // Its stored URL names the port of the previous run.
    return { queueUrl: loaded.url.replace(/:\d+\//, `:${fauxqs.port}/`), queueArn: loaded.arn };
  };
  // The same message size limit as the deployed queues (ingest answers 413 above it).
  const maximumMessageSize = String(SQS_MAX_MESSAGE_BYTES);
  const dlq = ensureQueue(dlqName, {
    FifoQueue: 'true',
    MessageRetentionPeriod: '1209600',
    MaximumMessageSize: maximumMessageSize,
  });
  const main = ensureQueue(queueName, {
    FifoQueue: 'true',
    MaximumMessageSize: maximumMessageSize,
    VisibilityTimeout: String(options.visibilityTimeoutSeconds ?? 30),
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.queueArn, maxReceiveCount }),
  });

  const dynaliteServer = dynalite({ path: options.dynamoPath, createTableMs: 0 });
  await new Promise<void>((resolve, reject) => {
    dynaliteServer.once('error', reject);
    dynaliteServer.listen(options.dynamoPort ?? 0, '127.0.0.1', () => resolve());
  });
  const dynamoEndpoint = `http://127.0.0.1:${(dynaliteServer.address() as AddressInfo).port}`;

  const sqs = new SQSClient({ ...LOCAL_AWS, endpoint: sqsEndpoint });
  const dynamo = new DynamoDBClient({ ...LOCAL_AWS, endpoint: dynamoEndpoint });
  await ensureTable(dynamo, tableName, options.dynamoPath);
  const pacingTableName = `${tableName}-pacing`;
  await ensurePacingTable(dynamo, pacingTableName);

  return {
    sqs,
    dynamo,
    sqsEndpoint,
    dynamoEndpoint,
    queueUrl: main.queueUrl,
    dlqUrl: dlq.queueUrl,
    queueName,
    dlqName,
    tableName,
    pacingTableName,
    maxReceiveCount,
    counts(name) {
      const q = fauxqs.inspectQueue(name);
      return {
        ready: q?.messages.ready.length ?? 0,
        inflight: q?.messages.inflight.length ?? 0,
        delayed: q?.messages.delayed.length ?? 0,
      };
    },
    messages(name) {
      const q = fauxqs.inspectQueue(name);
      if (!q) return [];
      const of = (m: { messageId: string; body: string; messageGroupId?: string }) => ({
        messageId: m.messageId,
        body: m.body,
        groupId: m.messageGroupId,
      });
      return [
        ...q.messages.ready.map((m) => ({ ...of(m), state: 'ready' as const })),
        ...q.messages.inflight.map((e) => ({
          ...of(e.message),
          state: 'inflight' as const,
          receiptHandle: e.receiptHandle,
        })),
        ...q.messages.delayed.map((m) => ({ ...of(m), state: 'delayed' as const })),
      ];
    },
    async close() {
      sqs.destroy();
      dynamo.destroy();
      await fauxqs.stop();
      await new Promise<void>((resolve) => dynaliteServer.close(() => resolve()));
    },
  };
}

/**
 * fauxqs 2.4.1 with a data directory loses a message made visible again with VisibilityTimeout 0
 * (what `connector dlq list` does after peeking): it takes the message out of flight, then its
 * SQLite write (receive count NULL into a NOT NULL column) throws before the message is put back.
 * This trigger skips that one write instead; the row keeps its in-flight deadline, which a restart
 * reads as ready once it has passed.
 */
function keepMessagesMadeVisible(dataDir: string): void {
  const db = new DatabaseSync(join(dataDir, 'fauxqs.db'));
  try {
    db.exec(`CREATE TRIGGER IF NOT EXISTS connector_keep_made_visible
      BEFORE UPDATE OF approximate_receive_count ON sqs_messages
      WHEN NEW.approximate_receive_count IS NULL
      BEGIN SELECT RAISE(IGNORE); END`);
  } finally {
    db.close();
  }
}

/** As in infra/connector-stack.ts: the ledger keyed by `pk`, with the accept job's sparse due-date index. */
const LEDGER_TABLE = {
  AttributeDefinitions: [
    { AttributeName: 'pk', AttributeType: 'S' as const },
    { AttributeName: 'source', AttributeType: 'S' as const },
    { AttributeName: 'acceptDueAt', AttributeType: 'S' as const },
  ],
  KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' as const }],
  GlobalSecondaryIndexes: [
    {
      IndexName: ACCEPT_DUE_INDEX,
      KeySchema: [
        { AttributeName: 'source', KeyType: 'HASH' as const },
        { AttributeName: 'acceptDueAt', KeyType: 'RANGE' as const },
      ],
      Projection: { ProjectionType: 'KEYS_ONLY' as const },
    },
  ],
  BillingMode: 'PAY_PER_REQUEST' as const,
};

/** As in infra/connector-stack.ts: one item per route, keyed by `pk` (DynamoPacingBoard). */
async function ensurePacingTable(dynamo: DynamoDBClient, tableName: string): Promise<void> {
  try {
    await dynamo.send(new DescribeTableCommand({ TableName: tableName }));
    return;
  } catch (error) {
    if ((error as Error).name !== 'ResourceNotFoundException') throw error;
  }
  await dynamo.send(
    new CreateTableCommand({
      TableName: tableName,
      AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  await waitForTable(dynamo, tableName, (status) => status === 'ACTIVE');
}

async function ensureTable(dynamo: DynamoDBClient, tableName: string, dataPath?: string): Promise<void> {
  let kept: Record<string, AttributeValue>[] | undefined;
  try {
    const existing = await dynamo.send(new DescribeTableCommand({ TableName: tableName }));
    if (existing.Table?.GlobalSecondaryIndexes?.some((i) => i.IndexName === ACCEPT_DUE_INDEX)) return;
    // A ledger kept in LOCAL_DATA_DIR by a version without the index. dynalite cannot add an index
    // to a table (UpdateTable ignores it), so the table is made again with its items, which are
    // first written beside the data directory in case the process dies half-way.
    kept = await scanAll(dynamo, tableName);
    if (dataPath) writeFileSync(`${dataPath}-before-accept-index.json`, JSON.stringify(kept));
    await dynamo.send(new DeleteTableCommand({ TableName: tableName }));
    await waitForTable(dynamo, tableName, (status) => status === undefined);
  } catch (error) {
    if ((error as Error).name !== 'ResourceNotFoundException') throw error;
  }
  await dynamo.send(new CreateTableCommand({ TableName: tableName, ...LEDGER_TABLE }));
  // dynalite answers CREATING first (even with createTableMs 0): a Scan at once is ResourceNotFound.
  await waitForTable(dynamo, tableName, (status) => status === 'ACTIVE');
  for (const item of kept ?? []) await dynamo.send(new PutItemCommand({ TableName: tableName, Item: item }));
}

async function scanAll(dynamo: DynamoDBClient, tableName: string): Promise<Record<string, AttributeValue>[]> {
  const items: Record<string, AttributeValue>[] = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await dynamo.send(
      new ScanCommand({ TableName: tableName, ...(start ? { ExclusiveStartKey: start } : {}) }),
    );
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items;
}

/** Waits for the table's status (undefined: gone), its indexes active too. */
async function waitForTable(
  dynamo: DynamoDBClient,
  tableName: string,
  done: (status: string | undefined) => boolean,
): Promise<void> {
  const until = Date.now() + 5_000;
  for (;;) {
    const table = await dynamo
      .send(new DescribeTableCommand({ TableName: tableName }))
      .then((out) => out.Table)
      .catch((error: unknown) => {
        if ((error as Error).name === 'ResourceNotFoundException') return undefined;
        throw error;
      });
    const indexesActive = (table?.GlobalSecondaryIndexes ?? []).every((i) => i.IndexStatus === 'ACTIVE');
    if (done(table?.TableStatus) && indexesActive) return;
    if (Date.now() > until) throw new Error(`DynamoDB table ${tableName} not ready after 5 s`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

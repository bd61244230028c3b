import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  paginateScan,
} from '@aws-sdk/client-dynamodb';
import type { Ledger, OrderRecord } from '../ledger.ts';

/**
 * The ledger on DynamoDB. The record is stored as JSON in `doc`, with the fields an operator filters
 * on (state, program, externalId) as top-level attributes too. Writes are conditional on `version`
 * (optimistic concurrency), which works on DynamoDB and on dynalite alike (no transactions needed).
 */
export class DynamoLedger implements Ledger {
  readonly #client: DynamoDBClient;
  readonly #table: string;

  constructor(client: DynamoDBClient, tableName: string) {
    this.#client = client;
    this.#table = tableName;
  }

  async get(key: string): Promise<OrderRecord | undefined> {
    const out = await this.#client.send(
      new GetItemCommand({ TableName: this.#table, Key: { pk: { S: key } }, ConsistentRead: true }),
    );
    return out.Item ? fromItem(out.Item) : undefined;
  }

  async create(record: OrderRecord): Promise<boolean> {
    return this.#put({ ...record, version: 1 }, 'attribute_not_exists(pk)', {}, () => {
      record.version = 1;
    });
  }

  async update(record: OrderRecord): Promise<boolean> {
    const next = { ...record, version: record.version + 1, updatedAt: new Date().toISOString() };
    return this.#put(next, 'version = :v', { ':v': { N: String(record.version) } }, () => {
      record.version = next.version;
      record.updatedAt = next.updatedAt;
    });
  }

  async *list(program?: string): AsyncIterable<OrderRecord> {
    const pages = paginateScan(
      { client: this.#client },
      {
        TableName: this.#table,
        ConsistentRead: true,
        ...(program
          ? { FilterExpression: 'program = :p', ExpressionAttributeValues: { ':p': { S: program } } }
          : {}),
      },
    );
    for await (const page of pages) {
      for (const item of page.Items ?? []) yield fromItem(item);
    }
  }

  async #put(
    record: OrderRecord,
    condition: string,
    values: Record<string, AttributeValue>,
    onSuccess: () => void,
  ): Promise<boolean> {
    try {
      await this.#client.send(
        new PutItemCommand({
          TableName: this.#table,
          Item: toItem(record),
          ConditionExpression: condition,
          ...(Object.keys(values).length > 0 ? { ExpressionAttributeValues: values } : {}),
        }),
      );
      onSuccess();
      return true;
    } catch (error) {
      if (
        error instanceof ConditionalCheckFailedException ||
        (error as Error).name === 'ConditionalCheckFailedException'
      ) {
        return false;
      }
      throw error;
    }
  }
}

function toItem(record: OrderRecord): Record<string, AttributeValue> {
  return {
    pk: { S: record.key },
    version: { N: String(record.version) },
    state: { S: record.state },
    program: { S: record.program },
    externalId: { S: record.externalId },
    source: { S: record.source },
    updatedAt: { S: record.updatedAt },
    doc: { S: JSON.stringify(record) },
  };
}

function fromItem(item: Record<string, AttributeValue>): OrderRecord {
  const doc = item['doc']?.S;
  if (!doc) throw new Error(`ledger item ${item['pk']?.S ?? '?'} has no doc`);
  const record = JSON.parse(doc) as OrderRecord;
  record.version = Number(item['version']?.N ?? record.version);
  return record;
}

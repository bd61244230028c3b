import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import {
  awaitsAccept,
  type OrderRecord,
  type RefundReservation,
  type RefundReservations,
  storableRecord,
} from '../ledger.ts';
import type { AcceptIndex, DuePage, Ledger, ReservationLedger } from '../ports.ts';

/**
 * The ledger's sparse global secondary index of conversions waiting for acceptance: partition key
 * `source`, sort key `acceptDueAt` (ISO, so it sorts by time), keys only. An item is in it only
 * while it has `acceptDueAt`, which `toItem` writes only while `awaitsAccept` holds: accepting,
 * refusing or skipping the order rewrites the item without it, and DynamoDB drops it from the index.
 */
export const ACCEPT_DUE_INDEX = 'accept-due';

/**
 * Key prefix of the items holding an order's finance refund reservations (`reservations#` + the
 * order's key). A record's key starts with its program, 24 hexadecimal characters, so no record's
 * key starts so. These items carry neither `program` nor `acceptDueAt`: outside `list` and the
 * due-date index. The refunds function may put these items only (its IAM policy's LeadingKeys).
 */
export const RESERVATIONS_PREFIX = 'reservations#';

/** Options of `DynamoLedger`. */
export interface DynamoLedgerOptions {
  /**
   * Options for each call (`client.send(command, options)`), asked afresh per call (and per page of a
   * scan): the CLI bounds each call with its own `AbortSignal.timeout`. Default none, the client's
   * own timeouts only, and then calls go out without options, so the client's cached middleware
   * chain serves them (`awsClientConfig`).
   */
  readonly callOptions?: () => { abortSignal?: AbortSignal };
}

/**
 * The ledger on DynamoDB. The record is stored as JSON in `doc`, with the fields an operator filters
 * on (state, program, externalId) as top-level attributes too. Writes are conditional on `version`
 * (optimistic concurrency), which works on DynamoDB and on dynalite alike (no transactions needed).
 * An order's finance refund reservations are an item of their own beside it, versioned the same way.
 */
export class DynamoLedger implements Ledger, AcceptIndex, ReservationLedger {
  readonly #client: DynamoDBClient;
  readonly #table: string;
  readonly #callOptions: () => { abortSignal?: AbortSignal } | undefined;

  constructor(client: DynamoDBClient, tableName: string, options: DynamoLedgerOptions = {}) {
    this.#client = client;
    this.#table = tableName;
    this.#callOptions = options.callOptions ?? (() => undefined);
  }

  async get(key: string): Promise<OrderRecord | undefined> {
    const out = await this.#client.send(
      new GetItemCommand({ TableName: this.#table, Key: { pk: { S: key } }, ConsistentRead: true }),
      this.#callOptions(),
    );
    return out.Item ? fromItem(out.Item) : undefined;
  }

  async create(record: OrderRecord): Promise<boolean> {
    return this.#put(toItem({ ...record, version: 1 }), 'attribute_not_exists(pk)', {}, () => {
      record.version = 1;
    });
  }

  async update(record: OrderRecord): Promise<boolean> {
    const next = { ...record, version: record.version + 1, updatedAt: new Date().toISOString() };
    return this.#put(toItem(next), 'version = :v', { ':v': { N: String(record.version) } }, () => {
      record.version = next.version;
      record.updatedAt = next.updatedAt;
    });
  }

  async reservationsOf(key: string): Promise<RefundReservations | undefined> {
    const out = await this.#client.send(
      new GetItemCommand({
        TableName: this.#table,
        Key: { pk: { S: RESERVATIONS_PREFIX + key } },
        ConsistentRead: true,
      }),
      this.#callOptions(),
    );
    if (!out.Item) return undefined;
    const doc = out.Item['doc']?.S;
    if (!doc) throw new Error(`reservations item of ${key} has no doc`);
    return {
      key,
      version: Number(out.Item['version']?.N ?? 0),
      refunds: JSON.parse(doc) as RefundReservation[],
    };
  }

  async saveReservations(reservations: RefundReservations): Promise<boolean> {
    const version = reservations.version + 1;
    const item = {
      pk: { S: RESERVATIONS_PREFIX + reservations.key },
      version: { N: String(version) },
      doc: { S: JSON.stringify(reservations.refunds) },
    };
    const [condition, values] =
      reservations.version === 0
        ? ['attribute_not_exists(pk)', {}]
        : ['version = :v', { ':v': { N: String(reservations.version) } }];
    return this.#put(item, condition, values, () => {
      reservations.version = version;
    });
  }

  async *list(program?: string): AsyncIterable<OrderRecord> {
    // Paged by hand rather than with paginateScan, whose send options are fixed for all pages.
    let start: Record<string, AttributeValue> | undefined;
    do {
      const page = await this.#client.send(
        new ScanCommand({
          TableName: this.#table,
          ConsistentRead: true,
          ...(program
            ? { FilterExpression: 'program = :p', ExpressionAttributeValues: { ':p': { S: program } } }
            : {}),
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
        this.#callOptions(),
      );
      for (const item of page.Items ?? []) {
        if (!item['pk']?.S?.startsWith(RESERVATIONS_PREFIX)) yield fromItem(item);
      }
      start = page.LastEvaluatedKey;
    } while (start);
  }

  async dueForAccept(
    source: string,
    dueBy: string,
    page: { readonly limit: number; readonly cursor?: string },
  ): Promise<DuePage> {
    const out = await this.#client.send(
      new QueryCommand({
        TableName: this.#table,
        IndexName: ACCEPT_DUE_INDEX,
        KeyConditionExpression: '#source = :source AND acceptDueAt <= :dueBy',
        // `source` is a DynamoDB reserved word.
        ExpressionAttributeNames: { '#source': 'source' },
        ExpressionAttributeValues: { ':source': { S: source }, ':dueBy': { S: dueBy } },
        Limit: page.limit,
        ...(page.cursor ? { ExclusiveStartKey: parseCursor(page.cursor) } : {}),
      }),
      this.#callOptions(),
    );
    return {
      keys: (out.Items ?? []).flatMap((item) => (item['pk']?.S ? [item['pk'].S] : [])),
      ...(out.LastEvaluatedKey ? { cursor: JSON.stringify(out.LastEvaluatedKey) } : {}),
    };
  }

  async #put(
    item: Record<string, AttributeValue>,
    condition: string,
    values: Record<string, AttributeValue>,
    onSuccess: () => void,
  ): Promise<boolean> {
    try {
      await this.#client.send(
        new PutItemCommand({
          TableName: this.#table,
          Item: item,
          ConditionExpression: condition,
          ...(Object.keys(values).length > 0 ? { ExpressionAttributeValues: values } : {}),
        }),
        this.#callOptions(),
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
    ...(awaitsAccept(record) && record.acceptDueAt ? { acceptDueAt: { S: record.acceptDueAt } } : {}),
    // Past DynamoDB's item size the lines kept for refunds are dropped (see storableRecord).
    doc: { S: JSON.stringify(storableRecord(record)) },
  };
}

function parseCursor(cursor: string): Record<string, AttributeValue> {
  try {
    return JSON.parse(cursor) as Record<string, AttributeValue>;
  } catch {
    throw new Error('not a cursor of dueForAccept');
  }
}

function fromItem(item: Record<string, AttributeValue>): OrderRecord {
  const doc = item['doc']?.S;
  if (!doc) throw new Error(`ledger item ${item['pk']?.S ?? '?'} has no doc`);
  // JSON.parse defines keys: a refund id such as `__proto__` stays an entry of `refunds`.
  const record = JSON.parse(doc) as OrderRecord;
  record.version = Number(item['version']?.N ?? record.version);
  return record;
}

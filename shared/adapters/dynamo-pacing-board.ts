import { randomBytes } from 'node:crypto';
import { type DynamoDBClient, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import type { FleetPaces } from '../affiliate/rate-limiter.ts';

/** How long one share may take: the record is advice, the pacing goes on without it. */
const SHARE_TIMEOUT_MS = 1000;
/** Stale entries removed per share, to keep one update small. */
const MAX_REMOVED = 20;

/**
 * The fleet's pacing record in DynamoDB (the stack's pacing table, `PACING_TABLE`): one item per
 * route, one attribute per busy instance (its pace and when it wrote it). A share is one
 * UpdateItem that sets this instance's attribute, removes entries it saw go stale last time, and
 * returns the item: outside the request path, once or twice a second per busy instance and route.
 * An instance that goes idle stops writing and drops out after `freshMs`.
 */
export class DynamoPacingBoard implements FleetPaces {
  private readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly freshMs: number;
  private readonly now: () => number;
  /** This instance's attribute name: random, so containers never collide. */
  private readonly id = `i${randomBytes(8).toString('hex')}`;
  private stale = new Map<string, string[]>();

  constructor(options: { client: DynamoDBClient; table: string; freshMs?: number; now?: () => number }) {
    this.client = options.client;
    this.table = options.table;
    this.freshMs = options.freshMs ?? 2000;
    this.now = options.now ?? Date.now;
  }

  async share(key: string, pace: number): Promise<readonly number[]> {
    const at = this.now();
    const gone = (this.stale.get(key) ?? []).slice(0, MAX_REMOVED);
    const names: Record<string, string> = { '#me': this.id };
    for (const [i, name] of gone.entries()) names[`#gone${i}`] = name;
    const remove = gone.length > 0 ? ` REMOVE ${gone.map((_, i) => `#gone${i}`).join(', ')}` : '';
    const answer = await this.client.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: { pk: { S: `pace#${key}` } },
        UpdateExpression: `SET #me = :pace${remove}`,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: {
          ':pace': { M: { pace: { N: String(pace) }, at: { N: String(at) } } },
        },
        ReturnValues: 'ALL_NEW',
      }),
      { abortSignal: AbortSignal.timeout(SHARE_TIMEOUT_MS) },
    );
    const paces: number[] = [];
    const stale: string[] = [];
    for (const [name, value] of Object.entries(answer.Attributes ?? {})) {
      if (name === 'pk' || value.M === undefined) continue;
      const written = Number(value.M['at']?.N);
      const other = Number(value.M['pace']?.N);
      if (!Number.isFinite(written) || !Number.isFinite(other) || at - written > this.freshMs) {
        if (name !== this.id) stale.push(name);
      } else paces.push(other);
    }
    this.stale.set(key, stale);
    return paces;
  }
}

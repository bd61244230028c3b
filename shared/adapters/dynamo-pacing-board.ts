import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { FleetPaces } from '../affiliate/rate-limiter.ts';

/** How long one share may take: the record is advice, the pacing goes on without it. */
const SHARE_TIMEOUT_MS = 1000;
/** Stale entries removed per share, to keep one update small. */
const MAX_REMOVED = 20;
/**
 * Reads a claim may make while others claim at the same time (each round lets one through, so
 * ten starting together all get theirs); then the caller keeps its own pace.
 */
const CLAIM_ATTEMPTS = 10;
/** A claim that lost the race waits up to this long, at random, before it reads again. */
const CLAIM_JITTER_MS = 20;
/**
 * The item's count of arrivals and claims: a claim writes only if no instance arrived or claimed
 * since it read the paces.
 */
const CLAIMS = 'claims';

/**
 * The fleet's pacing record in DynamoDB (the stack's pacing table, `PACING_TABLE`): one item per
 * route, one attribute per busy instance (its pace and when it wrote it). A share is one
 * UpdateItem that sets this instance's attribute, removes entries it saw go stale last time, and
 * returns the item: outside the request path, once or twice a second per busy instance and route.
 * An instance that goes idle stops writing and drops out after `freshMs`. A claim (an instance
 * starting) reads the paces and writes its own only if the item's count of claims did not move
 * meanwhile (a condition on the same UpdateItem), so instances starting together take the route's
 * free budget one after another, never all of it each.
 */
export class DynamoPacingBoard implements FleetPaces {
  private readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly freshMs: number;
  private readonly now: () => number;
  /** This instance's attribute name: random, so containers never collide. */
  private readonly id = `i${randomBytes(8).toString('hex')}`;
  private stale = new Map<string, string[]>();
  /** When this instance last wrote its pace per key. */
  private readonly wrote = new Map<string, number>();

  constructor(options: { client: DynamoDBClient; table: string; freshMs?: number; now?: () => number }) {
    this.client = options.client;
    this.table = options.table;
    this.freshMs = options.freshMs ?? 2000;
    this.now = options.now ?? Date.now;
  }

  async share(key: string, pace: number): Promise<readonly number[]> {
    const { paces } = await this.write(key, pace);
    return paces;
  }

  async claim(
    key: string,
    pace: number,
    decide: (others: readonly number[]) => number,
  ): Promise<number | undefined> {
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      // Arriving (not on the record as fresh) counts, so claims decided without it are retried;
      // an instance already on it only reads, so claims that retry do not keep each other out.
      const fresh = this.now() - (this.wrote.get(key) ?? Number.NEGATIVE_INFINITY) <= this.freshMs;
      const { claims, others } = await this.write(key, pace, fresh ? undefined : 'arrive');
      const claimed = decide(others);
      try {
        await this.write(key, claimed, claims);
        return claimed;
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
        await sleep(Math.random() * CLAIM_JITTER_MS);
      }
    }
    return undefined;
  }

  // Sets this instance's pace (removing entries seen stale last time) and reads the item back: the
  // fresh paces, its own included and apart, and the count of claims. `arrive` counts the write as
  // an arrival; a count makes it a claim, written only if the item's count is still that.
  private async write(
    key: string,
    pace: number,
    claims?: number | 'arrive',
  ): Promise<{ paces: number[]; others: number[]; claims: number }> {
    const at = this.now();
    const gone = (this.stale.get(key) ?? []).slice(0, MAX_REMOVED);
    const names: Record<string, string> = { '#me': this.id };
    for (const [i, name] of gone.entries()) names[`#gone${i}`] = name;
    const values: Record<string, AttributeValue> = {
      ':pace': { M: { pace: { N: String(pace) }, at: { N: String(at) } } },
    };
    let set = 'SET #me = :pace';
    let condition: string | undefined;
    if (claims === 'arrive') {
      names['#claims'] = CLAIMS;
      values[':zero'] = { N: '0' };
      values[':one'] = { N: '1' };
      set += ', #claims = if_not_exists(#claims, :zero) + :one';
    } else if (claims !== undefined) {
      names['#claims'] = CLAIMS;
      values[':next'] = { N: String(claims + 1) };
      set += ', #claims = :next';
      if (claims > 0) {
        values[':seen'] = { N: String(claims) };
        condition = '#claims = :seen';
      } else condition = 'attribute_not_exists(#claims)';
    }
    const remove = gone.length > 0 ? ` REMOVE ${gone.map((_, i) => `#gone${i}`).join(', ')}` : '';
    const answer = await this.client.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: { pk: { S: `pace#${key}` } },
        UpdateExpression: `${set}${remove}`,
        ...(condition ? { ConditionExpression: condition } : {}),
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_NEW',
      }),
      { abortSignal: AbortSignal.timeout(SHARE_TIMEOUT_MS) },
    );
    const paces: number[] = [];
    const others: number[] = [];
    const stale: string[] = [];
    let seen = 0;
    for (const [name, value] of Object.entries(answer.Attributes ?? {})) {
      if (name === CLAIMS) seen = Number(value.N ?? 0) || 0;
      if (name === 'pk' || value.M === undefined) continue;
      const written = Number(value.M['at']?.N);
      const other = Number(value.M['pace']?.N);
      if (!Number.isFinite(written) || !Number.isFinite(other) || at - written > this.freshMs) {
        if (name !== this.id) stale.push(name);
      } else {
        paces.push(other);
        if (name !== this.id) others.push(other);
      }
    }
    this.stale.set(key, stale);
    this.wrote.set(key, at);
    return { paces, others, claims: seen };
  }
}

import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  UpdateItemCommand,
  type UpdateItemCommandOutput,
} from '@aws-sdk/client-dynamodb';
import type { FleetPaces } from '../affiliate/rate-limiter.ts';

/** How long one share may take: the record is advice, the pacing goes on without it. */
const SHARE_TIMEOUT_MS = 1000;
/** Stale entries removed per share, to keep one update small. */
const MAX_REMOVED = 20;
/**
 * Reads a claim may make while instances keep arriving (a read is stale only if one arrived since,
 * so instances starting together need about two); then the caller keeps its own pace.
 */
const CLAIM_ATTEMPTS = 10;
/** A claim that lost the race waits up to this long, at random, before it reads again. */
const CLAIM_JITTER_MS = 20;
/**
 * The item's count of arrivals: a claim writes only if no instance arrived since it read the
 * paces. Instances already on the record claim alongside one another: each is marked as claiming
 * while it decides, and the deciding splits what the settled others leave among the claimers.
 */
const ARRIVALS = 'arrivals';

/**
 * The fleet's pacing record in DynamoDB (the stack's pacing table, `PACING_TABLE`): one item per
 * route, one attribute per busy instance (its pace and when it wrote it). A share is one
 * UpdateItem that sets this instance's attribute, removes entries it saw go stale last time, and
 * returns the item: outside the request path, once or twice a second per busy instance and route.
 * An instance that goes idle stops writing and drops out after `freshMs`. An entry is removed only
 * if it still holds the time it was seen stale at: an instance that came back and wrote since keeps
 * it (the update then goes again without removals, and the entries still stale go next time). A
 * claim (an instance starting) marks its entry as claiming, reads the others' paces and how many
 * others are claiming, and writes the pace it decides only if no instance arrived meanwhile (a
 * condition on the item's count of arrivals, in the same UpdateItem). So the instances starting
 * together all decide on the same fleet, and split what the settled ones leave free among them, in
 * about two reads each: a condition on every claim instead let one claimer through per read, and of
 * forty instances starting at once about half ran out of reads
 * (test/integration/pacing-board.test.ts).
 */
export class DynamoPacingBoard implements FleetPaces {
  private readonly client: DynamoDBClient;
  private readonly table: string;
  private readonly freshMs: number;
  private readonly now: () => number;
  private readonly timeoutMs: number;
  /** This instance's attribute name: random, so containers never collide. */
  private readonly id = `i${randomBytes(8).toString('hex')}`;
  /** Per key, the entries seen stale on the last write, with the `at` each held then. */
  private stale = new Map<string, Seen[]>();
  /** When this instance last wrote its pace per key. */
  private readonly wrote = new Map<string, number>();

  constructor(options: {
    client: DynamoDBClient;
    table: string;
    freshMs?: number;
    now?: () => number;
    /** How long one share may take (default 1 s). */
    timeoutMs?: number;
  }) {
    this.client = options.client;
    this.table = options.table;
    this.freshMs = options.freshMs ?? 2000;
    this.now = options.now ?? Date.now;
    this.timeoutMs = options.timeoutMs ?? SHARE_TIMEOUT_MS;
  }

  async share(key: string, pace: number): Promise<readonly number[]> {
    const { paces } = await this.write(key, pace, { claiming: false });
    return paces;
  }

  async claim(
    key: string,
    pace: number,
    decide: (others: readonly number[], claiming: number) => number,
  ): Promise<number | undefined> {
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      // Arriving (not on the record as fresh) counts, so claims decided without it are retried;
      // an instance already on it only marks itself as claiming, which keeps nobody out.
      const fresh = this.now() - (this.wrote.get(key) ?? Number.NEGATIVE_INFINITY) <= this.freshMs;
      const { arrivals, others, claiming } = await this.write(key, pace, { claiming: true, arrive: !fresh });
      const claimed = decide(others, claiming);
      try {
        await this.write(key, claimed, { claiming: false, unless: arrivals });
        return claimed;
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
        await sleep(Math.random() * CLAIM_JITTER_MS);
      }
    }
    return undefined;
  }

  // Sets this instance's pace (removing entries seen stale last time, unless written since), marked
  // as claiming or not, and reads the item back: the fresh paces (its own included), the others'
  // apart (the settled ones' paces and how many are claiming), and the count of arrivals. `arrive`
  // counts the write as an arrival; `unless` writes only if the count of arrivals is still that.
  private async write(
    key: string,
    pace: number,
    how: { claiming: boolean; arrive?: boolean; unless?: number },
  ): Promise<{ paces: number[]; others: number[]; claiming: number; arrivals: number }> {
    const at = this.now();
    const gone = (this.stale.get(key) ?? []).slice(0, MAX_REMOVED);
    // One deadline for the share, the retry without removals included.
    const signal = AbortSignal.timeout(this.timeoutMs);
    let answer: UpdateItemCommandOutput;
    try {
      answer = await this.update(key, pace, at, how, gone, signal);
    } catch (error) {
      // An entry seen stale was written since (its instance came back) or the arrivals moved on;
      // without removals, only the latter still fails.
      if (!(error instanceof ConditionalCheckFailedException) || gone.length === 0) throw error;
      answer = await this.update(key, pace, at, how, [], signal);
    }
    const paces: number[] = [];
    const others: number[] = [];
    const stale: Seen[] = [];
    let claiming = 0;
    let arrivals = 0;
    for (const [name, value] of Object.entries(answer.Attributes ?? {})) {
      if (name === ARRIVALS) arrivals = Number(value.N ?? 0) || 0;
      if (name === 'pk' || value.M === undefined) continue;
      const written = Number(value.M['at']?.N);
      const other = Number(value.M['pace']?.N);
      // Fresh: written within the last window. One written further ahead than that (a garbled
      // record, a clock far off) would otherwise hold its share until that time came.
      if (!Number.isFinite(written) || !Number.isFinite(other) || Math.abs(at - written) > this.freshMs) {
        if (name !== this.id) stale.push({ name, at: value.M['at'] });
      } else {
        paces.push(other);
        if (name === this.id) continue;
        if (value.M['claiming']?.BOOL === true) claiming += 1;
        else others.push(other);
      }
    }
    this.stale.set(key, stale);
    this.wrote.set(key, at);
    return { paces, others, claiming, arrivals };
  }

  // The one UpdateItem of a write: this instance's entry set, `gone` removed each on condition it
  // still holds the `at` seen (or is gone already), the arrivals counted or checked as `how` says.
  private update(
    key: string,
    pace: number,
    at: number,
    how: { claiming: boolean; arrive?: boolean; unless?: number },
    gone: readonly Seen[],
    signal: AbortSignal,
  ): Promise<UpdateItemCommandOutput> {
    const names: Record<string, string> = { '#me': this.id };
    const entry: Record<string, AttributeValue> = { pace: { N: String(pace) }, at: { N: String(at) } };
    if (how.claiming) entry['claiming'] = { BOOL: true };
    const values: Record<string, AttributeValue> = { ':pace': { M: entry } };
    let set = 'SET #me = :pace';
    const conditions: string[] = [];
    if (how.arrive) {
      names['#arrivals'] = ARRIVALS;
      values[':zero'] = { N: '0' };
      values[':one'] = { N: '1' };
      set += ', #arrivals = if_not_exists(#arrivals, :zero) + :one';
    } else if (how.unless !== undefined) {
      names['#arrivals'] = ARRIVALS;
      if (how.unless > 0) {
        values[':seen'] = { N: String(how.unless) };
        conditions.push('#arrivals = :seen');
      } else conditions.push('attribute_not_exists(#arrivals)');
    }
    if (gone.length > 0) names['#at'] = 'at';
    for (const [i, { name, at: seen }] of gone.entries()) {
      names[`#gone${i}`] = name;
      if (seen === undefined) conditions.push(`attribute_not_exists(#gone${i}.#at)`);
      else {
        values[`:at${i}`] = seen;
        conditions.push(`(attribute_not_exists(#gone${i}) OR #gone${i}.#at = :at${i})`);
      }
    }
    const remove = gone.length > 0 ? ` REMOVE ${gone.map((_, i) => `#gone${i}`).join(', ')}` : '';
    return this.client.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: { pk: { S: `pace#${key}` } },
        UpdateExpression: `${set}${remove}`,
        ...(conditions.length > 0 ? { ConditionExpression: conditions.join(' AND ') } : {}),
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ReturnValues: 'ALL_NEW',
      }),
      { abortSignal: signal },
    );
  }
}

/** An entry seen stale: its attribute name and the `at` it held (undefined if it held none). */
interface Seen {
  readonly name: string;
  readonly at: AttributeValue | undefined;
}

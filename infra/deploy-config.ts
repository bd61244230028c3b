import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, relative, resolve } from 'node:path';
import * as z from 'zod';
import { ROUTE_NAMES, type RouteName, resolveRoutes } from '../shared/affiliate/routes.ts';
import { SourcesFile } from '../shared/config/sources.ts';
import { firstIssue } from '../shared/validation.ts';
import { longestQueueStaySeconds } from '../shared/worker/batch.ts';

/**
 * The deploy configuration: everything that differs between two installations of the connector.
 * It is read from a JSON file (context `config`, default `connector.config.json`) and may be
 * overridden setting by setting with CDK context (`-c queue.maxReceiveCount=8`). Secrets are never
 * part of it: only the NAMES or ARNs of Secrets Manager secrets the user created.
 */

/** The file read when context `config` is not given. */
export const DEFAULT_CONFIG_FILE = 'connector.config.json';
/** Used, with a warning, when the default file does not exist (so `cdk synth` works on a fresh clone). */
export const EXAMPLE_CONFIG_FILE = 'connector.config.example.json';

/** A Secrets Manager secret name (`connector/affiliate-token`) or ARN; never a secret value. */
export const SecretRef = z
  .string()
  .min(1)
  .max(2048)
  .regex(/^(arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:)?[A-Za-z0-9/_+=.@-]+$/, {
    message: 'must be a Secrets Manager secret name or ARN (letters, digits and /_+=.@-)',
  });

/**
 * One API Gateway throttle: a steady rate (requests per second) and a burst (a token bucket's size,
 * what may arrive at once). A burst below the rate would cut every second short.
 */
const Throttle = (rateLimit: number, burstLimit: number) =>
  z
    .strictObject({
      rateLimit: z.number().int().positive().max(10_000).default(rateLimit),
      burstLimit: z.number().int().positive().max(5_000).default(burstLimit),
    })
    .prefault({})
    .superRefine((t, ctx) => {
      if (t.burstLimit < t.rateLimit)
        ctx.addIssue({ code: 'custom', path: ['burstLimit'], message: 'must be at least rateLimit' });
    });

const HttpsUrl = z.url({ protocol: /^https$/, message: 'must be an https:// URL' });

/** The worker function's timeout (`CONNECTOR_FUNCTIONS.worker` in infra/connector-stack.ts). */
export const WORKER_TIMEOUT_SECONDS = 30;
/**
 * The main queue's visibility timeout: Lambda's guidance for an SQS event source is at least six
 * times the consumer's timeout, so a batch still in a retrying invocation is not handed out twice.
 */
export const MAIN_QUEUE_VISIBILITY_TIMEOUT_SECONDS = 6 * WORKER_TIMEOUT_SECONDS;
/**
 * How long the DLQ keeps a message before SQS deletes it: the SQS maximum. A FIFO queue resets a
 * message's enqueue time when the redrive moves it, and a park is a new message, so it counts from
 * the park or the move, as the DLQ's ApproximateAgeOfOldestMessage does.
 */
export const DEAD_LETTER_RETENTION_DAYS = 14;

/**
 * How long one message failing transiently stays in the main queue on the worker's own backoffs
 * before the worker parks it, as deployed with `queue.maxReceiveCount`: the least the
 * OldestMessageAge threshold may be, or one bad message pages. Not the longest stay
 * (`longestQueueStaySeconds` with its waits, which `reservations --drop` keeps to): a platform asking
 * for 10-minute waits on every receive, or adds that keep getting no clear answer, can keep a
 * message up to an hour, and the alarm then pages because the platform is in trouble.
 */
export function longestMainQueueStaySeconds(maxReceiveCount: number): number {
  return longestQueueStaySeconds({
    maxReceiveCount,
    visibilityTimeoutSeconds: MAIN_QUEUE_VISIBILITY_TIMEOUT_SECONDS,
    invocationSeconds: WORKER_TIMEOUT_SECONDS,
    longestWaitSeconds: 0,
  });
}

/**
 * The `OldestMessageAge` alarm's threshold when the config gives none: 30 minutes, or, when longer,
 * one failing message's longest stay in the main queue and 10 minutes more: the alarm means a
 * stalled worker, not one bad message.
 */
export function oldestMessageAgeDefaultSeconds(maxReceiveCount: number): number {
  return Math.max(1800, longestMainQueueStaySeconds(maxReceiveCount) + 600);
}

const DEAD_LETTER_AGE_DAYS = `must be whole days from 1 to ${DEAD_LETTER_RETENTION_DAYS - 1}: SQS deletes a message ${DEAD_LETTER_RETENTION_DAYS} days after it was parked, and the alarm must come before that`;

/** CloudWatch Logs accepts only these retention periods. */
const LOG_RETENTION_DAYS = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
] as const;

export const DeployConfig = z
  .strictObject({
    /** CloudFormation stack name; also names the dashboard. */
    stackName: z
      .string()
      .regex(/^[A-Za-z][A-Za-z0-9-]{0,99}$/, 'letters, digits and -, starting with a letter')
      .default('ConversionConnector'),
    /** The shops posting webhooks, validated by the same schema the functions use. */
    sources: SourcesFile.check(z.refine((s) => s.length > 0, 'configure at least one source')),
    affiliate: z.strictObject({
      /** Base URL of the platform's current API (host address, no route). */
      baseUrl: HttpsUrl,
      /** Secret holding the Bearer token of the current API. */
      tokenSecret: SecretRef,
      /** The platform's limit per route and token (100 requests per second at the time of writing). */
      rateLimitPerSecond: z.number().int().positive().default(100),
      /** Operation name to route path, for correcting a route without a release (AFFILIATE_ROUTES). */
      routes: z
        .partialRecord(z.enum(ROUTE_NAMES as [RouteName, ...RouteName[]]), z.string())
        .superRefine((routes, ctx) => {
          for (const [name, path] of Object.entries(routes)) {
            try {
              resolveRoutes({ [name]: path });
            } catch {
              ctx.addIssue({
                code: 'custom',
                path: [name],
                message: 'must be a path relative to baseUrl, starting with /',
              });
            }
          }
        })
        .optional(),
    }),
    legacy: z
      .strictObject({
        /** Base URL of the legacy 2.0 interface. @default affiliate.baseUrl */
        baseUrl: HttpsUrl.optional(),
        /** Secret holding the legacy Basic credentials; required when a source uses backend "legacy". */
        credentialsSecret: SecretRef.optional(),
      })
      .prefault({}),
    /** Secret holding the API key the finance team sends to `POST /refunds`. */
    financeApiKeySecret: SecretRef,
    /**
     * Check at every deploy that the finance key holds at least 32 characters (a custom resource
     * reads the secret's AWSCURRENT value in the account and fails the deployment when it is short).
     * Turn off where the deployment's roles may not read secrets; the refunds function and
     * `connector doctor` check it anyway.
     */
    checkFinanceKeyAtDeploy: z.boolean().default(true),
    /** Also require AWS IAM (SigV4) on `POST /refunds`, on top of the finance API key. */
    refundsIamAuth: z.boolean().default(false),
    /**
     * API Gateway throttling, per route. Each source gets its own route, `POST /webhooks/<id>`, with
     * its own limit, so a flood on one shop's URL (or on a made-up source: no route, API Gateway's
     * 404, no Lambda) does not take the others' share; `/refunds` has its own. WooCommerce does not
     * retry a webhook it got a 429 for, so keep each source's rate above its peak order rate.
     */
    apiThrottle: z
      .strictObject({
        /** The stage's default: any route without a limit of its own (none, today). */
        rateLimit: z.number().int().positive().default(100),
        burstLimit: z.number().int().positive().default(200),
        /**
         * Each source's webhook route. 50/s is far above one shop's order rate (a shop taking 50
         * orders a second all day takes 4 million a day) and a burst of 100 absorbs a flash sale's
         * opening and a platform replaying a backlog.
         */
        webhook: Throttle(50, 100),
        /** Per source id, instead of `webhook`: for a shop larger than the default allows. */
        sources: z.record(z.string(), Throttle(50, 100)).default({}),
        /**
         * `/refunds`: finance's CLI sends one refund at a time and waits for each answer, so 10/s is
         * ample; a leaked or guessed key then costs little before the key is rotated.
         */
        refunds: Throttle(10, 20),
      })
      .prefault({}),
    ingest: z
      .strictObject({
        /**
         * Reserved concurrency of the webhook function: both a guarantee (the worker and other
         * functions of the account cannot starve it) and a ceiling (a flood that gets past the
         * throttles cannot take the account's whole pool, 1,000 by default, from everything else).
         * At about 50 ms per delivery, 20 serve about 400 deliveries a second. Lambda refuses it
         * when it would leave the account fewer than 100 unreserved: lower it on a new account.
         */
        reservedConcurrency: z.number().int().min(1).max(1000).default(20),
      })
      .prefault({}),
    queue: z
      .strictObject({
        /** Receives before a message is parked in the DLQ (Lambda's guidance: at least 5). */
        maxReceiveCount: z.number().int().min(5).max(1000).default(6),
        /** Retention of the main queue; the DLQ always keeps 14 days (the SQS maximum). */
        retentionDays: z.number().int().min(1).max(14).default(4),
      })
      .prefault({}),
    worker: z
      .strictObject({
        /**
         * Event source mapping `maxConcurrency` (AWS allows 2 to 1000). One instance applies one
         * batch at a time: its orders side by side at the instance's pace, the batch ending with its
         * slowest, then a wait for the next batch. An instance sends in spells, and ten of them
         * drained at 87–89.5 adds/s on the bench (`--multi-pollers 1`), where ten that each held ten
         * batches reached 91–96; 20 keep twice the batches in flight, so that the pacing, not the
         * instance count, decides the rate.
         * @default 20
         */
        maxConcurrency: z.number().int().min(2).max(1000).default(20),
        /**
         * Event source mapping `batchSize`: messages per batch (a FIFO queue allows 1 to 10). With
         * `maxConcurrency` it sets the work in flight when a backlog runs out: 5 × 20 is 100
         * messages, a second of the route at its limit, and the instances run dry within about a
         * second of one another; batches of 10 held two seconds. On the bench (ten instances, 34
         * interleaved pairs) the end of the drain lost 0.21 s with 5 against 0.39 with 10, and the
         * drain ran at 95.8 adds/s against 95.2 (docs/benchmarks-history.md).
         * @default 5
         */
        batchSize: z.number().int().min(1).max(10).default(5),
        /**
         * Ceiling of ONE worker instance's adaptive pace, per route (AFFILIATE_RATE_PER_SECOND).
         * @default affiliate.rateLimitPerSecond: one instance alone may use the whole route
         */
        ratePerSecond: z.number().positive().optional(),
      })
      .prefault({}),
    accept: z
      .strictObject({
        /**
         * Accept calls per hourly run of the accept function (ACCEPT_MAX_PER_RUN), for sources with
         * `acceptAfterDays`; the rest waits for the next run (the AcceptDueLeft alarm watches).
         * @default 500
         */
        maxPerRun: z.number().int().min(1).max(10_000).default(500),
      })
      .prefault({}),
    /** Upper bound on how long a function keeps a secret value cached (rotation takes effect after it). */
    secretsMaxAgeSeconds: z.number().int().min(1).max(3600).default(300),
    /** DynamoDB deletion protection on the ledger (the table is retained on stack delete either way). */
    ledgerDeletionProtection: z.boolean().default(true),
    powertools: z
      .strictObject({
        serviceName: z
          .string()
          .regex(/^[A-Za-z0-9_.-]{1,64}$/)
          .default('conversion-connector'),
        metricsNamespace: z
          .string()
          .regex(/^[A-Za-z0-9_./#:-]{1,255}$/)
          .default('ConversionConnector'),
        logLevel: z.enum(['TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR', 'SILENT', 'CRITICAL']).default('INFO'),
      })
      .prefault({}),
    logRetentionDays: z
      .number()
      .refine((d) => (LOG_RETENTION_DAYS as readonly number[]).includes(d), {
        message: `must be one of ${LOG_RETENTION_DAYS.join(', ')}`,
      })
      .default(30),
    /** Where alarm notifications go (an SNS topic with this e-mail subscription); none when absent. */
    alarmEmail: z.email().optional(),
    alarms: z
      .strictObject({
        /**
         * Age of the oldest message in the main queue. A failing message stays there on the
         * worker's backoffs (`longestMainQueueStaySeconds`: about 18 minutes at the default 6
         * receives, an hour at 10) before the worker parks it, so the default sits above that: 30
         * minutes, or that stay and 10 minutes more when longer. This alarm means a stalled worker
         * (or a platform asking for long waits), not one bad message: a value below that stay is
         * refused.
         * @default 1800, or more for a maxReceiveCount above 6
         */
        oldestMessageAgeSeconds: z.number().int().positive().optional(),
        /**
         * Days a message may sit in the DLQ before the `DeadLetterExpiring` alarm fires: the second
         * warning after `DeadLetterMessages`, while there is time to act before SQS deletes it at
         * DEAD_LETTER_RETENTION_DAYS. 10 leaves four days, a long weekend and a working day.
         * @default 10
         */
        deadLetterAgeDays: z
          .number()
          .int(DEAD_LETTER_AGE_DAYS)
          .min(1, DEAD_LETTER_AGE_DAYS)
          .max(DEAD_LETTER_RETENTION_DAYS - 1, DEAD_LETTER_AGE_DAYS)
          .default(10),
        /**
         * 429 answers from the platform counted over 5 minutes before the alarm fires. The adaptive
         * pacing probes the limit and draws a few 429s (under 1% of calls) by design.
         * @default 1% of affiliate.rateLimitPerSecond over 5 minutes (300 at 100/s)
         */
        rateLimitedPer5Minutes: z.number().int().nonnegative().optional(),
        /**
         * Hours a refund or cancellation may wait in the ledger for its order before the alarm fires
         * (shops deliver out of order by seconds to minutes; an order a day late is lost or foreign).
         */
        refundWaitingHours: z.number().int().positive().max(720).default(24),
      })
      .prefault({}),
    /**
     * The scheduled catch-up (docs/backfill.md): once a day, `connector backfill` of every source
     * with `shopApi` over the last `hours`, so what a shop failed to deliver is queued anyway.
     */
    catchUp: z
      .strictObject({
        /** @default false: off unless configured */
        enabled: z.boolean().default(false),
        /**
         * How far back each run reads: at least the day between two runs, or part of every day is read
         * by none. @default 48 (two runs overlap: a failed day is caught next time)
         */
        hours: z
          .number()
          .int()
          .min(
            24,
            'must be at least 24: the catch-up runs once a day, and a shorter window leaves hours no run reads',
          )
          .max(720)
          .default(48),
        /** Hour of the day (UTC) the run starts. @default 3 */
        hourUtc: z.number().int().min(0).max(23).default(3),
      })
      .prefault({}),
  })
  .superRefine((config, ctx) => {
    config.sources.forEach((source, i) => {
      const ref = source.shopApi?.credentialsRef;
      const parsed = ref === undefined ? undefined : SecretRef.safeParse(ref);
      if (parsed && !parsed.success) {
        ctx.addIssue({
          code: 'custom',
          path: ['sources', i, 'shopApi', 'credentialsRef'],
          message: parsed.error.issues[0]?.message ?? 'not a secret name or ARN',
        });
      }
    });
    if (config.catchUp.enabled && !config.sources.some((s) => s.shopApi !== undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['catchUp', 'enabled'],
        message: 'no source has shopApi: the catch-up would read nothing',
      });
    }
    const ids = new Set(config.sources.map((s) => s.id));
    for (const id of Object.keys(config.apiThrottle.sources)) {
      if (!ids.has(id))
        ctx.addIssue({
          code: 'custom',
          path: ['apiThrottle', 'sources', id],
          message: 'not a configured source id',
        });
    }
    if (config.sources.some((s) => s.backend === 'legacy') && config.legacy.credentialsSecret === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['legacy', 'credentialsSecret'],
        message: 'required because a source uses backend "legacy"',
      });
    }
    const age = config.alarms.oldestMessageAgeSeconds;
    const receives = config.queue.maxReceiveCount;
    const stay = longestMainQueueStaySeconds(receives);
    if (age !== undefined && age < stay) {
      ctx.addIssue({
        code: 'custom',
        path: ['alarms', 'oldestMessageAgeSeconds'],
        message: `${age} s is below ${stay} s, how long one message failing transiently stays in the main queue on the worker's backoffs before it parks it (queue.maxReceiveCount ${receives}, visibility timeout ${MAIN_QUEUE_VISIBILITY_TIMEOUT_SECONDS} s), so one bad message would page: give at least ${stay}, or leave it out (default ${oldestMessageAgeDefaultSeconds(receives)})`,
      });
    }
    const rate = workerRatePerSecond(config);
    if (rate > config.affiliate.rateLimitPerSecond) {
      ctx.addIssue({
        code: 'custom',
        path: ['worker', 'ratePerSecond'],
        message: `${rate}/s exceeds the platform's ${config.affiliate.rateLimitPerSecond}/s per route`,
      });
    }
  });
export type DeployConfig = z.infer<typeof DeployConfig>;
export type DeployConfigInput = z.input<typeof DeployConfig>;

/** The worker's settings when the config leaves them out: what the stack deploys by default. */
export const WORKER_DEFAULTS: DeployConfig['worker'] = DeployConfig.shape.worker.parse(undefined);

/** Whether `size` is a batch size the worker's event source takes (`worker.batchSize`). */
export function isWorkerBatchSize(size: number): boolean {
  return DeployConfig.shape.worker.unwrap().shape.batchSize.safeParse(size).success;
}

/** The settings a worker instance's pace follows from. */
export type WorkerPaceSettings = Pick<DeployConfig, 'affiliate'> & {
  readonly worker: Pick<DeployConfig['worker'], 'maxConcurrency' | 'ratePerSecond'>;
};

/**
 * The ceiling of one worker instance's pace per route. Instances share no memory; each paces itself
 * from the platform's rate-limit headers (RateLimiter.observe), which every client of the token sees
 * alike, so the ceiling is a safety bound (one instance alone never draws a 429), not a share.
 */
export function workerRatePerSecond(config: WorkerPaceSettings): number {
  return config.worker.ratePerSecond ?? config.affiliate.rateLimitPerSecond;
}

/**
 * Where each instance's pace starts: its share of 80% of the platform limit across maxConcurrency
 * instances (the old static split), so a fleet that cold-starts at once stays under the limit before
 * the headers have told it anything; never above the ceiling.
 */
export function workerInitialRatePerSecond(config: WorkerPaceSettings): number {
  const share = Math.max(
    1,
    Math.floor((config.affiliate.rateLimitPerSecond * 0.8) / config.worker.maxConcurrency),
  );
  return Math.min(share, workerRatePerSecond(config));
}

/** A deploy configuration that cannot be used; the message names the file and the wrong setting. */
export class DeployConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DeployConfigError';
  }
}

export interface LoadedDeployConfig {
  readonly config: DeployConfig;
  /** The file the settings came from (absolute path). */
  readonly file: string;
  /** The setting paths that CDK context overrode (`queue.maxReceiveCount`). */
  readonly overrides: readonly string[];
  /** Things the user should know but that do not stop the deploy. */
  readonly warnings: readonly string[];
}

export interface LoadDeployConfigOptions {
  /** All CDK context (`app.node.getAllContext()`): `config` names the file, other keys override settings. */
  readonly context: Readonly<Record<string, unknown>>;
  /** Directory relative file names resolve against. */
  readonly cwd: string;
}

const TOP_LEVEL_KEYS: ReadonlySet<string> = new Set(Object.keys(DeployConfig.shape));

/**
 * Reads, overrides and validates the deploy configuration.
 *
 * Context keys whose first segment is a setting (`alarmEmail`, `queue.maxReceiveCount`,
 * `sources.0.secretRef`) replace that setting; their values are parsed as JSON when they can be
 * (`true`, `8`, `[...]`) and kept as strings otherwise. Other context keys (CDK feature flags) are ignored.
 *
 * @throws DeployConfigError naming the file, the setting and, when it came from context, the `-c` key.
 */
export function loadDeployConfig(options: LoadDeployConfigOptions): LoadedDeployConfig {
  const warnings: string[] = [];
  const named = options.context['config'];
  if (named !== undefined && (typeof named !== 'string' || named.trim() === '')) {
    throw new DeployConfigError('context config: must be the path of a JSON file');
  }
  let file = absolute(options.cwd, named ?? DEFAULT_CONFIG_FILE);
  if (!existsSync(file)) {
    if (named !== undefined) throw new DeployConfigError(`${file}: config file not found (context config)`);
    const example = absolute(options.cwd, EXAMPLE_CONFIG_FILE);
    warnings.push(
      `${DEFAULT_CONFIG_FILE} not found: using ${EXAMPLE_CONFIG_FILE}, whose sources and secret names are placeholders. Copy it to ${DEFAULT_CONFIG_FILE} and edit it before deploying.`,
    );
    file = example;
  }

  const shown = relative(options.cwd, file) || file;
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    const reason = error instanceof SyntaxError ? 'not valid JSON' : 'cannot be read';
    throw new DeployConfigError(`${shown}: ${reason}`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new DeployConfigError(`${shown}: must hold a JSON object`);
  }

  const overrides: string[] = [];
  for (const [key, value] of Object.entries(options.context)) {
    const path = key.split('.');
    if (key === 'config' || !TOP_LEVEL_KEYS.has(path[0] ?? '')) continue;
    setPath(raw as Record<string, unknown>, path, parseContextValue(value), key);
    overrides.push(key);
  }

  const result = DeployConfig.safeParse(raw);
  if (!result.success) {
    const issue = firstIssue(result.error);
    const setting = issue.field || '(root)';
    const fromContext = overrides.find(
      (o) => setting === o || setting.startsWith(`${o}.`) || o.startsWith(`${setting}.`),
    );
    const origin = fromContext === undefined ? '' : ` (set by context -c ${fromContext})`;
    throw new DeployConfigError(`${shown}: ${setting}: ${issue.message}${origin}`);
  }
  return { config: result.data, file, overrides, warnings };
}

function absolute(cwd: string, file: string): string {
  return isAbsolute(file) ? file : resolve(cwd, file);
}

function parseContextValue(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

function setPath(
  target: Record<string, unknown>,
  path: readonly string[],
  value: unknown,
  key: string,
): void {
  let node: Record<string, unknown> = target;
  for (const [i, segment] of path.entries()) {
    if (segment === '' || segment === '__proto__' || segment === 'constructor' || segment === 'prototype') {
      throw new DeployConfigError(`context ${key}: not a setting path`);
    }
    if (i === path.length - 1) {
      node[segment] = value;
      return;
    }
    const next = node[segment];
    if (next === undefined) {
      const child: Record<string, unknown> = {};
      node[segment] = child;
      node = child;
    } else if (typeof next === 'object' && next !== null) {
      node = next as Record<string, unknown>;
    } else {
      throw new DeployConfigError(`context ${key}: ${path.slice(0, i + 1).join('.')} is not an object`);
    }
  }
}

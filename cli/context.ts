import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Command } from 'commander';
import { LOCAL_AWS, LOCAL_STATE_FILE } from '../local/defaults.ts';
import { awsClientConfig } from '../shared/adapters/aws-clients.ts';
import { DynamoLedger } from '../shared/adapters/dynamo-ledger.ts';
import { AffiliateClient } from '../shared/affiliate/client.ts';
import { parseSources, SourceConfig } from '../shared/config/sources.ts';
import { HexId } from '../shared/domain/ids.ts';
import { CliError, type CliIo, cell, explain, unreachableHint } from './io.ts';

/**
 * How the CLI reaches the connector, the queues, the ledger and the platform: each setting from its
 * flag, else its environment variable, else the `.local-stack.json` that `npm start` writes in the
 * repository root. Against AWS the SDK's default credentials are used; with an endpoint override
 * (the local emulators) dummy ones. A credential the user holds (flag, environment, Secrets
 * Manager) is only sent to a URL the user gave too, never to one read from the state file.
 */

/** Bounds every AWS call, so a wrong endpoint fails in seconds rather than hanging a terminal. */
export const AWS_TIMEOUT_MS = 10_000;

/**
 * Bounds every call to the affiliate platform, its retries and a 429's retry-after included, so a
 * platform asking to wait an hour fails the command instead of holding the terminal.
 */
export const PLATFORM_CALL_MS = 30_000;

interface SettingSpec {
  /** Flag, when the setting has one (the affiliate token has none: tokens do not belong in shell history). */
  readonly flag?: string;
  readonly env: string;
  /** Field of `.local-stack.json`. */
  readonly file?: string;
  readonly what: string;
}

export const SETTINGS = {
  connectorUrl: { flag: '--url', env: 'CONNECTOR_URL', file: 'connectorUrl', what: 'the connector URL' },
  financeApiKey: {
    flag: '--api-key',
    env: 'FINANCE_API_KEY',
    file: 'financeApiKey',
    what: 'the finance API key',
  },
  queueUrl: { flag: '--queue-url', env: 'QUEUE_URL', file: 'queueUrl', what: 'the main queue URL' },
  dlqUrl: { flag: '--dlq-url', env: 'DLQ_URL', file: 'dlqUrl', what: 'the dead-letter queue URL' },
  sqsEndpoint: { flag: '--sqs-endpoint', env: 'SQS_ENDPOINT', file: 'sqsEndpoint', what: 'the SQS endpoint' },
  ledgerTable: {
    flag: '--ledger-table',
    env: 'LEDGER_TABLE',
    file: 'ledgerTable',
    what: 'the ledger table name',
  },
  dynamoEndpoint: {
    flag: '--dynamodb-endpoint',
    env: 'DYNAMODB_ENDPOINT',
    file: 'dynamoEndpoint',
    what: 'the DynamoDB endpoint',
  },
  affiliateBaseUrl: {
    flag: '--affiliate-url',
    env: 'AFFILIATE_BASE_URL',
    file: 'affiliateBaseUrl',
    what: "the affiliate platform's API URL",
  },
  affiliateToken: {
    env: 'AFFILIATE_TOKEN',
    file: 'affiliateToken',
    what: "the affiliate platform's API token",
  },
  region: { flag: '--region', env: 'AWS_REGION', what: 'the AWS region' },
} as const satisfies Record<string, SettingSpec>;

export type SettingName = keyof typeof SETTINGS;

/**
 * Settings that are secrets. Against AWS they need not be copied into a shell: when the setting is
 * not given, the variable here names the stack's secret (as in connector.config.json), read with
 * GetSecretValue, the way the functions read it.
 */
export const SECRET_REFS = {
  affiliateToken: 'AFFILIATE_TOKEN_SECRET',
  financeApiKey: 'FINANCE_API_KEY_SECRET',
} as const satisfies Partial<Record<SettingName, string>>;
export type SecretSettingName = keyof typeof SECRET_REFS;
/** The settings naming where credentials are sent. */
export type UrlSettingName = 'connectorUrl' | 'affiliateBaseUrl';
/** Where each secret setting is sent. */
const SECRET_DESTINATION = {
  affiliateToken: 'affiliateBaseUrl',
  financeApiKey: 'connectorUrl',
} as const satisfies Record<SecretSettingName, UrlSettingName>;

/** `FINANCE_API_KEY`, `--api-key`: how a setting was given, for messages. */
function describeOrigin(name: SettingName, origin: SettingOrigin): string {
  const spec: SettingSpec = SETTINGS[name];
  if (origin === 'flag') return spec.flag ?? spec.env;
  return origin === 'env' ? spec.env : `${LOCAL_STATE_FILE} ${spec.file ?? name}`;
}
export type SettingOrigin = 'flag' | 'env' | 'file';

const FLAG_HELP: Partial<Record<SettingName, string>> = {
  connectorUrl: 'connector base URL (env CONNECTOR_URL)',
  financeApiKey: 'finance API key (env FINANCE_API_KEY)',
  queueUrl: 'main FIFO queue URL (env QUEUE_URL)',
  dlqUrl: 'dead-letter queue URL (env DLQ_URL)',
  sqsEndpoint: 'SQS endpoint, for emulators only (env SQS_ENDPOINT)',
  ledgerTable: 'ledger table name (env LEDGER_TABLE)',
  dynamoEndpoint: 'DynamoDB endpoint, for emulators only (env DYNAMODB_ENDPOINT)',
  affiliateBaseUrl: 'affiliate platform API URL (env AFFILIATE_BASE_URL)',
  region: 'AWS region (env AWS_REGION)',
};

const PLACEHOLDER: Partial<Record<SettingName, string>> = {
  connectorUrl: 'url',
  financeApiKey: 'key',
  queueUrl: 'url',
  dlqUrl: 'url',
  sqsEndpoint: 'url',
  ledgerTable: 'name',
  dynamoEndpoint: 'url',
  affiliateBaseUrl: 'url',
  region: 'region',
};

/** Adds the flags of these settings to a command, with where else each can come from. */
export function settingOptions(command: Command, names: readonly SettingName[]): Command {
  for (const name of names) {
    const spec: SettingSpec = SETTINGS[name];
    if (spec.flag)
      command.option(`${spec.flag} <${PLACEHOLDER[name] ?? 'value'}>`, FLAG_HELP[name] ?? spec.what);
  }
  return command;
}

/** Commander's attribute name of a flag: `--dynamodb-endpoint` → `dynamodbEndpoint`. */
function attributeOf(flag: string): string {
  return flag.replace(/^--/, '').replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
}

type LocalState = Record<string, unknown>;

/** Settings, clients and sources of one command run (see `withContext`); `close()` when done. */
export class CliContext {
  readonly io: CliIo;
  readonly #flags: Readonly<Record<string, unknown>>;
  #state: LocalState | null | undefined;
  #sqs: SQSClient | undefined;
  #dynamo: DynamoDBClient | undefined;
  #secretsManager: SecretsManagerClient | undefined;
  #sources: SourceConfig[] | undefined;

  /** `flags`: commander's parsed options of the command (attribute names such as `dlqUrl`). */
  constructor(io: CliIo, flags: object = {}) {
    this.io = io;
    this.#flags = flags as Readonly<Record<string, unknown>>;
  }

  /**
   * The local state file: in the working directory, else, when that is inside the connector's own
   * checkout, in the checkout's root (`npm start` writes it there). Never another parent
   * directory's: anyone may have left one in /tmp or $HOME. Undefined when none.
   */
  stateFile(): string | undefined {
    const cwd = resolve(this.io.cwd);
    const dirs = [cwd];
    const root = this.io.projectRoot === undefined ? undefined : resolve(this.io.projectRoot);
    if (root !== undefined && root !== cwd) {
      const path = relative(root, cwd);
      if (!path.startsWith('..') && !isAbsolute(path)) dirs.push(root);
    }
    return dirs.map((dir) => join(dir, LOCAL_STATE_FILE)).find((file) => existsSync(file));
  }

  /** The parsed `.local-stack.json`, or null when there is none. */
  localState(): LocalState | null {
    if (this.#state !== undefined) return this.#state;
    const path = this.stateFile();
    if (path === undefined) {
      this.#state = null;
      return null;
    }
    try {
      const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
        throw new Error('not an object');
      this.#state = parsed as LocalState;
    } catch {
      throw new CliError(`${path} is not valid JSON: restart the local stack (npm start) or delete the file`);
    }
    return this.#state;
  }

  /** Where a setting comes from, or undefined when it is not set anywhere. */
  origin(name: SettingName): SettingOrigin | undefined {
    const spec: SettingSpec = SETTINGS[name];
    if (spec.flag && nonEmpty(this.#flags[attributeOf(spec.flag)])) return 'flag';
    if (nonEmpty(this.io.env[spec.env])) return 'env';
    if (spec.file && nonEmpty(this.localState()?.[spec.file])) return 'file';
    return undefined;
  }

  get(name: SettingName): string | undefined {
    const spec: SettingSpec = SETTINGS[name];
    switch (this.origin(name)) {
      case 'flag':
        return String(this.#flags[attributeOf(spec.flag ?? '')]).trim();
      case 'env':
        return this.io.env[spec.env]?.trim();
      case 'file':
        return String(this.localState()?.[spec.file ?? '']).trim();
      default:
        return undefined;
    }
  }

  /** @throws CliError (exit 2) naming the flag and the environment variable */
  require(name: SettingName): string {
    const value = this.get(name);
    if (value !== undefined) return value;
    throw new CliError(missingMessage(name));
  }

  /** True when the AWS side is the local emulators (an endpoint override is set). */
  get isLocal(): boolean {
    return this.get('sqsEndpoint') !== undefined || this.get('dynamoEndpoint') !== undefined;
  }

  /**
   * The configured sources: `SOURCES` (JSON array) or the local state file's `sources`. Empty when
   * neither is set.
   *
   * @throws CliError naming the setting when it is not a valid list of sources
   */
  sources(): SourceConfig[] {
    if (this.#sources) return this.#sources;
    const fromEnv = this.io.env['SOURCES'];
    if (nonEmpty(fromEnv)) {
      try {
        this.#sources = parseSources(fromEnv, 'setting SOURCES');
      } catch (error) {
        throw new CliError((error as Error).message);
      }
      return this.#sources;
    }
    const fromFile = this.localState()?.['sources'];
    if (Array.isArray(fromFile)) {
      const parsed = fromFile.map((s) => SourceConfig.safeParse(s));
      const bad = parsed.findIndex((p) => !p.success);
      if (bad >= 0) throw new CliError(`${LOCAL_STATE_FILE}: sources.${bad} is not a valid source`);
      this.#sources = parsed.flatMap((p) => (p.success ? [p.data] : []));
      return this.#sources;
    }
    this.#sources = [];
    return this.#sources;
  }

  /** A secret's value by reference: the environment variable, else the local state file's `secrets`. */
  secret(ref: string): string | undefined {
    const fromEnv = this.io.env[ref];
    if (nonEmpty(fromEnv)) return fromEnv;
    return this.fileSecret(ref);
  }

  /** The secret `ref` as the local state file holds it (`secrets`), if it does. */
  fileSecret(ref: string): string | undefined {
    const secrets = this.localState()?.['secrets'];
    const fromFile =
      typeof secrets === 'object' && secrets !== null ? (secrets as Record<string, unknown>)[ref] : undefined;
    return nonEmpty(fromFile) ? fromFile : undefined;
  }

  /** The programs to look in: the one given, else the configured sources' programs (distinct, in order). */
  programs(program?: string, source?: string): string[] {
    // As configured: the ledger key holds the program id as the source spells it.
    if (program) {
      // A mistyped id finds nothing: late-refunds would say "✓ no late refunds" of it.
      const checked = HexId.safeParse(program);
      if (!checked.success) {
        throw new CliError(`--program: "${cell(program, 40)}" ${checked.error.issues[0]?.message}`);
      }
      return [program];
    }
    const sources = this.sources();
    if (source) {
      const found = sources.find((s) => s.id === source);
      if (!found) {
        const known = sources.map((s) => s.id).join(', ') || 'none configured';
        throw new CliError(`--source: unknown source "${source}" (known: ${known})`);
      }
      return [found.program];
    }
    const programs = [...new Set(sources.map((s) => s.program))];
    if (programs.length === 0) {
      throw new CliError(
        'no program to look in: pass --program, or configure sources (env SOURCES, or npm start)',
      );
    }
    return programs;
  }

  sqs(): SQSClient {
    if (this.#sqs) return this.#sqs;
    const client = new SQSClient(this.#awsConfig(this.get('sqsEndpoint')));
    // SQS's QueueDoesNotExist names no queue: keep the URL of the call that failed, for the message.
    client.middlewareStack.add(
      (next) => async (args) => {
        try {
          return await next(args);
        } catch (error) {
          const url = (args.input as { QueueUrl?: unknown }).QueueUrl;
          if (typeof url === 'string' && typeof error === 'object' && error !== null)
            failedQueueUrls.set(error, url);
          throw error;
        }
      },
      { step: 'initialize', name: 'cliFailedQueueUrl' },
    );
    this.#sqs = client;
    return client;
  }

  dynamo(): DynamoDBClient {
    this.#dynamo ??= new DynamoDBClient(this.#awsConfig(this.get('dynamoEndpoint')));
    return this.#dynamo;
  }

  secretsManager(): SecretsManagerClient {
    this.#secretsManager ??= new SecretsManagerClient(this.#awsConfig(undefined));
    return this.#secretsManager;
  }

  ledger(): DynamoLedger {
    return new DynamoLedger(this.dynamo(), this.require('ledgerTable'), { callOptions: awsCall });
  }

  /**
   * Refuses to send a credential from the environment or Secrets Manager to a URL that came from the
   * state file: the file's URLs go with the file's own (local, public) credentials, or a flag.
   *
   * `refused` says what is not done with it (`is not sent to`, `is not told to deliver to`).
   *
   * @throws CliError naming the credential's origin and how to give the URL
   */
  checkDestination(
    url: UrlSettingName,
    credential: string,
    from: SettingOrigin | 'secretsManager',
    refused = 'is not sent to',
  ): void {
    // A flag is typed for this one command, in this directory: the user pointed it at what they see.
    if (this.origin(url) !== 'file' || from === 'file' || from === 'flag') return;
    const spec = SETTINGS[url];
    throw new CliError(
      `${credential} ${refused} ${spec.what} read from ${this.stateFile() ?? LOCAL_STATE_FILE} (a file anyone may have left there): pass ${spec.flag} or set ${spec.env}`,
    );
  }

  /** Whether a secret setting can be had: given directly, or by a reference to Secrets Manager. */
  hasSecretSetting(name: SecretSettingName): boolean {
    return this.get(name) !== undefined || nonEmpty(this.io.env[SECRET_REFS[name]]);
  }

  /**
   * A secret setting's value: the flag, variable or local state file, else the Secrets Manager secret
   * its `…_SECRET` variable names (its AWSCURRENT version, whole: a secret is never split).
   *
   * @throws CliError naming both ways to set it, or why the secret could not be read (never its value)
   */
  async requireSecret(name: SecretSettingName): Promise<string> {
    const value = this.get(name);
    const origin = this.origin(name);
    if (value !== undefined && origin !== undefined) {
      this.checkDestination(SECRET_DESTINATION[name], describeOrigin(name, origin), origin);
      return value;
    }
    const refVariable = SECRET_REFS[name];
    const ref = this.io.env[refVariable]?.trim();
    if (!ref) throw new CliError(`${missingMessage(name)}, or ${refVariable} to its Secrets Manager secret`);
    this.checkDestination(SECRET_DESTINATION[name], `the secret ${refVariable} names`, 'secretsManager');
    let text: string | undefined;
    try {
      const out = await this.secretsManager().send(new GetSecretValueCommand({ SecretId: ref }), awsCall());
      text = out.SecretString;
    } catch (error) {
      throw new CliError(
        `${refVariable}: secret ${ref} could not be read (${explain(error)}); this identity needs secretsmanager:GetSecretValue on it`,
      );
    }
    if (!text) throw new CliError(`${refVariable}: secret ${ref} is empty or binary`);
    return text;
  }

  async affiliate(): Promise<AffiliateClient> {
    const baseUrl = this.require('affiliateBaseUrl');
    const token = await this.requireSecret('affiliateToken');
    try {
      return new AffiliateClient({ baseUrl, token, maxAttempts: 3, callBudgetMs: PLATFORM_CALL_MS });
    } catch (error) {
      throw new CliError(`${SETTINGS.affiliateBaseUrl.env}: ${(error as Error).message}`);
    }
  }

  /**
   * Each attempt is bounded by the client too, not only by `awsCall`: calls the shared adapters
   * send (`SqsEventQueue` for backfill, `SqsFailureQueue` for accept) carry no per-call signal, and
   * the SDK's default request timeout is none.
   */
  #awsConfig(endpoint: string | undefined) {
    const region = this.get('region');
    const budget = { connectionTimeoutMs: AWS_TIMEOUT_MS, requestTimeoutMs: AWS_TIMEOUT_MS };
    if (endpoint)
      return {
        ...awsClientConfig({ ...budget, maxAttempts: 2 }),
        endpoint,
        region: region ?? LOCAL_AWS.region,
        credentials: LOCAL_AWS.credentials,
      };
    return { ...awsClientConfig({ ...budget, maxAttempts: 3 }), ...(region ? { region } : {}) };
  }

  close(): void {
    this.#sqs?.destroy();
    this.#dynamo?.destroy();
    this.#secretsManager?.destroy();
  }
}

/** `missing the DLQ URL: pass --dlq-url or set DLQ_URL (npm start writes it to .local-stack.json)` */
export function missingMessage(name: SettingName): string {
  const spec: SettingSpec = SETTINGS[name];
  const how = spec.flag ? `pass ${spec.flag} or set ${spec.env}` : `set ${spec.env}`;
  const local = spec.file ? ` (locally, \`npm start\` writes it to ${LOCAL_STATE_FILE})` : '';
  return `missing ${spec.what}: ${how}${local}`;
}

function nonEmpty(value: unknown): value is string {
  return typeof value === 'string' && value.trim() !== '';
}

/** Options for `client.send(command, …)`: every AWS call of the CLI is bounded in time. */
export function awsCall(): { abortSignal: AbortSignal } {
  return { abortSignal: AbortSignal.timeout(AWS_TIMEOUT_MS) };
}

/** The queue URL of each SQS call that failed, by its error (see `CliContext.sqs`). */
const failedQueueUrls = new WeakMap<object, string>();

/** Runs `run` with a context for these flags, closing its clients afterwards. */
export async function withContext<T>(
  io: CliIo,
  flags: object,
  run: (ctx: CliContext) => Promise<T>,
): Promise<T> {
  const ctx = new CliContext(io, flags);
  try {
    return await run(ctx);
  } catch (error) {
    const hint = unreachableHint(
      error,
      (['connectorUrl', 'sqsEndpoint', 'dynamoEndpoint', 'affiliateBaseUrl'] as const).map((name) => {
        try {
          return ctx.get(name);
        } catch {
          return undefined;
        }
      }),
    );
    if (hint) throw new CliError(hint, 1);
    const missing = missingLedgerTable(error, ctx) ?? missingQueue(error, ctx);
    if (missing) throw new CliError(missing, 2);
    throw error;
  } finally {
    ctx.close();
  }
}

/**
 * SQS's answer for a queue that does not exist ("The specified queue does not exist.") names neither
 * the queue nor the setting: the CLI names both, as for the ledger table. A setting to fix.
 */
function missingQueue(error: unknown, ctx: CliContext): string | undefined {
  if (!(error instanceof Error)) return undefined;
  if (error.name !== 'QueueDoesNotExist' && error.name !== 'AWS.SimpleQueueService.NonExistentQueue')
    return undefined;
  const url = failedQueueUrls.get(error);
  if (url === undefined) return undefined;
  const name = (['dlqUrl', 'queueUrl'] as const).find((n) => {
    try {
      return ctx.get(n) === url;
    } catch {
      return false;
    }
  });
  const fix = 'check the URL, and the region or endpoint';
  if (name === undefined) return `queue ${cell(url, 200)} does not exist: ${fix}`;
  const spec = SETTINGS[name];
  const origin = ctx.origin(name);
  const from = origin === undefined ? '' : ` (from ${describeOrigin(name, origin)})`;
  return (
    `${spec.what} ${cell(url, 200)} names no queue${from}: ${fix}; set it with ${spec.flag} or ${spec.env}` +
    ` (locally, npm start writes it to ${LOCAL_STATE_FILE})`
  );
}

/**
 * DynamoDB's answer for a table that does not exist names neither the table nor the setting
 * ("Requested resource not found"): the CLI names both, since the ledger table is the only one it
 * reads. A setting to fix, as a usage error is.
 */
function missingLedgerTable(error: unknown, ctx: CliContext): string | undefined {
  if (!(error instanceof Error) || error.name !== 'ResourceNotFoundException') return undefined;
  if (!/requested resource not found/i.test(error.message)) return undefined;
  let table: string | undefined;
  try {
    table = ctx.get('ledgerTable');
  } catch {
    return undefined;
  }
  if (table === undefined) return undefined;
  const setting = SETTINGS.ledgerTable;
  return (
    `ledger table "${cell(table, 80)}" not found (set by ${setting.flag}, ${setting.env} or the state file): check its name, ` +
    'and the region or endpoint'
  );
}

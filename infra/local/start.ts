import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { LOCAL_PORT, LOCAL_STATE_FILE, SANDBOX_PORT } from '../../local/defaults.ts';
import { sandboxOptionsFromEnv } from '../../sandbox/env.ts';
import type { SandboxOptions } from '../../sandbox/types.ts';
import { HexId } from '../../shared/domain/ids.ts';
import { SOURCE_PLATFORMS } from '../../shared/domain/platforms.ts';
import { claimDataDir, writeStateFile } from './claims.ts';
import { localState, startLocalStack } from './stack.ts';

/**
 * `npm start`: the whole connector on this machine (ingest API, worker, fauxqs, dynalite, sandbox).
 * Settings come from the environment or `.env`; see the README's "Local stack" section.
 */
const { values } = parseArgs({
  options: { help: { type: 'boolean', short: 'h' }, quiet: { type: 'boolean', short: 'q' } },
});
if (values.help) {
  console.log(`Usage: npm start [-- --quiet]

Runs the connector locally: HTTP on PORT (default ${LOCAL_PORT}) with POST /webhooks/{source}, POST /refunds and
GET /health; the platform sandbox on SANDBOX_PORT (default ${SANDBOX_PORT}, token SANDBOX_TOKEN); SQS (fauxqs) and
DynamoDB (dynalite) in process. Set AFFILIATE_BASE_URL and AFFILIATE_TOKEN to use another platform URL
instead of the sandbox. Secrets: SHOPIFY_WEBHOOK_SECRET, WOOCOMMERCE_WEBHOOK_SECRET, STRIPE_WEBHOOK_SECRET,
GENERIC_WEBHOOK_SECRET, FINANCE_API_KEY (documented local defaults). ACCEPT_AFTER_DAYS gives the sources a
return window (acceptAfterDays); the accept job then runs every ACCEPT_EVERY_MINUTES (default 60, 0 = off).
SHADOW_SOURCES=shopify,stripe runs those sources in shadow mode (no change on the platform; see
\`connector shadow-report\`). The sandbox's own settings (SANDBOX_FAULTS, SANDBOX_DUPLICATES, …: docs/sandbox.md)
apply too. LOCAL_DATA_DIR keeps the ledger, the queues and the sandbox's conversions. A .env file is read if
present. Exit codes: 2 a wrong setting, 1 could not start (a port or LOCAL_DATA_DIR in use).`);
  process.exit(0);
}
if (existsSync('.env')) process.loadEnvFile('.env');
const env = process.env;

function whole(name: string, fallback: number | undefined, max: number): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > max) {
    console.error(`${name} must be a whole number from 0 to ${max}, got "${raw}"`);
    process.exit(2);
  }
  return value;
}

/** The local stack's default sources: one per platform, named after it. */
const SOURCE_IDS = SOURCE_PLATFORMS;

/** `SHADOW_SOURCES`: a comma-separated list of the local sources to run in shadow mode. */
function shadowSources(): (typeof SOURCE_IDS)[number][] {
  const ids = (env['SHADOW_SOURCES'] ?? '')
    .split(',')
    .map((id) => id.trim())
    .filter(Boolean);
  const known = (id: string): id is (typeof SOURCE_IDS)[number] =>
    (SOURCE_IDS as readonly string[]).includes(id);
  const unknown = ids.filter((id) => !known(id));
  if (unknown.length > 0) {
    console.error(
      `SHADOW_SOURCES: unknown source ${unknown.join(', ')} (the local sources are ${SOURCE_IDS.join(', ')})`,
    );
    process.exit(2);
  }
  return ids.filter(known);
}

/** `PROGRAM_ID`, `RULE_ID`: the platform's ids, as the sources take them (checked before anything starts). */
function platformId(name: 'PROGRAM_ID' | 'RULE_ID'): void {
  const raw = env[name];
  if (raw === undefined || raw === '' || HexId.safeParse(raw).success) return;
  console.error(
    `${name} must be 24 hexadecimal characters (the platform's ${name === 'PROGRAM_ID' ? 'program' : 'program rule'} id), got "${raw.slice(0, 64)}"`,
  );
  process.exit(2);
}

function port(name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 65_535) {
    console.error(`${name} must be a port number (0-65535), got "${raw}"`);
    process.exit(2);
  }
  return value;
}

/** A wrong or half-given setting: named on one line, exit 2. */
function badSetting(message: string): never {
  console.error(message);
  process.exit(2);
}

const affiliateUrl = env['AFFILIATE_BASE_URL'] || undefined;
const affiliateToken = env['AFFILIATE_TOKEN'] || undefined;
if ((affiliateUrl === undefined) !== (affiliateToken === undefined)) {
  badSetting(
    `${affiliateUrl ? 'AFFILIATE_BASE_URL is set without AFFILIATE_TOKEN' : 'AFFILIATE_TOKEN is set without AFFILIATE_BASE_URL'}: set both to use another platform, or neither for the sandbox`,
  );
}
const external =
  affiliateUrl && affiliateToken ? { external: { url: affiliateUrl, token: affiliateToken } } : undefined;
if (external && (!env['PROGRAM_ID'] || !env['RULE_ID'])) {
  badSetting(
    'PROGRAM_ID and RULE_ID are required with AFFILIATE_BASE_URL: the program and program rule ids of that platform',
  );
}

platformId('PROGRAM_ID');
platformId('RULE_ID');

/** The sandbox's own settings (docs/sandbox.md), as `npm run sandbox` reads them. */
function sandboxSettings(): SandboxOptions {
  const sandboxPort = port('SANDBOX_PORT', SANDBOX_PORT);
  try {
    return { ...sandboxOptionsFromEnv(env), port: sandboxPort };
  } catch (error) {
    return badSetting((error as Error).message);
  }
}

const sandboxOptions = external ? undefined : sandboxSettings();
const ingestPort = port('PORT', LOCAL_PORT);
const acceptAfterDays = whole('ACCEPT_AFTER_DAYS', undefined, 365) || undefined;
const acceptEveryMs = (whole('ACCEPT_EVERY_MINUTES', 60, 24 * 60) ?? 60) * 60_000;
const shadow = shadowSources();

// The ledger, the queues and the sandbox's conversions are kept together, or a restart would find
// ledger records for conversions the platform forgot, or queued events for orders the ledger lacks.
const dataDir = env['LOCAL_DATA_DIR'] || undefined;
if (dataDir) {
  try {
    mkdirSync(dataDir, { recursive: true });
  } catch (error) {
    badSetting(
      `LOCAL_DATA_DIR must be a directory this user can write, got "${dataDir}" (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    );
  }
}
const persistPath = env['SANDBOX_PERSIST'] || (dataDir ? join(dataDir, 'sandbox.json') : undefined);

// One process per LOCAL_DATA_DIR: a second dynalite on it dies with a stack trace, after its fauxqs
// has opened the same SQLite file as the running one.
let releaseDataDir = () => {};
if (dataDir) {
  try {
    releaseDataDir = claimDataDir(dataDir);
  } catch (error) {
    console.error((error as Error).message);
    process.exit(1);
  }
}

try {
  const stack = await startLocalStack({
    port: ingestPort,
    env,
    sandbox: external ?? { ...sandboxOptions, ...(persistPath ? { persistPath } : {}) },
    emulators: dataDir ? { dynamoPath: join(dataDir, 'ledger'), sqsDataDir: join(dataDir, 'queues') } : {},
    recoverAfterCrash: dataDir !== undefined,
    acceptAfterDays,
    acceptEveryMs,
    shadowSources: shadow,
    log: values.quiet ? undefined : (line) => console.log(`${new Date().toISOString()} ${line}`),
  });
  const lines = [
    'Conversion connector running locally',
    `  ingest API      ${stack.url}   (GET /health)`,
    ...[...stack.sources.values()].map(
      (s) =>
        `  webhook         ${stack.url}/webhooks/${s.id}   (${s.platform}${s.mode === 'shadow' ? ', SHADOW MODE' : ''}, secret ${s.secretRef}=${stack.secrets[s.secretRef] ?? ''})`,
    ),
    `  finance refunds ${stack.url}/refunds   (x-api-key: ${stack.secrets['FINANCE_API_KEY']})`,
    `  platform        ${stack.platformUrl}${stack.sandbox ? `   (sandbox, token ${stack.sandbox.token}; conversions: GET ${stack.platformUrl}/_sandbox/conversions)` : ''}`,
    ...(stack.sandbox
      ? [
          `  shop API fakes  ${Object.values(stack.sandbox.shops.urls).join('  ')}   (backfill, doctor, subscribe: docs/backfill.md)`,
        ]
      : []),
    `  program / rule  ${[...stack.sources.values()][0]?.program} / ${[...stack.sources.values()][0]?.rule}`,
    `  SQS (fauxqs)    ${stack.emulators.sqsEndpoint}   queue ${stack.emulators.queueUrl}`,
    `                  DLQ ${stack.emulators.dlqUrl}`,
    `  DynamoDB        ${stack.emulators.dynamoEndpoint}   table ${stack.emulators.tableName}`,
    dataDir
      ? `  data            ${dataDir}   (ledger, queues and sandbox survive a crash or Ctrl-C)`
      : '  data            in memory: stopping or a crash loses queued work and the ledger (set LOCAL_DATA_DIR to keep them)',
    '',
    'Send a signed sample:  npx connector send shopify --click-id <24 hex> --ip 203.0.113.7',
    'Ctrl-C stops everything.',
  ];
  // The operator CLI (`npx connector …`) finds the local stack through this file: written before the
  // banner says the stack runs, so whoever waits for the banner finds it.
  const stateFile = writeStateFile(
    LOCAL_STATE_FILE,
    localState(stack, stack.sandbox?.token ?? env['AFFILIATE_TOKEN']),
  );
  let stopping = false;
  const stop = async () => {
    if (stopping) {
      // A batch in hand may wait out a platform's retry-after (up to the worker's 27 s): a second
      // Ctrl-C does not wait. With LOCAL_DATA_DIR, a restart finishes what this cuts short.
      console.log(
        dataDir
          ? 'stopped at once: the batches in hand are finished after a restart'
          : 'stopped at once: the batches in hand are lost (in memory)',
      );
      releaseDataDir();
      process.exit(130);
    }
    stopping = true;
    console.log('stopping… (finishing the batches in hand; Ctrl-C again to stop at once)');
    stateFile.release();
    try {
      await stack.close();
    } catch (error) {
      console.error(`stopping: ${(error as Error).message}`);
      process.exitCode = 1;
    }
    releaseDataDir();
    process.exit();
  };
  // SIGHUP: the terminal was closed. Listened for before the banner: a signal sent as soon as it shows
  // would otherwise find Node's default, which ends the process without stopping anything.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, stop);
  console.log(lines.join('\n'));
  if (stateFile.runningBefore !== undefined)
    console.log(
      `(another npm start, pid ${stateFile.runningBefore}, runs from this directory: npx connector follows this one until it stops)`,
    );
} catch (error) {
  releaseDataDir();
  const e = error as NodeJS.ErrnoException;
  if (e.code === 'EADDRINUSE') console.error(`port already in use: ${e.message}. Set PORT or SANDBOX_PORT.`);
  else if (e.name === 'ConfigurationError') badSetting(e.message);
  else console.error(`could not start the local stack: ${e.message}`);
  process.exit(1);
}

import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { DescribeSecretCommand, GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { Command } from 'commander';
import type { AffiliateClient } from '../shared/affiliate/client.ts';
import type { AdvertiserInfo } from '../shared/affiliate/schemas.ts';
import type { SourceConfig } from '../shared/config/sources.ts';
import { ConfigurationError } from '../shared/errors.ts';
import { MIN_FINANCE_KEY_LENGTH, weakFinanceKey } from '../shared/finance.ts';
import { previousVariable } from '../shared/secrets.ts';
import type { CheckResult } from './check-result.ts';
import {
  awsCall,
  type CliContext,
  missingMessage,
  SECRET_REFS,
  settingOptions,
  withContext,
} from './context.ts';
import { CliError, type CliIo, explain, unreachableHint, visibleText, writeLine } from './io.ts';
import { shopWebhookChecks } from './shop-side.ts';

export type { CheckResult };

const pass = (name: string, detail: string): CheckResult => ({ name, status: 'pass', detail });
const fail = (name: string, detail: string, hint: string): CheckResult => ({
  name,
  status: 'fail',
  detail,
  hint,
});
const skip = (name: string, detail: string): CheckResult => ({ name, status: 'skip', detail });

/**
 * The fix for a failed call: when nothing answered at the address (a local stack that was stopped,
 * or killed and its state file left behind), to start the stack, as every other command says;
 * otherwise `hint`.
 */
function fixFor(error: unknown, urls: readonly (string | undefined)[], hint: string): string {
  return unreachableHint(error, urls) ?? hint;
}

/** A check whose setting is missing fails with the flag and variable to set. */
function needs(
  ctx: CliContext,
  name: string,
  setting: Parameters<CliContext['get']>[0],
): CheckResult | undefined {
  return ctx.get(setting) === undefined ? fail(name, 'not configured', missingMessage(setting)) : undefined;
}

async function tokenCheck(ctx: CliContext): Promise<{ result: CheckResult; info?: AdvertiserInfo }> {
  const name = 'affiliate token';
  const missing = needs(ctx, name, 'affiliateBaseUrl');
  if (missing) return { result: missing };
  if (!ctx.hasSecretSetting('affiliateToken')) {
    return {
      result: fail(
        name,
        'not configured',
        `${missingMessage('affiliateToken')}, or ${SECRET_REFS.affiliateToken} to its Secrets Manager secret`,
      ),
    };
  }
  const url = ctx.get('affiliateBaseUrl');
  let client: AffiliateClient;
  try {
    client = await ctx.affiliate();
  } catch (error) {
    return {
      result: fail(
        name,
        (error as Error).message,
        `check ${SECRET_REFS.affiliateToken}, AWS_REGION and AWS credentials`,
      ),
    };
  }
  try {
    const info = await client.advertiserInfo({ deadline: Date.now() + 15_000 });
    return {
      result: pass(
        name,
        `accepted by ${url} (advertiser ${info.id}, ${info.programs.length} program${info.programs.length === 1 ? '' : 's'})`,
      ),
      info,
    };
  } catch (error) {
    if (error instanceof ConfigurationError) {
      return {
        result: fail(
          name,
          `refused by ${url}: ${error.message}`,
          "set AFFILIATE_TOKEN to a token of the platform's API Tokens menu",
        ),
      };
    }
    return {
      result: fail(
        name,
        `${url}: ${explain(error)}`,
        fixFor(error, [url], 'check AFFILIATE_BASE_URL (and that the platform is up)'),
      ),
    };
  }
}

/**
 * How the source's order ids reach the platform: its `externalIdPrefix`, or a warning when another
 * source of the same program has none either (the same order id from both would be parked).
 */
function idPrefixNote(source: SourceConfig, sources: readonly SourceConfig[]): string {
  if (source.externalIdPrefix) return `, order ids prefixed "${source.externalIdPrefix}"`;
  const sharing = sources.filter(
    (s) => s.id !== source.id && s.program === source.program && !s.externalIdPrefix,
  );
  if (sharing.length === 0) return '';
  return `; shares program ${source.program} with ${sharing.map((s) => s.id).join(', ')}, neither with an externalIdPrefix: an order id both use is parked`;
}

function sourceChecks(ctx: CliContext, info: AdvertiserInfo | undefined): CheckResult[] {
  const sources = ctx.sources();
  if (sources.length === 0)
    return [
      skip('sources', 'no sources configured: set SOURCES (JSON) to check programs, rules and secrets'),
    ];
  return sources.map((source) => {
    const name = `source ${source.id}`;
    if (!info) return skip(name, 'program and rule not checked: the token check failed');
    const program = info.programs.find((p) => p.id.toLowerCase() === source.program.toLowerCase());
    const hint = `fix "program"/"rule" of source ${source.id} in SOURCES (ids from the platform's advertiser information)`;
    if (!program)
      return fail(name, `program ${source.program} is not a program of advertiser ${info.id}`, hint);
    if (!program.rules.some((r) => r.id.toLowerCase() === source.rule.toLowerCase())) {
      return fail(name, `rule ${source.rule} is not a rule of program ${source.program}`, hint);
    }
    return pass(
      name,
      `program ${source.program}, rule ${source.rule} (${source.platform})${idPrefixNote(source, sources)}`,
    );
  });
}

async function queueCheck(
  ctx: CliContext,
  name: string,
  setting: 'queueUrl' | 'dlqUrl',
): Promise<CheckResult> {
  const missing = needs(ctx, name, setting);
  if (missing) return missing;
  const url = ctx.require(setting);
  try {
    const out = await ctx.sqs().send(
      new GetQueueAttributesCommand({
        QueueUrl: url,
        AttributeNames: ['FifoQueue', 'ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
      awsCall(),
    );
    const a = out.Attributes ?? {};
    const count =
      (Number(a.ApproximateNumberOfMessages) || 0) + (Number(a.ApproximateNumberOfMessagesNotVisible) || 0);
    const env = setting === 'queueUrl' ? 'QUEUE_URL' : 'DLQ_URL';
    if (a.FifoQueue !== 'true')
      return fail(name, `${url} is not a FIFO queue`, `set ${env} to the stack's .fifo queue`);
    const note = setting === 'dlqUrl' && count > 0 ? ' (see connector dlq list)' : '';
    return pass(name, `${url} reachable, ${count} message${count === 1 ? '' : 's'}${note}`);
  } catch (error) {
    const env = setting === 'queueUrl' ? 'QUEUE_URL' : 'DLQ_URL';
    return fail(
      name,
      `${url}: ${explain(error)}`,
      fixFor(error, [ctx.get('sqsEndpoint'), url], `check ${env}, AWS_REGION and AWS credentials`),
    );
  }
}

async function ledgerCheck(ctx: CliContext): Promise<CheckResult> {
  const name = 'ledger table';
  const missing = needs(ctx, name, 'ledgerTable');
  if (missing) return missing;
  const table = ctx.require('ledgerTable');
  try {
    const out = await ctx.dynamo().send(new DescribeTableCommand({ TableName: table }), awsCall());
    const status = out.Table?.TableStatus ?? 'unknown';
    if (status !== 'ACTIVE')
      return fail(name, `${table} is ${status}`, 'wait for the table to become ACTIVE');
    return pass(name, `${table} ${status}`);
  } catch (error) {
    return fail(
      name,
      `${table}: ${explain(error)}`,
      fixFor(error, [ctx.get('dynamoEndpoint')], 'check LEDGER_TABLE, AWS_REGION and AWS credentials'),
    );
  }
}

/**
 * Secrets by reference: locally the values must be present (env, or the local state file); in AWS
 * only their existence is checked (DescribeSecret), never their value.
 */
async function secretChecks(ctx: CliContext): Promise<CheckResult[]> {
  const refs = [...new Set(ctx.sources().map((s) => s.secretRef))];
  const local = ctx.isLocal || ctx.localState() !== null;
  if (local) {
    refs.push('FINANCE_API_KEY');
    return refs.map((ref) =>
      ctx.secret(ref) !== undefined
        ? pass(`secret ${ref}`, 'set')
        : fail(
            `secret ${ref}`,
            'not set',
            `set ${ref} in the environment (or .env) of npm start and of this command`,
          ),
    );
  }
  for (const name of ['FINANCE_API_KEY_SECRET', 'AFFILIATE_TOKEN_SECRET']) {
    const ref = ctx.io.env[name];
    if (ref) refs.push(ref);
  }
  if (refs.length === 0)
    return [skip('secrets', 'no secret references configured (SOURCES, FINANCE_API_KEY_SECRET)')];
  const results: CheckResult[] = [];
  for (const ref of refs) {
    try {
      const out = await ctx.secretsManager().send(new DescribeSecretCommand({ SecretId: ref }), awsCall());
      results.push(
        pass(
          `secret ${ref}`,
          `exists${out.LastChangedDate ? `, last changed ${out.LastChangedDate.toISOString()}` : ''}`,
        ),
      );
    } catch (error) {
      results.push(
        fail(
          `secret ${ref}`,
          explain(error),
          'create the secret or fix the reference; this identity needs secretsmanager:DescribeSecret',
        ),
      );
    }
  }
  return results;
}

/**
 * The finance key's strength, current and previous value alike (the connector refuses every key
 * while one is weak): from FINANCE_API_KEY (and FINANCE_API_KEY_PREVIOUS), else the AWSCURRENT and
 * AWSPREVIOUS versions of the secret FINANCE_API_KEY_SECRET names. Only lengths are printed.
 */
async function financeKeyCheck(ctx: CliContext): Promise<CheckResult> {
  const name = 'finance key';
  const hint = `replace it with at least ${MIN_FINANCE_KEY_LENGTH} random characters (openssl rand -base64 32)`;
  const keys: { label: string; value: string }[] = [];
  const direct = ctx.get('financeApiKey');
  const ref = ctx.io.env[SECRET_REFS.financeApiKey]?.trim();
  if (direct !== undefined) {
    keys.push({ label: 'FINANCE_API_KEY', value: direct });
    const previous = ctx.secret(previousVariable('FINANCE_API_KEY'));
    if (previous !== undefined) keys.push({ label: previousVariable('FINANCE_API_KEY'), value: previous });
  } else if (ref) {
    for (const stage of ['AWSCURRENT', 'AWSPREVIOUS']) {
      try {
        const out = await ctx
          .secretsManager()
          .send(new GetSecretValueCommand({ SecretId: ref, VersionStage: stage }), awsCall());
        if (out.SecretString) keys.push({ label: `${ref} ${stage}`, value: out.SecretString });
      } catch (error) {
        // A secret never rotated has no AWSPREVIOUS version.
        if (stage === 'AWSPREVIOUS' && (error as Error).name === 'ResourceNotFoundException') continue;
        return fail(
          name,
          `${ref}: ${explain(error)}`,
          'this identity needs secretsmanager:GetSecretValue on it',
        );
      }
    }
  } else {
    return skip(name, 'not configured (FINANCE_API_KEY or FINANCE_API_KEY_SECRET)');
  }
  for (const { label, value } of keys) {
    const weak = weakFinanceKey(value);
    if (weak) return fail(name, `${label} has ${weak.replace(/^the finance API key has /, '')}`, hint);
  }
  return pass(name, `${keys.map((k) => `${k.label}: ${k.value.length} characters`).join(', ')}`);
}

async function connectorCheck(ctx: CliContext): Promise<CheckResult> {
  const name = 'connector URL';
  const url = ctx.get('connectorUrl');
  if (!url) return skip(name, 'not configured (CONNECTOR_URL): send and refund need it');
  const target = `${url.replace(/\/+$/, '')}/health`;
  try {
    // biome-ignore lint/style/noRestrictedGlobals: bounded by its AbortSignal.timeout
    const response = await fetch(target, { signal: AbortSignal.timeout(5000) });
    await response.body?.cancel();
    return pass(name, `${url} answers (GET /health: HTTP ${response.status})`);
  } catch (error) {
    return fail(name, `${url}: ${explain(error)}`, 'check CONNECTOR_URL; locally, is npm start running?');
  }
}

/** Runs every check; none throws. */
export async function runChecks(ctx: CliContext): Promise<CheckResult[]> {
  const token = await tokenCheck(ctx);
  return [
    token.result,
    ...sourceChecks(ctx, token.info),
    await queueCheck(ctx, 'queue', 'queueUrl'),
    await queueCheck(ctx, 'dead-letter queue', 'dlqUrl'),
    await ledgerCheck(ctx),
    ...(await secretChecks(ctx)),
    await financeKeyCheck(ctx),
    await connectorCheck(ctx),
    ...(await shopWebhookChecks(ctx)),
  ];
}

const MARK = { pass: '✓', fail: '✗', skip: '-' } as const;

/** `connector doctor`: is everything the connector needs reachable and consistent? */
export function registerDoctor(program: Command, io: CliIo): void {
  const command = program
    .command('doctor')
    .summary('check the token, sources, queues, ledger table, secrets and shop webhooks')
    .description(
      "One line per check, ✓ or ✗ with a hint: the platform token (advertiser information), each source's " +
        'program and rule, the queue and the DLQ, the ledger table, the secrets, the connector URL, and for ' +
        "each source with shopApi the shop's webhook subscriptions (every topic, to this connector, active). " +
        'Exit code 0 when every check passes, 1 otherwise.',
    );
  settingOptions(command, [
    'connectorUrl',
    'queueUrl',
    'dlqUrl',
    'sqsEndpoint',
    'ledgerTable',
    'dynamoEndpoint',
    'affiliateBaseUrl',
    'region',
  ]);
  command
    .addHelpText(
      'after',
      `
Examples:
  $ npx connector doctor                 # against the local stack (.local-stack.json)
  $ AWS_PROFILE=prod QUEUE_URL=… DLQ_URL=… LEDGER_TABLE=… AFFILIATE_BASE_URL=… \\
    AFFILIATE_TOKEN_SECRET=connector/affiliate-token FINANCE_API_KEY_SECRET=connector/finance-api-keys \\
    SOURCES="$(jq -c .sources connector.config.json)" npx connector doctor`,
    )
    .action(async (options: object) => {
      await withContext(io, options, async (ctx) => {
        const file = ctx.localState() !== null ? ctx.stateFile() : undefined;
        const where = file ? ` (local settings from ${file})` : '';
        writeLine(io.stdout, `connector doctor${where}`);
        const results = await runChecks(ctx);
        const width = Math.max(...results.map((r) => r.name.length));
        for (const r of results) {
          // A detail quotes what servers said (the platform's refusal): escaped, not obeyed.
          writeLine(io.stdout, `${MARK[r.status]} ${r.name.padEnd(width)}  ${visibleText(r.detail)}`);
          if (r.status === 'fail' && r.hint) writeLine(io.stdout, `  ${' '.repeat(width)}  fix: ${r.hint}`);
        }
        const failed = results.filter((r) => r.status === 'fail').length;
        const passed = results.filter((r) => r.status === 'pass').length;
        const skipped = results.length - failed - passed;
        writeLine(
          io.stdout,
          `${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`,
        );
        if (failed > 0) throw new CliError('', 1);
      });
    });
}

import { Command, CommanderError } from 'commander';
import { ConfigurationError } from '../shared/errors.ts';
import { registerAccept } from './accept.ts';
import { registerBackfill } from './backfill.ts';
import { registerDlq } from './dlq.ts';
import { registerDoctor } from './doctor.ts';
import { CliError, type CliIo, explain, processIo, visibleText, writeLine } from './io.ts';
import { registerLateRefunds } from './late-refunds.ts';
import { registerReconcile } from './reconcile.ts';
import { registerRefund } from './refund.ts';
import { registerReservations } from './reservations.ts';
import { registerSend } from './send.ts';
import { registerShadowReport } from './shadow-report.ts';
import { registerStatus } from './status.ts';
import { registerSubscribe } from './subscribe.ts';

const OVERVIEW = `
Settings come from flags, else environment variables, else the .local-stack.json that \`npm start\`
writes (so against the local stack no setting is needed). Against AWS the SDK's default credentials
and region are used: CONNECTOR_URL, QUEUE_URL, DLQ_URL, LEDGER_TABLE, AFFILIATE_BASE_URL,
SOURCES (JSON), AWS_REGION; the secrets by their Secrets Manager names, AFFILIATE_TOKEN_SECRET and
FINANCE_API_KEY_SECRET (read when needed), or as values, AFFILIATE_TOKEN and FINANCE_API_KEY.

Examples:
  $ npx connector send shopify --click-id 0123456789abcdef01234567 --ip 203.0.113.7
  $ npx connector refund --csv refunds.csv --dry-run
  $ npx connector dlq list
  $ npx connector status 1001
  $ npx connector reservations 1001
  $ npx connector reconcile --from 2026-05-01 --to 2026-05-31
  $ npx connector shadow-report --from 30d
  $ npx connector late-refunds --csv > late-refunds.csv
  $ npx connector doctor
  $ npx connector subscribe --source woocommerce --dry-run
  $ npx connector backfill --source shopify --from 48h --dry-run
  $ npx connector accept --older-than 30d --dry-run

Exit codes: 0 success, 1 the work failed (or differences found), 2 usage or missing setting.`;

/**
 * The `connector` program, writing to `io` only: commands run in process in tests. Errors surface
 * from `parseAsync` (commander's own usage errors as `CommanderError`); use `run` for exit codes.
 */
export function buildProgram(io: CliIo): Command {
  const program = new Command('connector')
    .description(
      'Operate the conversion connector: sample webhooks, finance refunds, the dead-letter queue, checks.',
    )
    .configureOutput({
      writeOut: (text) => io.stdout.write(text),
      writeErr: (text) => io.stderr.write(text),
    })
    .exitOverride()
    .showHelpAfterError('(add --help for usage)')
    .helpCommand(true)
    .addHelpText('after', OVERVIEW);
  // Subcommands created after these settings inherit them (output, exitOverride).
  registerSend(program, io);
  registerRefund(program, io);
  registerDlq(program, io);
  registerStatus(program, io);
  registerReservations(program, io);
  registerReconcile(program, io);
  registerShadowReport(program, io);
  registerLateRefunds(program, io);
  registerDoctor(program, io);
  registerSubscribe(program, io);
  registerBackfill(program, io);
  registerAccept(program, io);
  return program;
}

/**
 * Runs the CLI with `argv` (the arguments after the program name) and resolves its exit code:
 * 0 success, 1 the work failed, 2 usage error or missing setting. Never throws and never prints a
 * stack trace.
 */
export async function run(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  const program = buildProgram(io);
  try {
    await program.parseAsync(withoutHelpOfUnknownCommand(program, argv), { from: 'user' });
    return 0;
  } catch (error) {
    return failureExit(error, io);
  }
}

const HELP_FLAGS = new Set(['--help', '-h']);

/**
 * `argv` without its help flags when it names a command that does not exist (`connector stuck
 * --help`, `connector dlq lists -h`): commander prints the parent's help for those and exits 0, as
 * if the command were known. Without the flag commander reports the unknown command (exit 2).
 */
function withoutHelpOfUnknownCommand(program: Command, argv: readonly string[]): string[] {
  let command = program;
  for (const arg of argv) {
    if (arg.startsWith('-')) continue;
    if (command.commands.length === 0 || arg === 'help') break;
    const next = command.commands.find((c) => c.name() === arg || c.aliases().includes(arg));
    if (!next) return argv.filter((a) => !HELP_FLAGS.has(a));
    command = next;
  }
  return [...argv];
}

/**
 * The exit code of a command that threw `error`, its one line written to stderr (commander has
 * printed its own usage errors): 2 for usage and missing or wrong settings (a `CliError`'s own code,
 * a `ConfigurationError` any command lets through, AWS not set up), else 1.
 */
export function failureExit(error: unknown, io: CliIo): number {
  if (error instanceof CommanderError) {
    // Help and version exit 0 (`connector help <command>` too); commander has already printed any
    // usage error, and the help it shows for a command given without its subcommand.
    if (error.code === 'commander.helpDisplayed' || error.code === 'commander.version') return 0;
    return error.code === 'commander.help' && error.exitCode === 0 ? 0 : 2;
  }
  // The line quotes what servers and shops wrote (a platform's message, an order id): escaped, so
  // a terminal shows an escape sequence or a bidi override instead of obeying it.
  if (error instanceof CliError) {
    if (error.message) writeLine(io.stderr, `error: ${visibleText(error.message)}`);
    return error.exitCode;
  }
  const setup = error instanceof ConfigurationError ? error.message : awsSetupProblem(error);
  if (setup) {
    writeLine(io.stderr, `error: ${visibleText(setup)}`);
    return 2;
  }
  writeLine(io.stderr, `error: ${visibleText(explain(error))}`);
  return 1;
}

/** The AWS SDK's "you have not set up AWS" failures, told as missing settings. */
function awsSetupProblem(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  if (/region is missing/i.test(error.message))
    return 'missing the AWS region: pass --region or set AWS_REGION';
  if (error.name === 'CredentialsProviderError') {
    return 'no AWS credentials found: set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or run against the local stack (npm start)';
  }
  return undefined;
}

// `npm run sandbox`: the sandbox on SANDBOX_PORT (default 4010) until SIGINT or SIGTERM.
import { sandboxOptionsFromEnv } from './env.ts';
import { startSandbox } from './server.ts';

async function main(): Promise<void> {
  let sandbox: Awaited<ReturnType<typeof startSandbox>>;
  try {
    sandbox = await startSandbox(sandboxOptionsFromEnv(process.env));
  } catch (error) {
    console.error(`sandbox: cannot start: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
    return;
  }
  const { seed } = sandbox;
  console.log(
    [
      `sandbox: listening on ${sandbox.url}`,
      `  token (Authorization: Bearer …): ${sandbox.token}`,
      `  legacy /2.0/ (Authorization: Basic …): ${sandbox.legacy.userCode}:${sandbox.legacy.apiKey}`,
      `  advertiser:   ${seed.advertiser}`,
      ...seed.programs.map(
        (id, i) =>
          `  program ${i + 1}:    ${id} (${i % 2 === 0 ? 'EUR' : 'USD'}), rules ${seed.rules[2 * i]} ${seed.rules[2 * i + 1]}`,
      ),
      ...seed.partnerships.map(
        (id, i) => `  partnership ${i + 1}: ${id} (tracking id ${seed.trackingIds[i]})`,
      ),
      `  groups:       ${seed.groups.join(' ')}`,
      `  users:        ${seed.users.join(' ')}`,
      `  control:      ${sandbox.url}/_sandbox/ (reset, faults, options, calls, conversions)`,
      `  shop fakes:   ${Object.values(sandbox.shops.urls).join(' ')} (docs/backfill.md; control ${sandbox.url}/_sandbox/shops/)`,
    ].join('\n'),
  );

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`sandbox: ${signal}, stopping`);
    void sandbox.close().then(() => console.log('sandbox: stopped'));
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

await main();

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import { type BuildOptions, build, type Metafile } from 'esbuild';
import {
  CATCH_UP_FUNCTION,
  CONNECTOR_BUNDLING,
  CONNECTOR_FUNCTIONS,
  type ConnectorFunctionName,
  type ConnectorFunctionSpec,
  codeFileName,
  PROJECT_ROOT,
} from './connector-stack.ts';
import { ownCodeSourceMap, ownCodeSourceMapCommand } from './own-code-source-map.ts';

/** Where a bundle's code goes (defined beside the stack's bundling, whose hook names its map). */
export { codeFileName };

/** Every function the stack may deploy: the four it always has and the optional catch-up. */
export type BundledFunctionName = ConnectorFunctionName | 'catchUp';
export const BUNDLED_FUNCTIONS: Readonly<Record<BundledFunctionName, ConnectorFunctionSpec>> = {
  ...CONNECTOR_FUNCTIONS,
  catchUp: CATCH_UP_FUNCTION,
};

/**
 * Budget for each function's bundled code (index.js), in bytes.
 *
 * Lambda loads, parses and compiles the whole bundle during the cold start, before the handler runs,
 * so init time grows with bundle size; the webhook answers shops that give up after 5 s, and every
 * cold start is billed. At the time of writing the bundles are 292 to 377 KiB (they were 495 to
 * 550 KiB): the AWS SDK v3 clients and their shared runtime about 195 KiB (bundled on purpose, see
 * CONNECTOR_BUNDLING, which also swaps the SDK's credential chain for the environment provider,
 * -130 KiB, and its event streams, which no operation here uses, for a stand-in, -19 KiB), zod/mini
 * 36 to 41 KiB, Powertools under 40 KiB, and 22 to 84 KiB of our own code (2 KiB of it the stack
 * formatter every bundle carries, functions/bundle-prelude.ts).
 *
 * zod: every file imports it as a namespace (`import * as z from 'zod/mini'`); a single `import { z }
 * from 'zod'`, or a `z.locales` reached through the namespace, makes esbuild keep every locale and
 * adds 200 to 350 KiB. Every schema a function loads is `zod/mini` (the test in
 * test/infra/bundle-size.test.ts fails on any classic zod in a bundle): classic zod's schema classes
 * carry methods no bundler can drop, about 60 KiB more per bundle, and build every schema at import
 * with all of them attached. The webhook's platform payloads and the finance request were classic
 * until late on 2026-11-27 (webhook and refunds 372 KiB, the catch-up 367).
 *
 * The budgets leave about 9% over each bundle for ordinary growth (middy and Powertools middlewares
 * are a few KiB), but not for a new heavy dependency (another SDK client or a large library adds
 * 100 KiB and more), classic zod, the full credential chain, the SDK's event streams or a named zod
 * import: that should be a decision that raises a number here with its reason, not an accident. The
 * worker and the accept job keep issue 16's 400 KiB (6 to 8% over them).
 */
export const BUNDLE_BUDGETS: Readonly<Record<BundledFunctionName, number>> = {
  webhook: 325 * 1024,
  refunds: 325 * 1024,
  worker: 400 * 1024,
  // The worker's clients and backends (it reuses the worker's builder) plus the accept job.
  accept: 400 * 1024,
  // The shop API clients, the platform adapters' mapping and the SQS client; no ledger, no platform.
  catchUp: 325 * 1024,
};

/** Options of `BundlingOptions` this translation knows; any other option set in the stack fails it. */
const KNOWN_OPTIONS: ReadonlySet<string> = new Set([
  'forceDockerBundling',
  'format',
  'target',
  'mainFields',
  'bundleAwsSDK',
  'externalModules',
  'minify',
  'sourceMap',
  'sourcesContent',
  'banner',
  'footer',
  'define',
  'keepNames',
  'charset',
  'logLevel',
  'esbuildArgs',
  'commandHooks',
  'inject',
]);

/**
 * `esbuildArgs` this translation knows: `--alias:<package>` (CDK passes `--alias:<package>=<target>`)
 * and `--supported:<feature>` (`true` or `false`).
 */
function esbuildArgsOf(args: nodejs.BundlingOptions['esbuildArgs'] = {}): {
  alias: Record<string, string>;
  supported: Record<string, boolean>;
} {
  const alias: Record<string, string> = {};
  const supported: Record<string, boolean> = {};
  for (const [key, value] of Object.entries(args)) {
    const aliasOf = /^--alias:(.+)$/.exec(key)?.[1];
    const feature = /^--supported:(.+)$/.exec(key)?.[1];
    if (aliasOf !== undefined && typeof value === 'string') alias[aliasOf] = value;
    else if (feature !== undefined && (value === 'true' || value === 'false'))
      supported[feature] = value === 'true';
    else throw new Error(`bundle-report does not translate esbuild argument ${key}: teach it`);
  }
  return { alias, supported };
}

/**
 * The esbuild options that produce the same index.js as CDK's `NodejsFunction` bundling with
 * `bundling` (CDK runs the esbuild CLI with the equivalent flags; see aws-lambda-nodejs/lib/bundling).
 * Throws for a bundling option it does not translate, so the report cannot silently drift from the
 * stack.
 */
export function esbuildOptionsFor(
  name: BundledFunctionName,
  bundling: nodejs.BundlingOptions = CONNECTOR_BUNDLING,
  projectRoot: string = PROJECT_ROOT,
): BuildOptions {
  const unknown = Object.keys(bundling).filter((key) => !KNOWN_OPTIONS.has(key));
  if (unknown.length > 0) {
    throw new Error(`bundle-report does not translate bundling option(s) ${unknown.join(', ')}: teach it`);
  }
  if (bundling.sourceMap === false && bundling.sourcesContent === false) {
    throw new Error('sourcesContent without sourceMap has no meaning');
  }
  // CDK's defaults for a Node 18+ runtime: the AWS SDK v3 stays external unless bundleAwsSDK.
  const external = bundling.externalModules ?? (bundling.bundleAwsSDK ? [] : ['@aws-sdk/*']);
  const { alias, supported } = esbuildArgsOf(bundling.esbuildArgs);
  return {
    absWorkingDir: projectRoot,
    entryPoints: [join(projectRoot, BUNDLED_FUNCTIONS[name].entry)],
    bundle: true,
    platform: 'node',
    target: bundling.target ?? 'node24',
    ...(bundling.format === undefined ? {} : { format: bundling.format }),
    outfile: join(projectRoot, 'cdk.out', 'bundle-report', name, codeFileName(bundling)),
    minify: bundling.minify ?? false,
    sourcemap: bundling.sourceMap ?? false,
    sourcesContent: bundling.sourcesContent ?? true,
    external,
    ...(bundling.mainFields === undefined ? {} : { mainFields: bundling.mainFields }),
    ...(bundling.banner === undefined ? {} : { banner: { js: bundling.banner } }),
    ...(bundling.footer === undefined ? {} : { footer: { js: bundling.footer } }),
    ...(bundling.define === undefined ? {} : { define: bundling.define }),
    ...(bundling.keepNames === undefined ? {} : { keepNames: bundling.keepNames }),
    ...(bundling.charset === undefined ? {} : { charset: bundling.charset }),
    ...(Object.keys(alias).length === 0 ? {} : { alias }),
    ...(Object.keys(supported).length === 0 ? {} : { supported }),
    // CDK passes each as `--inject:<path>`, which esbuild resolves from its working directory.
    ...(bundling.inject === undefined ? {} : { inject: [...bundling.inject] }),
    metafile: true,
    write: false,
    logLevel: 'silent',
  };
}

/**
 * The source map as the stack deploys it, from the one esbuild wrote: `bundling`'s command hooks,
 * run in process. The only hook this translation knows is the one the stack has, cutting the map to
 * the project's own files (infra/own-code-source-map.ts); any other throws, as an unknown option does.
 */
export function deployedSourceMap(
  map: string,
  bundling: nodejs.BundlingOptions = CONNECTOR_BUNDLING,
): string {
  const hooks = bundling.commandHooks;
  if (hooks === undefined) return map;
  const [input, output] = ['/project', '/asset'];
  const known =
    hooks.beforeBundling(input, output).length === 0 &&
    hooks.beforeInstall(input, output).length === 0 &&
    JSON.stringify(hooks.afterBundling(input, output)) ===
      JSON.stringify([ownCodeSourceMapCommand(input, `${output}/${codeFileName(bundling)}.map`)]);
  if (!known) throw new Error('bundle-report does not translate these command hooks: teach it');
  return ownCodeSourceMap(map);
}

/**
 * Bundles `entry` into `outfile` as the stack bundles the function `name`, its map (if the settings
 * and `overrides` make one) rewritten as deployed (`deployedSourceMap`): the bench's stand-ins for a
 * function, and tests that run a bundle as Lambda would.
 */
export async function bundleEntryAs(
  name: BundledFunctionName,
  entry: string,
  outfile: string,
  overrides: BuildOptions = {},
): Promise<void> {
  await build({
    ...esbuildOptionsFor(name),
    entryPoints: [entry],
    outfile,
    write: true,
    metafile: false,
    ...overrides,
  });
  const map = `${outfile}.map`;
  if (existsSync(map)) writeFileSync(map, deployedSourceMap(readFileSync(map, 'utf8')));
}

export interface FunctionBundle {
  readonly name: BundledFunctionName;
  /** The bundled code, as Lambda loads it. */
  readonly code: Uint8Array;
  readonly codeBytes: number;
  /** The linked source map (index.js.map), when the bundling settings make one. */
  readonly sourceMap?: Uint8Array;
  /**
   * That map as esbuild wrote it, before the stack cuts it to the project's files: it names every
   * input, so a profile of the bundle can say which package each function came from.
   */
  readonly esbuildSourceMap?: string;
  readonly sourceMapBytes: number;
  /** Roughly what the code adds to the deployment zip. */
  readonly gzipBytes: number;
  readonly budgetBytes: number;
  /** Packages (or `(project)`) by bytes in the output, largest first. */
  readonly contributors: readonly { readonly name: string; readonly bytes: number }[];
  /** esbuild's account of the build: every input with its imports, and what each put in the output. */
  readonly metafile: Metafile;
}

/** Bundles one function in memory with the stack's settings. */
export async function bundleFunction(name: BundledFunctionName): Promise<FunctionBundle> {
  const result = await build(esbuildOptionsFor(name));
  const files = result.outputFiles ?? [];
  const code = files.find((f) => /\.m?js$/.test(f.path));
  const map = files.find((f) => f.path.endsWith('.map'));
  if (code === undefined) throw new Error(`esbuild produced no code for ${name}`);
  const metafile = result.metafile;
  if (metafile === undefined) throw new Error(`esbuild produced no metafile for ${name}`);
  const maps = map && { deployed: Buffer.from(deployedSourceMap(map.text)), esbuild: map.text };
  return {
    name,
    code: code.contents,
    codeBytes: code.contents.byteLength,
    ...(maps === undefined ? {} : { sourceMap: maps.deployed, esbuildSourceMap: maps.esbuild }),
    sourceMapBytes: maps?.deployed.byteLength ?? 0,
    gzipBytes: gzipSync(code.contents).byteLength,
    budgetBytes: BUNDLE_BUDGETS[name],
    contributors: contributors(metafile),
    metafile,
  };
}

/** Bundles every function, one after another (esbuild already uses all cores for one). */
export async function bundleAll(): Promise<FunctionBundle[]> {
  const bundles: FunctionBundle[] = [];
  for (const name of Object.keys(BUNDLED_FUNCTIONS) as BundledFunctionName[]) {
    bundles.push(await bundleFunction(name));
  }
  return bundles;
}

function contributors(metafile: Metafile): { name: string; bytes: number }[] {
  const totals = new Map<string, number>();
  for (const output of Object.values(metafile.outputs)) {
    for (const [path, input] of Object.entries(output.inputs)) {
      const name = packageOf(path);
      totals.set(name, (totals.get(name) ?? 0) + input.bytesInOutput);
    }
  }
  return [...totals.entries()].map(([name, bytes]) => ({ name, bytes })).sort((a, b) => b.bytes - a.bytes);
}

function packageOf(path: string): string {
  const match = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path.replaceAll('\\', '/'));
  return match?.[1] ?? '(project)';
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

/** The report as a text table, with each function's five largest contributors below it. */
export function formatReport(bundles: readonly FunctionBundle[]): string {
  const header = ['function', 'code', 'gzip', 'source map', 'budget', 'used', ''];
  const rows = bundles.map((b) => [
    b.name,
    kib(b.codeBytes),
    kib(b.gzipBytes),
    kib(b.sourceMapBytes),
    kib(b.budgetBytes),
    `${Math.round((100 * b.codeBytes) / b.budgetBytes)}%`,
    b.codeBytes > b.budgetBytes ? 'OVER BUDGET' : 'ok',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]?.length ?? 0)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === 0 ? c.padEnd(widths[i] ?? 0) : c.padStart(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  const lines = [line(header), ...rows.map(line), ''];
  for (const b of bundles) {
    const top = b.contributors
      .slice(0, 5)
      .map((c) => `${c.name} ${kib(c.bytes)}`)
      .join(', ');
    lines.push(`${b.name}: ${top}`);
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  const bundles = await bundleAll();
  console.log(formatReport(bundles));
  const over = bundles.filter((b) => b.codeBytes > b.budgetBytes);
  if (over.length > 0) {
    console.error(
      `\n${over.map((b) => b.name).join(', ')} over budget: find the new dependency above, or raise BUNDLE_BUDGETS in infra/bundle-report.ts with the reason.`,
    );
    process.exitCode = 1;
  }
}

if (import.meta.main) await main();

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BUNDLE_BUDGETS,
  BUNDLED_FUNCTIONS,
  type BundledFunctionName,
  bundleAll,
  codeFileName,
  esbuildOptionsFor,
  type FunctionBundle,
  formatReport,
} from '../../infra/bundle-report.ts';
import { CONNECTOR_BUNDLING } from '../../infra/connector-stack.ts';
import { LOAD_PRELUDE, lambdaLoad, lambdaProcessEnv } from '../bench/lambda-process.ts';
import { connectorApp, exampleConfig } from './support.ts';

const NAMES = Object.keys(BUNDLED_FUNCTIONS) as BundledFunctionName[];
/** The optional catch-up is built only when configured: these tests turn it on. */
const WITH_CATCH_UP = {
  'catchUp.enabled': 'true',
  'sources.0.shopApi':
    '{"url":"https://shop-main.myshopify.com","credentialsRef":"connector/shop-api/shopify-main"}',
};

/** What CDK built for each function: the asset directory named by the template's S3 key. */
interface Asset {
  readonly file: string;
  readonly code: Buffer;
  readonly map: string;
}

describe('function bundles', () => {
  const outdir = mkdtempSync(join(tmpdir(), 'connector-bundles-'));
  const assets = new Map<BundledFunctionName, Asset>();
  let report: FunctionBundle[];

  beforeAll(async () => {
    const { app, stack } = connectorApp(exampleConfig(WITH_CATCH_UP), { bundle: true, outdir });
    app.synth();
    const resources = Template.fromStack(stack).toJSON().Resources;
    for (const name of NAMES) {
      const fn = name === 'catchUp' ? stack.catchUp : stack.functions[name];
      if (fn === undefined) throw new Error(`the stack built no ${name} function`);
      const id = stack.getLogicalId(fn.node.defaultChild as CfnElement);
      const key = resources[id].Properties.Code.S3Key as string;
      const dir = join(outdir, `asset.${key.replace(/\.zip$/, '')}`);
      const file = codeFileName();
      assets.set(name, {
        file: join(dir, file),
        code: readFileSync(join(dir, file)),
        map: readFileSync(join(dir, `${file}.map`), 'utf8'),
      });
    }
    report = await bundleAll();
  });

  afterAll(() => {
    rmSync(outdir, { recursive: true, force: true });
  });

  /** The modules that put code in `name`'s bundle (esbuild's metafile), by path. */
  const bundledModules = (name: BundledFunctionName): string[] =>
    Object.values(report.find((b) => b.name === name)!.metafile.outputs).flatMap((o) =>
      Object.entries(o.inputs).flatMap(([path, input]) => (input.bytesInOutput > 0 ? [path] : [])),
    );

  it.each(NAMES)('%s stays within its bundle budget', (name) => {
    const bytes = assets.get(name)!.code.byteLength;

    expect(
      bytes,
      `${name} is ${bytes} bytes, budget ${BUNDLE_BUDGETS[name]}: see infra/bundle-report.ts`,
    ).toBeLessThanOrEqual(BUNDLE_BUDGETS[name]);
  });

  it.each(NAMES)(
    '%s leaves out the credential chain Lambda never runs (profiles, SSO, STS, instance metadata)',
    (name) => {
      const packages = report.find((b) => b.name === name)!.contributors.map((c) => c.name);

      expect(packages).not.toContain('@aws-sdk/credential-provider-node');
      expect(packages).not.toContain('@aws-sdk/nested-clients');
      expect(packages).not.toContain('@smithy/credential-provider-imds');
      expect(packages).toContain('@aws-sdk/credential-provider-env');
    },
  );

  it.each(NAMES)(
    "%s leaves out the SDK's event streams (no operation it calls has one): the stand-in instead",
    (name) => {
      const modules = bundledModules(name);

      expect(modules.filter((m) => m.includes('@smithy/core/dist-es/submodules/event-streams/'))).toEqual([]);
      expect(modules).toContain('shared/adapters/no-event-streams.ts');
      // The protocols that load it on demand are there: the alias, not the SDK, left them out.
      expect(modules).toContain('node_modules/@smithy/core/dist-es/submodules/protocols/HttpProtocol.js');
    },
  );

  it.each(NAMES)(
    '%s loads no web streams at its cold start (@middy/core 6 did, for streamed responses no function gives)',
    (name) => {
      const { inputs } = report.find((b) => b.name === name)!.metafile;
      const builtins = Object.values(inputs).flatMap((input) =>
        input.imports.flatMap((i) => (i.external ? [i.path] : [])),
      );

      // Built-ins are the bundle's only external imports: they are found, and web streams are not.
      expect(builtins).toContain('node:https');
      expect(builtins.filter((path) => /^(node:)?stream\/web$/.test(path))).toEqual([]);
    },
  );

  it.each(NAMES)(
    '%s takes every built-in from require, none through import() and the ES module loader',
    (name) => {
      const code = assets.get(name)!.code.toString('utf8');

      // The SDK's HTTP handler loads node:http with import(): from CommonJS that starts the ES module
      // loader and builds http's facade, whose lazy WebSocket export loads undici (60 to 80 ms of CPU).
      expect(code.match(/\bimport\(\s*["'`][^"'`]*["'`]\s*\)/g) ?? []).toEqual([]);
      expect(code).toContain('require("node:http")');
    },
  );

  it.each(NAMES)(
    '%s carries none of classic zod: every schema a function loads is zod/mini (infra/bundle-report.ts)',
    (name) => {
      const modules = bundledModules(name);

      expect(modules.filter((m) => m.includes('node_modules/zod/v4/mini/'))).not.toEqual([]);
      expect(modules.filter((m) => m.includes('node_modules/zod/v4/classic/'))).toEqual([]);
    },
  );

  it.each(['worker', 'accept'] as const)(
    '%s evaluates the legacy 2.0 client only when the deployment configures it: no static import reaches it',
    (name) => {
      const { inputs } = report.find((b) => b.name === name)!.metafile;
      // What a cold start evaluates: the entry and every module its static imports reach. esbuild
      // wraps a module reached only by import() in a function that the first import() runs.
      const evaluated = new Set([BUNDLED_FUNCTIONS[name].entry]);
      for (const file of evaluated) {
        for (const i of inputs[file]?.imports ?? []) {
          if (i.kind !== 'dynamic-import' && !i.external) evaluated.add(i.path);
        }
      }

      expect(Object.keys(inputs)).toEqual(
        expect.arrayContaining(['shared/legacy/client.ts', 'shared/legacy/schemas.ts']),
      );
      expect(evaluated).toContain('shared/domain/events.ts');
      expect([...evaluated].filter((f) => /^shared\/legacy\/(client|schemas)\.ts$/.test(f))).toEqual([]);
    },
  );

  it.each(NAMES)('%s: the bundle report builds byte for byte what CDK deploys', (name) => {
    const reported = report.find((b) => b.name === name)!;

    expect(Buffer.from(reported.code).equals(assets.get(name)!.code)).toBe(true);
  });

  it.each(NAMES)(
    "%s: Lambda's Node.js runtime loads the asset, finds its handler and maps its stack traces",
    (name) => {
      // Act: the asset as the runtime loads it (`require` for CommonJS), in Node started as the functions are
      const { file } = assets.get(name)!;
      const run = spawnSync(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `${LOAD_PRELUDE} const before = Error.prepareStackTrace; const { handler } = ${lambdaLoad(file)}; process.stdout.write(typeof handler + ' ' + (Error.prepareStackTrace !== before));`,
        ],
        {
          encoding: 'utf8',
          env: lambdaProcessEnv({ PATH: process.env['PATH'] ?? '', AWS_REGION: 'us-east-1' }),
        },
      );

      // Assess: and the bundle's prelude installed its stack formatter (functions/bundle-prelude.ts)
      expect(run.stderr).toBe('');
      expect(run.stdout).toBe('function true');
    },
  );

  it.each(NAMES)(
    '%s is a minified CommonJS bundle (no ES module loader at init), the AWS SDK inside, a lean source map',
    (name) => {
      const { code, map } = assets.get(name)!;
      const text = code.toString('utf8');

      // Lambda's runtime requires it; Node's built-ins come through `require`, without their ES
      // module facades, which read every export of a built-in and so load its lazy parts.
      expect(codeFileName()).toBe('index.js');
      expect(text).not.toMatch(/(?:^|[;}\n])import\s*[\w{*]/);
      expect(text).toMatch(/\bmodule\.exports\s*=/);
      expect(text).toMatch(/require\("node:crypto"\)/);
      expect(text).not.toMatch(/require\(["']@aws-sdk\//);
      expect(text).toContain('//# sourceMappingURL=index.js.map');
      // Minified code is a few very long lines (unminified code averages under 40 characters a line).
      expect(code.byteLength / text.split('\n').length).toBeGreaterThan(1000);
      expect(JSON.parse(map)).not.toHaveProperty('sourcesContent');
    },
  );

  it.each(NAMES)(
    "%s: its map names only the project's files (infra/own-code-source-map.ts), as the report's does",
    (name) => {
      type Map = { sources: string[]; names: string[]; mappings: string };
      const deployed = JSON.parse(assets.get(name)!.map) as Map;
      const reported = JSON.parse(
        Buffer.from(report.find((b) => b.name === name)!.sourceMap!).toString(),
      ) as Map;

      expect(deployed.sources.some((s) => s.endsWith(BUNDLED_FUNCTIONS[name].entry))).toBe(true);
      expect(deployed.sources.filter((s) => s.includes('node_modules'))).toEqual([]);
      // The sources differ only in the path up to the project (each is relative to its own output).
      expect(reported.sources).toHaveLength(deployed.sources.length);
      expect(reported.names).toEqual(deployed.names);
      expect(reported.mappings).toBe(deployed.mappings);
    },
  );
});

describe('bundle report', () => {
  const bundle = (codeBytes: number): FunctionBundle => ({
    name: 'worker',
    code: new Uint8Array(),
    codeBytes,
    sourceMapBytes: 10,
    gzipBytes: 5,
    budgetBytes: 1000,
    contributors: [{ name: 'zod', bytes: 600 }],
    metafile: { inputs: {}, outputs: {} },
  });

  it('marks a bundle over its budget', () => {
    const text = formatReport([bundle(1100)]);

    expect(text).toMatch(/worker .*110%\s+OVER BUDGET/);
    expect(text).toContain('worker: zod 0.6 KiB');
  });

  it('passes a bundle at its budget', () => {
    expect(formatReport([bundle(1000)])).toMatch(/worker .*100%\s+ok/);
  });

  it('refuses a bundling option it does not translate, rather than report something else', () => {
    const translate = () => esbuildOptionsFor('webhook', { ...CONNECTOR_BUNDLING, preCompilation: true });

    expect(translate).toThrow(/preCompilation/);
  });

  it("passes the stack's --alias and --supported arguments to esbuild and refuses any other esbuild argument", () => {
    const translate = (esbuildArgs: Record<string, string>) =>
      esbuildOptionsFor('webhook', { ...CONNECTOR_BUNDLING, esbuildArgs });

    expect(esbuildOptionsFor('webhook').alias).toEqual({
      '@aws-sdk/credential-provider-node': './shared/adapters/lambda-credentials.ts',
      '@smithy/core/event-streams': './shared/adapters/no-event-streams.ts',
    });
    expect(esbuildOptionsFor('webhook').supported).toEqual({ 'dynamic-import': false });
    expect(() => translate({ '--tree-shaking': 'false' })).toThrow(/--tree-shaking/);
    expect(() => translate({ '--supported:dynamic-import': 'no' })).toThrow(/--supported:dynamic-import/);
  });
});

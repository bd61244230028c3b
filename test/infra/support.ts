import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, type AppProps, type CfnElement, type Stack } from 'aws-cdk-lib';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { addConnector } from '../../infra/app.ts';
import { PROJECT_ROOT } from '../../infra/connector-stack.ts';
import { type DeployConfig, EXAMPLE_CONFIG_FILE, loadDeployConfig } from '../../infra/deploy-config.ts';

/** The example config with CDK-context-style overrides (`{ 'queue.maxReceiveCount': '8' }`). */
export function exampleConfig(overrides: Record<string, unknown> = {}): DeployConfig {
  return loadDeployConfig({ context: { config: EXAMPLE_CONFIG_FILE, ...overrides }, cwd: PROJECT_ROOT })
    .config;
}

/** The feature flags of cdk.json, so tests synthesize what `cdk synth` does. */
export function cdkJsonContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(readFileSync(join(PROJECT_ROOT, 'cdk.json'), 'utf8')) as { context?: object };
  return { ...cdkJson.context };
}

/**
 * An app like `infra/app.ts` builds, with cdk-nag registered. Bundling is skipped unless asked for:
 * Template assertions do not look at the code, and esbuild would add seconds per synth.
 */
export function connectorApp(config: DeployConfig, options: { bundle?: boolean; outdir?: string } = {}) {
  const context: Record<string, unknown> = cdkJsonContext();
  if (options.bundle !== true) context['aws:cdk:bundling-stacks'] = [];
  const props: AppProps = { context, ...(options.outdir === undefined ? {} : { outdir: options.outdir }) };
  const app = new App(props);
  const stack = addConnector(app, config);
  return { app, stack };
}

/** One statement of an IAM policy, as the synthesized template holds it. */
export type PolicyStatement = { Action: string | string[]; Resource: unknown; Effect: string };

/** Every statement of the policies attached to `fn`'s role in `template`. */
export function roleStatements(template: Template, stack: Stack, fn: IFunction): PolicyStatement[] {
  const role = stack.getLogicalId(fn.role!.node.defaultChild as CfnElement);
  const policies = template.findResources('AWS::IAM::Policy', {
    Properties: { Roles: Match.arrayWith([{ Ref: role }]) },
  });
  return Object.values(policies).flatMap(
    (p) =>
      (p as { Properties: { PolicyDocument: { Statement: PolicyStatement[] } } }).Properties.PolicyDocument
        .Statement,
  );
}

/** The actions `statements` allow, each once, sorted. */
export function actionsOf(statements: readonly PolicyStatement[]): string[] {
  return [
    ...new Set(statements.flatMap((st) => (Array.isArray(st.Action) ? st.Action : [st.Action]))),
  ].sort();
}

import { App, Validations } from 'aws-cdk-lib';
import cdkNag from 'cdk-nag';
import { ConnectorStack } from './connector-stack.ts';
import { type DeployConfig, DeployConfigError, loadDeployConfig } from './deploy-config.ts';

// cdk-nag is CommonJS with re-exports Node cannot detect statically: no named ESM imports.
const { AwsSolutionsChecks } = cdkNag;

/**
 * Adds the connector stack to `app` and registers the cdk-nag AWS Solutions checks for everything in
 * the app, so `cdk synth` fails on any finding that is not acknowledged with a reason. Tests call this too, so what
 * they check is what deploys.
 */
export function addConnector(app: App, config: DeployConfig): ConnectorStack {
  const stack = new ConnectorStack(app, config.stackName, { config });
  // cdk-nag 3 is a CDK validation plugin: synth fails on any finding not acknowledged with
  // `Validations.of(construct).acknowledge({ id, reason })`; the reasons are copied into the template.
  Validations.of(app).addPlugins(
    new AwsSolutionsChecks(app, { verbose: true, writeSuppressionsToCloudFormation: true }),
  );
  return stack;
}

function main(): void {
  // Env-agnostic on purpose: synth needs no credentials, and `cdk deploy` takes the account and
  // region from the caller's AWS profile.
  const app = new App();
  try {
    const { config, file, overrides, warnings } = loadDeployConfig({
      context: app.node.getAllContext(),
      cwd: process.cwd(),
    });
    for (const warning of warnings) console.warn(`warning: ${warning}`);
    const overridden = overrides.length > 0 ? ` (overridden by context: ${overrides.join(', ')})` : '';
    console.warn(`connector config: ${file}${overridden}`);
    addConnector(app, config);
  } catch (error) {
    if (!(error instanceof DeployConfigError)) throw error;
    console.error(`error: ${error.message}`);
    process.exit(1);
  }
  app.synth();
}

if (import.meta.main) main();

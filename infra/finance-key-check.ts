import { CustomResource, Duration, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Provider } from 'aws-cdk-lib/custom-resources';
import { Construct } from 'constructs';

export interface FinanceKeyCheckProps {
  /** Name or ARN of the finance API key's secret, as in the deploy config. */
  readonly secretRef: string;
  /** Where `infra/finance-key-check-handler.ts` and package-lock.json are. */
  readonly projectRoot: string;
  readonly logRetention: logs.RetentionDays;
  /** How the check function is bundled: the stack passes the settings of its own functions. */
  readonly bundling: nodejs.BundlingOptions;
  /**
   * A value that differs on every synth. CloudFormation calls a custom resource only when one of its
   * properties changed, and the secret's value can change without any change to the template.
   * @default the synth time in milliseconds
   */
  readonly deployedAt?: string;
}

/**
 * Fails the deployment while the finance API key is shorter than 32 characters. The config holds
 * only the secret's name, so the check runs in the account: a custom resource whose function reads
 * the secret's AWSCURRENT value on every Create and Update. Grant it GetSecretValue on the secret
 * (`function.role`); it may do nothing else but write its own logs.
 */
export class FinanceKeyCheck extends Construct {
  readonly function: nodejs.NodejsFunction;
  readonly resource: CustomResource;

  constructor(scope: Construct, id: string, props: FinanceKeyCheckProps) {
    super(scope, id);
    const { projectRoot, logRetention } = props;
    const logGroup = (name: string) =>
      new logs.LogGroup(this, `${name}Logs`, {
        retention: logRetention,
        removalPolicy: RemovalPolicy.DESTROY,
      });
    // Own roles instead of AWSLambdaBasicExecutionRole, which may write to every log group.
    const role = (name: string, logs: logs.LogGroup) => {
      const r = new iam.Role(this, `${name}Role`, {
        assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
        description: `Role of the finance key check's ${name.toLowerCase()} function`,
      });
      logs.grantWrite(r);
      return r;
    };

    const checkLogs = logGroup('Check');
    this.function = new nodejs.NodejsFunction(this, 'CheckFunction', {
      entry: `${projectRoot}/infra/finance-key-check-handler.ts`,
      handler: 'handler',
      projectRoot,
      depsLockFilePath: `${projectRoot}/package-lock.json`,
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: 256,
      // One GetSecretValue bounded by the SDK budget (about 3.2 s at worst).
      timeout: Duration.seconds(30),
      description: 'Deploy time: fails the deployment while the finance API key is under 32 characters',
      role: role('Check', checkLogs),
      logGroup: checkLogs,
      bundling: props.bundling,
    });

    const frameworkLogs = logGroup('Framework');
    const frameworkRole = role('Framework', frameworkLogs);
    const provider = new Provider(this, 'Provider', {
      onEventHandler: this.function,
      frameworkOnEventRole: frameworkRole,
      logGroup: frameworkLogs,
    });
    const checkId = Stack.of(this).getLogicalId(this.function.node.defaultChild as lambda.CfnFunction);
    Validations.of(frameworkRole).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${checkId}.Arn>:*]`,
      reason:
        "CDK's Provider framework may invoke the check function and its versions (`<arn>:*`); the wildcard names no other function.",
    });
    this.resource = new CustomResource(this, 'Resource', {
      serviceToken: provider.serviceToken,
      resourceType: 'Custom::FinanceKeyCheck',
      properties: { SecretId: props.secretRef, DeployedAt: props.deployedAt ?? String(Date.now()) },
    });
  }
}

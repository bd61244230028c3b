import { Validations } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import cdkNag from 'cdk-nag';
import type { IConstruct } from 'constructs';
import { describe, expect, it } from 'vitest';
import { connectorApp, exampleConfig } from './support.ts';

/**
 * cdk-nag 3 is a CDK validation plugin, not an Aspect: `addConnector` registers it on the app, and
 * synth throws `ValidationFailed` when any finding is not acknowledged. Its findings are no longer
 * Annotations, so `Annotations.findError` would see none either way; these tests run the pack on the
 * tree (to list what it found) and synthesize (to prove the registered plugin passes).
 */

const { AwsSolutionsChecks } = cdkNag;

function findings(scope: IConstruct): string[] {
  return new AwsSolutionsChecks(undefined, { verbose: true })
    .validateScope(scope)
    .violations.map((v) => `${v.ruleName} at ${v.violatingResources.map((r) => r.constructPath).join(', ')}`);
}

function acknowledgments(scope: IConstruct): { path: string; id: string; reason: string }[] {
  return scope.node.findAll().flatMap((c) =>
    c.node.metadata
      .filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY)
      .flatMap((m) =>
        Object.entries(m.data as Record<string, string>).map(([id, reason]) => ({
          path: c.node.path,
          id,
          reason,
        })),
      ),
  );
}

describe('cdk-nag AwsSolutions', () => {
  it.each([
    ['the example config', {}],
    [
      'every option on',
      {
        refundsIamAuth: 'true',
        alarmEmail: 'ops@example.com',
        'legacy.credentialsSecret': 'x/y',
        'catchUp.enabled': 'true',
        'sources.0.shopApi':
          '{"url":"https://shop-main.myshopify.com","credentialsRef":"connector/shop-api/main"}',
      },
    ],
  ])('has no unacknowledged finding with %s, and synth passes the registered plugin', (_, overrides) => {
    const { app, stack } = connectorApp(exampleConfig(overrides));

    const found = findings(stack);
    const synth = () => app.synth();

    expect(found).toEqual([]);
    expect(synth).not.toThrow();
  });

  it('every acknowledgment names an AwsSolutions rule and gives a reason', () => {
    const { stack } = connectorApp(exampleConfig());

    const acks = acknowledgments(stack);

    expect(acks.length).toBeGreaterThan(0);
    for (const ack of acks) {
      expect(ack.id).toMatch(/AwsSolutions-[A-Z]+\d+/);
      expect(ack.reason.length, `${ack.path} ${ack.id}`).toBeGreaterThanOrEqual(40);
    }
  });

  it('catches a non-compliant resource: the check can fail', () => {
    const { app, stack } = connectorApp(exampleConfig());
    new sqs.Queue(stack, 'PlainQueue');

    const found = findings(stack);
    const synth = () => app.synth();

    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^AwsSolutions-SQS3 at .*PlainQueue/),
        expect.stringMatching(/^AwsSolutions-SQS4 at .*PlainQueue/),
      ]),
    );
    expect(synth).toThrow(/AwsSolutions/);
  });
});

import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../infra/connector-stack.ts';
import {
  DEFAULT_CONFIG_FILE,
  DeployConfigError,
  EXAMPLE_CONFIG_FILE,
  loadDeployConfig,
  workerInitialRatePerSecond,
  workerRatePerSecond,
} from '../../infra/deploy-config.ts';
import { longestQueueStaySeconds } from '../../shared/worker/batch.ts';

const SOURCE = {
  id: 'shop',
  platform: 'shopify',
  program: 'aaaaaaaaaaaaaaaaaaaaaaaa',
  rule: 'bbbbbbbbbbbbbbbbbbbbbbbb',
  secretRef: 'connector/webhooks/shop',
};
const MINIMAL = {
  sources: [SOURCE],
  affiliate: { baseUrl: 'https://api.platform.example', tokenSecret: 'connector/token' },
  financeApiKeySecret: 'connector/finance',
};

describe('loadDeployConfig', () => {
  let cwd: string;
  beforeEach(() => {
    cwd = mkdtempSync(join(tmpdir(), 'connector-config-'));
  });
  afterEach(() => {
    rmSync(cwd, { recursive: true, force: true });
  });

  const write = (config: unknown, file = DEFAULT_CONFIG_FILE) =>
    writeFileSync(join(cwd, file), typeof config === 'string' ? config : JSON.stringify(config));
  const load = (context: Record<string, unknown> = {}) => loadDeployConfig({ context, cwd });
  const failure = (context: Record<string, unknown> = {}) => {
    try {
      load(context);
    } catch (error) {
      expect(error).toBeInstanceOf(DeployConfigError);
      return (error as Error).message;
    }
    throw new Error('expected the config to be refused');
  };

  it('fills safe defaults around the required settings', () => {
    write(MINIMAL);

    const { config, warnings, overrides } = load();

    expect(warnings).toEqual([]);
    expect(overrides).toEqual([]);
    expect(config).toMatchObject({
      stackName: 'ConversionConnector',
      refundsIamAuth: false,
      checkFinanceKeyAtDeploy: true,
      ledgerDeletionProtection: true,
      queue: { maxReceiveCount: 6, retentionDays: 4 },
      worker: { maxConcurrency: 20, batchSize: 5 },
      apiThrottle: {
        rateLimit: 100,
        burstLimit: 200,
        webhook: { rateLimit: 50, burstLimit: 100 },
        sources: {},
        refunds: { rateLimit: 10, burstLimit: 20 },
      },
      ingest: { reservedConcurrency: 20 },
      secretsMaxAgeSeconds: 300,
      logRetentionDays: 30,
      powertools: {
        serviceName: 'conversion-connector',
        metricsNamespace: 'ConversionConnector',
        logLevel: 'INFO',
      },
    });
    expect(config.sources[0]).toMatchObject({ clickIdAttributes: ['aecid'], backend: 'current' });
    expect(config.alarmEmail).toBeUndefined();
  });

  it('falls back to the example file with a warning when connector.config.json is absent', () => {
    copyFileSync(join(PROJECT_ROOT, EXAMPLE_CONFIG_FILE), join(cwd, EXAMPLE_CONFIG_FILE));

    const { config, file, warnings } = load();

    expect(file).toBe(join(cwd, EXAMPLE_CONFIG_FILE));
    expect(warnings).toEqual([expect.stringContaining(`${DEFAULT_CONFIG_FILE} not found`)]);
    expect(config.sources.map((s) => s.platform)).toEqual(['shopify', 'woocommerce', 'stripe', 'generic']);
  });

  it('reads the file named by context config, and refuses a missing one', () => {
    write(MINIMAL, 'prod.json');

    expect(load({ config: 'prod.json' }).file).toBe(join(cwd, 'prod.json'));
    expect(failure({ config: 'staging.json' })).toMatch(/staging\.json: config file not found/);
  });

  it('lets context override single settings, parsing JSON values', () => {
    write(MINIMAL);

    const { config, overrides } = load({
      alarmEmail: 'ops@example.com',
      refundsIamAuth: 'true',
      'queue.maxReceiveCount': '9',
      'sources.0.orderTopic': 'orders/paid',
      '@aws-cdk/core:checkSecretUsage': true,
    });

    expect(overrides.slice().sort()).toEqual(
      ['alarmEmail', 'queue.maxReceiveCount', 'refundsIamAuth', 'sources.0.orderTopic'].sort(),
    );
    expect(config).toMatchObject({
      alarmEmail: 'ops@example.com',
      refundsIamAuth: true,
      queue: { maxReceiveCount: 9 },
    });
    expect(config.sources[0]?.orderTopic).toBe('orders/paid');
  });

  it.each([
    [
      'a wrong source setting',
      { ...MINIMAL, sources: [{ ...SOURCE, program: 'nope' }] },
      /sources\.0\.program: must be 24 hex/,
    ],
    [
      'a duplicate source id',
      { ...MINIMAL, sources: [SOURCE, SOURCE] },
      /sources\.1\.id: duplicate source id shop/,
    ],
    ['no sources', { ...MINIMAL, sources: [] }, /sources: configure at least one source/],
    [
      'a plain http base URL',
      { ...MINIMAL, affiliate: { ...MINIMAL.affiliate, baseUrl: 'http://x.example' } },
      /affiliate\.baseUrl: must be an https:\/\/ URL/,
    ],
    [
      'a secret value instead of a name',
      { ...MINIMAL, financeApiKeySecret: 'sk live 123' },
      /financeApiKeySecret: must be a Secrets Manager secret name or ARN/,
    ],
    ['too few receives', { ...MINIMAL, queue: { maxReceiveCount: 2 } }, /queue\.maxReceiveCount: Too small/],
    [
      'a retention CloudWatch does not offer',
      { ...MINIMAL, logRetentionDays: 10 },
      /logRetentionDays: must be one of 1, 3, 5/,
    ],
    ['an unknown setting', { ...MINIMAL, alarmMail: 'x@example.com' }, /alarmMail/],
    [
      'an unknown route',
      { ...MINIMAL, affiliate: { ...MINIMAL.affiliate, routes: { 'orders.add': '/x' } } },
      /affiliate\.routes\.orders\.add: orders\.add is not allowed here/,
    ],
    [
      'a route that is not a path',
      {
        ...MINIMAL,
        affiliate: { ...MINIMAL.affiliate, routes: { 'conversions.add': 'https://evil.example/x' } },
      },
      /affiliate\.routes\.conversions\.add: must be a path/,
    ],
    [
      'a legacy source without legacy credentials',
      { ...MINIMAL, sources: [{ ...SOURCE, backend: 'legacy' }] },
      /legacy\.credentialsSecret: required because a source uses backend "legacy"/,
    ],
    [
      'a per-instance ceiling above the platform limit',
      { ...MINIMAL, worker: { maxConcurrency: 10, ratePerSecond: 120 } },
      /worker\.ratePerSecond: 120\/s exceeds the platform's 100\/s per route/,
    ],
    [
      'a batch larger than the event source allows for a FIFO queue',
      { ...MINIMAL, worker: { batchSize: 11 } },
      /worker\.batchSize: /,
    ],
    [
      'a throttle for a source that is not configured',
      { ...MINIMAL, apiThrottle: { sources: { 'no-such-shop': { rateLimit: 5, burstLimit: 10 } } } },
      /apiThrottle\.sources\.no-such-shop: not a configured source id/,
    ],
    [
      'a burst below the rate',
      { ...MINIMAL, apiThrottle: { refunds: { rateLimit: 50, burstLimit: 10 } } },
      /apiThrottle\.refunds\.burstLimit: must be at least rateLimit/,
    ],
    [
      'an OldestMessageAge threshold one failing message would cross',
      { ...MINIMAL, alarms: { oldestMessageAgeSeconds: 600 } },
      /alarms\.oldestMessageAgeSeconds: 600 s is below \d+ s, .*queue\.maxReceiveCount 6.*at least \d+/,
    ],
    [
      'a DLQ age alarm no sooner than SQS deletes the message',
      { ...MINIMAL, alarms: { deadLetterAgeDays: 14 } },
      /alarms\.deadLetterAgeDays: .*14 days/,
    ],
  ])('refuses %s, naming the setting', (_, config, message) => {
    write(config);

    expect(failure()).toMatch(message);
  });

  it('names the receives that make a given OldestMessageAge threshold too low', () => {
    // Prepare: enough for one failing message's stay on the backoffs at 6 receives (visibility 180 s), not at 10.
    const stay = (maxReceiveCount: number) =>
      longestQueueStaySeconds({ maxReceiveCount, visibilityTimeoutSeconds: 180, longestWaitSeconds: 0 });
    const seconds = stay(6);
    write({ ...MINIMAL, alarms: { oldestMessageAgeSeconds: seconds } });

    // Act, Assess
    expect(load().config.alarms.oldestMessageAgeSeconds).toBe(seconds);
    expect(failure({ 'queue.maxReceiveCount': '10' })).toBe(
      `${DEFAULT_CONFIG_FILE}: alarms.oldestMessageAgeSeconds: ${seconds} s is below ${stay(10)} s, how long one message failing transiently stays in the main queue on the worker's backoffs before it parks it (queue.maxReceiveCount 10, visibility timeout 180 s), so one bad message would page: give at least ${stay(10)}, or leave it out (default ${Math.max(1800, stay(10) + 600)})`,
    );
  });

  it('names the file and the -c key when a context override is wrong', () => {
    write(MINIMAL);

    const message = failure({ 'worker.maxConcurrency': '1' });

    expect(message).toMatch(
      /^connector\.config\.json: worker\.maxConcurrency: .* \(set by context -c worker\.maxConcurrency\)$/,
    );
  });

  it('refuses a file that is not JSON', () => {
    write('{ "sources": [');

    expect(failure()).toBe(`${DEFAULT_CONFIG_FILE}: not valid JSON`);
  });

  it('refuses a context path through a setting that is not an object', () => {
    write({ ...MINIMAL, refundsIamAuth: false });

    expect(failure({ 'refundsIamAuth.x': '1' })).toBe(
      'context refundsIamAuth.x: refundsIamAuth is not an object',
    );
  });

  it('names the -c key that made a setting wrong from below', () => {
    write(MINIMAL);

    expect(failure({ 'refundsIamAuth.x': '1' })).toMatch(
      /refundsIamAuth: .*expected boolean.* \(set by context -c refundsIamAuth\.x\)$/,
    );
  });
});

describe('worker pacing', () => {
  const limit100 = { rateLimitPerSecond: 100 } as never;

  it('lets one instance reach the platform limit: the ceiling is the limit unless set lower', () => {
    expect(workerRatePerSecond({ affiliate: limit100, worker: { maxConcurrency: 20 } })).toBe(100);
    expect(
      workerRatePerSecond({ affiliate: limit100, worker: { maxConcurrency: 5, ratePerSecond: 7 } }),
    ).toBe(7);
  });

  it('starts every instance at its share of 80% of the limit, so a fleet that starts together stays under it', () => {
    expect(workerInitialRatePerSecond({ affiliate: limit100, worker: { maxConcurrency: 20 } })).toBe(4);
    expect(workerInitialRatePerSecond({ affiliate: limit100, worker: { maxConcurrency: 3 } })).toBe(26);
    expect(
      workerInitialRatePerSecond({
        affiliate: { rateLimitPerSecond: 10 } as never,
        worker: { maxConcurrency: 20 },
      }),
    ).toBe(1);
    expect(
      workerInitialRatePerSecond({ affiliate: limit100, worker: { maxConcurrency: 2, ratePerSecond: 7 } }),
    ).toBe(7);
  });
});

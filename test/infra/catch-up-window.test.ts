import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_CONFIG_FILE, loadDeployConfig } from '../../infra/deploy-config.ts';

/**
 * The catch-up runs once a day and reads back `catchUp.hours`. A window shorter than the day between
 * two runs leaves part of every day read by no run at all: a webhook missed then is never queued,
 * which is the one thing the catch-up is for. (48, the default, also covers a day whose run failed.)
 */
const CONFIG = {
  sources: [
    {
      id: 'shop',
      platform: 'shopify',
      program: 'a'.repeat(24),
      rule: 'b'.repeat(24),
      secretRef: 'connector/webhooks/shop',
      shopApi: { url: 'https://shop.myshopify.com', credentialsRef: 'connector/shop-api/shop' },
    },
  ],
  affiliate: { baseUrl: 'https://api.platform.example', tokenSecret: 'connector/token' },
  financeApiKeySecret: 'connector/finance',
  catchUp: { enabled: true },
};

describe('catchUp.hours', () => {
  let cwd: string;
  beforeEach(() => {
    cwd = mkdtempSync(join(tmpdir(), 'connector-catch-up-'));
    writeFileSync(join(cwd, DEFAULT_CONFIG_FILE), JSON.stringify(CONFIG));
  });
  afterEach(() => rmSync(cwd, { recursive: true, force: true }));

  it('refuses a window shorter than the day between two daily runs, naming the setting', () => {
    // Act / Assess
    expect(() => loadDeployConfig({ context: { 'catchUp.hours': '12' }, cwd })).toThrow('catchUp.hours');
  });

  it('takes the default 48 hours and any window of a day or more', () => {
    // Act / Assess
    expect(loadDeployConfig({ context: {}, cwd }).config.catchUp.hours).toBe(48);
    expect(loadDeployConfig({ context: { 'catchUp.hours': '30' }, cwd }).config.catchUp.hours).toBe(30);
  });
});

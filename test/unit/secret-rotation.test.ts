import { describe, expect, it } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConnectorEvent } from '../../shared/domain/events.ts';
import { type FinanceDeps, MIN_FINANCE_KEY_LENGTH, submitFinanceRefund } from '../../shared/finance.ts';
import { ingestWebhook } from '../../shared/ingest.ts';
import { adapterFor } from '../../shared/platforms/registry.ts';
import { hmacSha256 } from '../../shared/platforms/signature.ts';
import type { EventQueue } from '../../shared/ports.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { sampleRaw } from './platforms/support.ts';

/**
 * A secret is one value, whatever characters it holds (WooCommerce's generated secrets contain
 * commas about 4 times in 10). Rotation keeps two values side by side (`<NAME>` and
 * `<NAME>_PREVIOUS` locally, AWSCURRENT and AWSPREVIOUS in Secrets Manager), never one value split.
 */

/** 50 characters with the separators a splitter would cut on, and the ones it might next. */
const ODD_SECRET = 'wc_k3y, with;semi [brackets] {braces} (parens),end';
const NEW_SECRET = 'ck_rotated_new_0123456789abcdefghijklmnopqrstuv';
const OLD_SECRET = 'ck_rotated_old_0123456789abcdefghijklmnopqrstuv';

const woo = SourceConfig.parse({
  id: 'woo',
  platform: 'woocommerce',
  program: '5ad000000000000000000101',
  rule: '5ad000000000000000000201',
  secretRef: 'WOO_SECRET',
});
/** WooCommerce's own sample, with a click id so it maps to a conversion. */
const ORDER = sampleRaw('woocommerce/order_prices_include_tax_attributed.json');

class MemoryQueue implements EventQueue {
  readonly sent: ConnectorEvent[] = [];
  async send(event: ConnectorEvent): Promise<string> {
    this.sent.push(event);
    return `m-${this.sent.length}`;
  }
}

async function deliver(env: Record<string, string>, signingSecret: string) {
  const deps = {
    sources: new Map([[woo.id, woo]]),
    adapterFor,
    secrets: new EnvSecretStore(env),
    queue: new MemoryQueue(),
    now: () => new Date(),
  };
  const headers = {
    'content-type': 'application/json',
    'x-wc-webhook-topic': 'order.created',
    'x-wc-webhook-signature': hmacSha256(signingSecret, ORDER).toString('base64'),
  };
  return (await ingestWebhook(deps, woo.id, { headers, rawBody: ORDER })).status;
}

/** What a splitter on `,`, `;`, newlines or spaces would have made of the secret. */
function fragments(secret: string): string[] {
  const parts = new Set([...secret.split(','), ...secret.split(';'), ...secret.split(/\s+/)]);
  return [...parts].flatMap((p) => [p, p.trim()]).filter((p) => p !== '' && p !== secret);
}

describe('webhook secrets are never split', () => {
  it('a 50-character secret with , ; spaces and brackets verifies whole', async () => {
    expect(ODD_SECRET).toHaveLength(50);
    expect(await deliver({ WOO_SECRET: ODD_SECRET }, ODD_SECRET)).toBe(202);
  });

  it("none of that secret's fragments verifies", async () => {
    const parts = fragments(ODD_SECRET);
    expect(parts.length).toBeGreaterThan(5);
    for (const part of parts) {
      expect({ part, status: await deliver({ WOO_SECRET: ODD_SECRET }, part) }).toEqual({
        part,
        status: 401,
      });
    }
  });

  it('rotation: <NAME> and <NAME>_PREVIOUS both verify, and nothing else', async () => {
    const env = { WOO_SECRET: NEW_SECRET, WOO_SECRET_PREVIOUS: OLD_SECRET };
    expect(await deliver(env, NEW_SECRET)).toBe(202);
    expect(await deliver(env, OLD_SECRET)).toBe(202);
    expect(await deliver(env, `${NEW_SECRET},${OLD_SECRET}`)).toBe(401);
    expect(await deliver(env, `${NEW_SECRET}\n${OLD_SECRET}`)).toBe(401);
    expect(await deliver(env, 'ck_some_other_secret')).toBe(401);
  });

  it('an old comma-separated value is one secret now: its parts no longer verify', async () => {
    const env = { WOO_SECRET: `${NEW_SECRET},${OLD_SECRET}` };
    expect(await deliver(env, NEW_SECRET)).toBe(401);
    expect(await deliver(env, OLD_SECRET)).toBe(401);
  });
});

describe('the finance key is never split, and must be strong', () => {
  const STRONG_KEY = 'fk, with;semi [brackets] {braces} (parens) 0123456';
  const PREVIOUS_KEY = 'fk_previous_key_0123456789abcdefghij';

  async function refund(env: Record<string, string>, presented: string) {
    const deps: FinanceDeps = {
      sources: new Map([[woo.id, woo]]),
      ledger: { get: async () => undefined },
      reservations: new MemoryLedger(),
      queue: new MemoryQueue(),
      secrets: new EnvSecretStore(env),
      keyRef: 'FINANCE_API_KEY',
      now: () => new Date(),
    };
    // A body that fails validation after authentication: 400 means the key was accepted.
    const answer = await submitFinanceRefund(deps, { 'x-api-key': presented }, Buffer.from('{}'));
    return answer.status;
  }

  it('a key with , ; spaces and brackets is accepted whole; its fragments are refused', async () => {
    expect(STRONG_KEY).toHaveLength(50);
    expect(await refund({ FINANCE_API_KEY: STRONG_KEY }, STRONG_KEY)).toBe(400);
    for (const part of fragments(STRONG_KEY)) {
      expect({ part, status: await refund({ FINANCE_API_KEY: STRONG_KEY }, part) }).toEqual({
        part,
        status: 401,
      });
    }
  });

  it('rotation: FINANCE_API_KEY and FINANCE_API_KEY_PREVIOUS both pass, and nothing else', async () => {
    const env = { FINANCE_API_KEY: STRONG_KEY, FINANCE_API_KEY_PREVIOUS: PREVIOUS_KEY };
    expect(await refund(env, STRONG_KEY)).toBe(400);
    expect(await refund(env, PREVIOUS_KEY)).toBe(400);
    expect(await refund(env, `${STRONG_KEY},${PREVIOUS_KEY}`)).toBe(401);
    expect(await refund(env, 'fk_another_key_0123456789abcdefghij')).toBe(401);
  });

  it('a configured key shorter than the minimum is refused for every caller, as a configuration fault', async () => {
    const weak = 'x'.repeat(MIN_FINANCE_KEY_LENGTH - 1);
    expect(await refund({ FINANCE_API_KEY: weak }, weak)).toBe(503);
    // A weak previous key is no way around it.
    expect(await refund({ FINANCE_API_KEY: STRONG_KEY, FINANCE_API_KEY_PREVIOUS: weak }, weak)).toBe(503);
  });
});

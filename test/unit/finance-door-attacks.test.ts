import { describe, expect, it } from 'vitest';
import { makeHandler } from '../../functions/refunds.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { type FinanceDeps, submitFinanceRefund, weakFinanceKey } from '../../shared/finance.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { FINANCE_KEY, refundsEvent } from '../support/finance-door.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { RecordingQueue } from '../support/recording-queue.ts';

/**
 * `POST /refunds` against a careless finance script and a misconfigured key: a 202 is only given for
 * what the worker will apply as sent, and a key the door can never match is the operator's fault.
 */

const source = SourceConfig.parse({
  id: 'shopify',
  platform: 'shopify',
  program: '0123456789abcdef01234567',
  rule: '76543210fedcba9876543210',
  secretRef: 'SHOPIFY_SECRET',
});

function depsWith(env: Record<string, string>): FinanceDeps & { readonly queue: RecordingQueue } {
  return {
    sources: new Map([[source.id, source]]),
    ledger: { get: async () => undefined },
    reservations: new MemoryLedger(),
    queue: new RecordingQueue(),
    secrets: new EnvSecretStore(env),
    keyRef: 'FINANCE_API_KEY',
    now: () => new Date(),
  };
}

/** As API Gateway (and the local stack) hand the function a body: base64 of the exact bytes. */
const refundEvent = (rawBody: Buffer) => refundsEvent({ 'x-api-key': FINANCE_KEY }, rawBody);

describe('POST /refunds: a body that is not UTF-8 JSON', () => {
  it('answers 400 naming body to a Latin-1 refund id, and queues nothing (it would be queued with U+FFFD in it)', async () => {
    // Prepare: "Rückgabe-7" written by a tool that saves Latin-1 (ü is the one byte 0xFC).
    const deps = depsWith({ FINANCE_API_KEY: FINANCE_KEY });
    const body = Buffer.concat([
      Buffer.from('{"externalId":"1001","refundId":"R'),
      Buffer.from([0xfc]),
      Buffer.from('ckgabe-7","amountCents":500,"currency":"EUR"}'),
    ]);

    // Act
    const result = await makeHandler(deps)(refundEvent(body));

    // Assess
    expect(result.statusCode).toBe(400);
    expect(JSON.parse(result.body ?? '{}')).toEqual({
      error: 'bad_request',
      field: 'body',
      message: 'request body is not valid UTF-8',
    });
    expect(deps.queue.events).toEqual([]);
  });

  it('reads a body that starts with a UTF-8 byte order mark as the webhooks do (PowerShell writes one)', async () => {
    // Prepare
    const deps = depsWith({ FINANCE_API_KEY: FINANCE_KEY });
    const json = JSON.stringify({ externalId: '1001', refundId: 'RF-1', amountCents: 500, currency: 'EUR' });
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]);

    // Act
    const result = await makeHandler(deps)(refundEvent(body));

    // Assess
    expect(result.statusCode).toBe(202);
    expect(deps.queue.events).toEqual([expect.objectContaining({ refundId: 'RF-1', amount: 500 })]);
  });
});

describe('POST /refunds: a configured key that no HTTP header can carry', () => {
  it.each([
    ['a trailing newline (a secret put from a file)', `${FINANCE_KEY}\n`],
    ['a trailing space', `${FINANCE_KEY} `],
    ['a leading tab', `\t${FINANCE_KEY}`],
    ['a control character inside', `${FINANCE_KEY.slice(0, 10)}\u0000${FINANCE_KEY.slice(10)}`],
  ])(
    'answers 503 as a configuration fault when the key has %s, not 401 to the right key',
    async (_case, configured) => {
      // Prepare: HTTP trims spaces and tabs around a header value and carries no control character, so
      // finance presents the key without them and would get 401 for ever, with no alarm.
      const deps = depsWith({ FINANCE_API_KEY: configured });
      const body = Buffer.from(JSON.stringify({ externalId: '1001', refundId: 'RF-1', full: true }));

      // Act
      const answer = await submitFinanceRefund(deps, { 'x-api-key': FINANCE_KEY }, body);

      // Assess
      expect(answer.status).toBe(503);
      expect(answer.headers?.['retry-after']).toBeDefined();
      expect(answer.body['message']).toMatch(/operator must replace it/);
      expect(JSON.stringify(answer.body)).not.toContain(FINANCE_KEY);
      expect(deps.queue.events).toEqual([]);
    },
  );

  it('is reported by weakFinanceKey (doctor reads it), naming no part of the key', () => {
    const reason = weakFinanceKey(`${FINANCE_KEY}\n`);

    expect(reason).toMatch(/^the finance API key has /);
    expect(reason).not.toContain(FINANCE_KEY.slice(0, 8));
    // Spaces inside a key are part of it, and a header carries them.
    expect(weakFinanceKey(`${FINANCE_KEY.slice(0, 10)} ${FINANCE_KEY.slice(10)}`)).toBeUndefined();
  });
});

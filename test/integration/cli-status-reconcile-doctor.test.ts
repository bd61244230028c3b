import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { localStateDir, runCli } from '../support/cli.ts';
import { genericWebhook, post } from '../support/webhooks.ts';

const CLICK = '0123456789abcdef01234567';
const IP = '203.0.113.7';

let stack: LocalStack;
let state: { dir: string; remove(): void };
const startedAt = new Date(Date.now() - 60_000).toISOString();

beforeAll(async () => {
  stack = await startLocalStack({ port: 0, sandbox: { port: 0 } });
  state = localStateDir(stack);
  for (const id of ['9001', '9002', '9003', '9004']) {
    const sent = await runCli(['send', 'generic', '--order-id', id, '--click-id', CLICK, '--ip', IP], {
      cwd: state.dir,
    });
    if (sent.code !== 0) throw new Error(`send ${id}: ${sent.stdout}${sent.stderr}`);
  }
  await stack.waitForIdle();
});
afterAll(async () => {
  state?.remove();
  await stack?.close();
});

const cli = (...argv: string[]) => runCli(argv, { cwd: state.dir });
const conversionOf = (externalId: string) =>
  stack.sandbox?.control.conversions().find((c) => c.externalId === externalId);

describe('connector status', () => {
  it('shows the ledger record and the conversion side by side, and exits 0 when they agree', async () => {
    // Act
    const shown = await cli('status', '9001');
    // Assess
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/state\s+added\s+pending/);
    expect(shown.stdout).toMatch(/amount\s+EUR 49\.90\s+EUR 49\.90/);
    expect(shown.stdout).toContain('✓ ledger and platform agree');
  });

  it('prints JSON, and exits 1 for an order nobody knows', async () => {
    // Act
    const json = await cli('status', '9001', '--source', 'generic', '--json');
    const unknown = await cli('status', 'no-such-order');
    // Assess
    expect(JSON.parse(json.stdout)).toMatchObject({
      found: true,
      externalId: '9001',
      record: { state: 'added', currentAmount: 4990 },
      conversion: { externalId: '9001', amount: 4990 },
      differences: [],
    });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain(
      'order no-such-order: not in the ledger and no conversion on the platform',
    );
  });
});

describe('connector reconcile', () => {
  it('is clean (exit 0) while the platform matches the ledger', async () => {
    // Act
    const clean = await cli('reconcile', '--from', startedAt);
    // Assess
    expect(clean.code, clean.stdout + clean.stderr).toBe(0);
    expect(clean.stdout).toContain('4 ledger records, 4 conversions on the platform');
    expect(clean.stdout).toContain('✓ no differences');
  });

  it('finds a conversion removed from the platform, an amount and a status changed there, and exits 1', async () => {
    // Prepare
    const control = stack.sandbox?.control;
    control?.remove(conversionOf('9002')?.id ?? '');
    control?.setAmount(conversionOf('9003')?.id ?? '', 1234);
    // Act
    const table = await cli('reconcile', '--from', startedAt);
    const csv = await cli('reconcile', '--from', startedAt, '--csv');
    const json = await cli('reconcile', '--from', startedAt, '--json');
    // Assess
    expect(table.code).toBe(1);
    expect(table.stdout).toMatch(/missing\s+9002 .*added EUR 49\.90/);
    expect(table.stdout).toMatch(/amount_mismatch\s+9003 .*ledger EUR 49\.90, platform EUR 12\.34/);
    expect(table.stdout).toContain('✗ 2 differences');
    expect(csv.code).toBe(1);
    expect(csv.stdout.split('\n')).toEqual(
      expect.arrayContaining([
        'kind,program,externalId,conversionId,ledgerState,ledgerAmount,platformStatus,platformAmount,currency,detail',
        expect.stringMatching(
          /^amount_mismatch,[0-9a-f]{24},9003,[0-9a-f]{24},added,49\.90,pending,12\.34,EUR,/,
        ),
      ]),
    );
    expect(
      JSON.parse(json.stdout).differences.map((d: { kind: string; externalId: string }) => [
        d.kind,
        d.externalId,
      ]),
    ).toEqual([
      ['missing', '9002'],
      ['amount_mismatch', '9003'],
    ]);
  });

  it('exits 2 on a period that ends before it starts', async () => {
    // Act
    const wrong = await cli('reconcile', '--from', '2026-05-02', '--to', '2026-05-01');
    // Assess
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('--from: must not be after --to');
  });
});

describe('connector doctor', () => {
  it('passes every check against the local stack', async () => {
    // Act
    const checked = await cli('doctor');
    // Assess
    expect(checked.code, checked.stdout).toBe(0);
    expect(checked.stdout).toMatch(/✓ affiliate token\s+accepted/);
    expect(checked.stdout).toMatch(/✓ source shopify\s+program [0-9a-f]{24}, rule [0-9a-f]{24}/);
    expect(checked.stdout).toMatch(/✓ queue\s+.*connector-events\.fifo reachable/);
    expect(checked.stdout).toMatch(/✓ ledger table\s+connector-ledger ACTIVE/);
    expect(checked.stdout).toMatch(/✓ secret SHOPIFY_WEBHOOK_SECRET\s+set/);
    expect(checked.stdout).not.toContain('✗');
  });

  it('fails with a hint when the token is refused or a source names an unknown rule', async () => {
    // Prepare
    const sources = [...stack.sources.values()].map((s) =>
      s.id === 'stripe' ? { ...s, rule: 'ffffffffffffffffffffffff' } : s,
    );
    // Act
    // A token from the environment goes only to a URL given the same way, not to the state file's.
    const badToken = await runCli(['doctor'], {
      cwd: state.dir,
      env: { AFFILIATE_TOKEN: 'wrong-token', AFFILIATE_BASE_URL: stack.platformUrl },
    });
    const badRule = await runCli(['doctor'], { cwd: state.dir, env: { SOURCES: JSON.stringify(sources) } });
    // Assess
    expect(badToken.code).toBe(1);
    expect(badToken.stdout).toMatch(/✗ affiliate token\s+refused/);
    expect(badToken.stdout).toContain('fix: set AFFILIATE_TOKEN');
    expect(badRule.code).toBe(1);
    expect(badRule.stdout).toMatch(
      /✗ source stripe\s+rule ffffffffffffffffffffffff is not a rule of program/,
    );
    expect(badRule.stdout).toMatch(/✓ source shopify/);
  });

  it('shows each source’s externalIdPrefix, and warns of sources sharing a program without one', async () => {
    // Prepare
    const sources = [...stack.sources.values()].map((s) =>
      s.id === 'generic' ? { ...s, externalIdPrefix: 'web-' } : s,
    );
    // Act
    const checked = await runCli(['doctor'], { cwd: state.dir, env: { SOURCES: JSON.stringify(sources) } });
    // Assess
    expect(checked.code, checked.stdout).toBe(0);
    expect(checked.stdout).toMatch(/✓ source generic\s+program .*, order ids prefixed "web-"/);
    expect(checked.stdout).toMatch(
      /✓ source shopify\s+.*shares program [0-9a-f]{24} with woocommerce, stripe, neither with an externalIdPrefix/,
    );
  });
});

describe('refunds waiting for their order', () => {
  it('are listed by status and reconcile until the order comes', async () => {
    // Prepare: a refund of an order the shop has not sent (yet)
    const body = JSON.stringify({
      type: 'refund',
      eventId: 'wait-1',
      orderId: '9099',
      refundId: 'early-1',
      amount: '5.00',
      currency: 'EUR',
    });
    const answer = await post(
      `${stack.url}/webhooks/generic`,
      genericWebhook(body, stack.secrets['GENERIC_WEBHOOK_SECRET'] ?? ''),
    );
    expect(answer.status).toBe(202);
    await stack.waitForIdle();
    // Act
    const shown = await cli('status', '9099');
    const reconciled = await cli('reconcile', '--from', startedAt, '--json');
    const table = await cli('reconcile', '--from', startedAt);
    // Assess
    expect(shown.stdout).toMatch(/state\s+awaiting\s+-/);
    expect(shown.stdout).toMatch(/1 refund waiting for the order since .*: applied when order 9099 arrives/);
    expect(JSON.parse(reconciled.stdout).waitingRefunds).toEqual([
      expect.objectContaining({
        externalId: '9099',
        refundId: 'early-1',
        ledgerState: 'awaiting',
        source: 'generic',
      }),
    ]);
    expect(table.stdout).toMatch(
      /1 refund waiting for their order[\s\S]*9099\s+early-1\s+generic\s+not arrived/,
    );
  });
});

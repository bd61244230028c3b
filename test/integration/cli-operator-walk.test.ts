import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { localState } from '../../infra/local/stack.ts';
import { LOCAL_STATE_FILE } from '../../local/defaults.ts';
import { ACCEPT_EVENT_TYPE } from '../../shared/accept/job.ts';
import { SqsFailureQueue } from '../../shared/adapters/sqs.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { messageGroupId } from '../../shared/queueing.ts';
import { localStackForCli, runCli } from '../support/cli.ts';

/**
 * A new operator's walk of the local stack: every command of the runbook tried, faults injected. What
 * each command printed had to tell them what to do next, name the setting they got wrong, and
 * neither cut off nor invent what they needed.
 */
const local = localStackForCli();

const cli = (argv: string[], options: { input?: string; env?: Record<string, string> } = {}) =>
  runCli(argv, { cwd: local.dir, ...options });
const program = () => [...local.stack.sources.values()][0]?.program ?? '';
const failures = () =>
  new SqsFailureQueue(
    local.stack.emulators.sqs,
    local.stack.emulators.queueUrl,
    local.stack.emulators.dlqUrl,
  );
const dlqVisible = () => local.stack.emulators.counts(local.stack.emulators.dlqName).ready;

/** A ConversionAccept the platform would not accept, parked as the accept job parks it. */
async function parkAccept(externalId: string): Promise<void> {
  const message = 'conversion 65a1b2c3d4e5f60718293a4b is refused and can no longer be accepted';
  await failures().park(
    {
      body: JSON.stringify({ type: ACCEPT_EVENT_TYPE, source: 'shopify', program: program(), externalId }),
      groupId: messageGroupId(program(), externalId),
      deduplicationId: `accept-${externalId}`,
    },
    {
      failureClass: 'permanent',
      reason:
        `the platform answered 422 to the accept: ${message}. Conversion 65a1b2c3d4e5f60718293a4b of order ${externalId} ` +
        'is not accepted. The connector will not try again: check the conversion on the platform (refused or ' +
        'locked there by hand?) and accept it there if it should be. Replaying this message does not accept it: ' +
        'it only records the failure; once handled, discard it: connector dlq discard <message id>',
      platformStatus: '422',
      platformMessage: message,
      attempts: '1',
      firstFailureAt: new Date().toISOString(),
      lastFailureAt: new Date().toISOString(),
      eventType: ACCEPT_EVENT_TYPE,
      externalId,
      source: 'shopify',
    },
  );
}

/** A finance refund of `externalId`, parked as refused (422) by the platform. */
async function parkRefund(externalId: string, refundId: string): Promise<void> {
  await failures().park(
    {
      body: JSON.stringify({
        type: 'OrderRefunded',
        eventId: `finance:${refundId}`,
        source: 'shopify',
        platform: 'finance',
        externalId,
        receivedAt: new Date().toISOString(),
        refundId,
        full: true,
        origin: 'finance',
      }),
      groupId: messageGroupId(program(), externalId),
      deduplicationId: `refund-${refundId}`,
    },
    {
      failureClass: 'permanent',
      reason: 'conversions.refuse (POST /advertiser/conversions.refuse) answered 422: injected fault',
      platformStatus: '422',
      platformMessage: 'injected fault',
      attempts: '1',
      firstFailureAt: new Date().toISOString(),
      lastFailureAt: new Date().toISOString(),
      eventType: 'OrderRefunded',
      externalId,
      source: 'shopify',
    },
  );
}

function record(externalId: string, overrides: Partial<OrderRecord>): OrderRecord {
  const now = new Date().toISOString();
  return {
    key: ledgerKey(program(), externalId),
    program: program(),
    externalId,
    source: 'shopify',
    state: 'added',
    version: 0,
    kind: 'tracking',
    originalAmount: 1500,
    currentAmount: 1500,
    currency: 'EUR',
    refunds: {},
    createdAt: now,
    updatedAt: now,
    ...overrides,
  };
}

describe('dlq list and replay say what to do with each message', () => {
  it('lists a ConversionAccept with "then discard" and a refused refund with "then replay"', async () => {
    // Prepare
    await parkAccept('W-ACC');
    await parkRefund('W-REF', 'RF-W-REF');
    // Act
    const listed = await cli(['dlq', 'list']);
    // Assess
    expect(listed.code, listed.stderr).toBe(0);
    const row = (id: string) => listed.stdout.split('\n').find((line) => line.includes(` ${id} `)) ?? '';
    expect(row('W-ACC')).toContain('ConversionAccept');
    expect(row('W-ACC')).toMatch(/act on the platform, then discard/);
    expect(row('W-REF')).toMatch(/fix the cause, then replay/);
  });

  it('replay --dry-run warns that replaying a ConversionAccept accepts nothing', async () => {
    // Act
    const dry = await cli(['dlq', 'replay', '--external-id', 'W-ACC', '--dry-run']);
    // Assess
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/W-ACC.*replaying it accepts nothing/);
    expect(dry.stdout).toContain('connector dlq discard');
  });

  it('counts the messages it cannot show in the total', async () => {
    // Prepare: a second message of one order is behind the first (FIFO), unreadable for now.
    await parkRefund('W-TWO', 'RF-W-TWO-1');
    await parkRefund('W-TWO', 'RF-W-TWO-2');
    const inQueue = dlqVisible();
    // Act
    const listed = await cli(['dlq', 'list']);
    // Assess
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(`${inQueue} messages in the DLQ`);
    expect(listed.stdout).toMatch(/1 of them is not shown/);
  });

  it('replay counts honestly when more come up behind the first', async () => {
    // Prepare
    await local.stack.stopPolling();
    try {
      // Act
      const replayed = await cli(['dlq', 'replay', '--external-id', 'W-TWO', '--yes']);
      // Assess
      expect(replayed.code, replayed.stderr).toBe(0);
      expect(replayed.stdout).toContain('replayed 2, failed 0');
      expect(replayed.stdout).not.toContain('[1/1]');
      expect(replayed.stdout).not.toContain('[2/2]');
      expect(replayed.stdout).toMatch(/\[1\/1\+\] .*W-TWO/);
      expect(replayed.stdout).toMatch(/\[2\/2\+\] .*W-TWO/);
    } finally {
      local.stack.startPolling();
    }
    await local.stack.waitForIdle();
  });
});

describe('a queue URL that names no queue', () => {
  const nosuch = () => `${local.stack.emulators.sqsEndpoint}/000000000000/nosuch.fifo`;

  it('dlq list names the URL and the flag, exit 2', async () => {
    // Act
    const listed = await cli(['dlq', 'list', '--dlq-url', nosuch()]);
    // Assess
    expect(listed.code).toBe(2);
    expect(listed.stderr).toContain('nosuch.fifo');
    expect(listed.stderr).toContain('--dlq-url');
    expect(listed.stderr).toContain('DLQ_URL');
  });

  it('dlq replay names the main queue flag, exit 2, and leaves the DLQ as it was', async () => {
    // Prepare
    await parkRefund('W-MAIN', 'RF-W-MAIN');
    const before = dlqVisible();
    // Act
    const replayed = await cli([
      'dlq',
      'replay',
      '--external-id',
      'W-MAIN',
      '--yes',
      '--queue-url',
      nosuch(),
    ]);
    // Assess
    expect(replayed.code).toBe(2);
    expect(replayed.stderr).toContain('nosuch.fifo');
    expect(replayed.stderr).toContain('--queue-url');
    expect(replayed.stderr).toContain('QUEUE_URL');
    expect(dlqVisible()).toBe(before);
  });
});

describe('connector status and reconcile show the whole reason', () => {
  it('status shows the skip reason of an order without affiliate signal whole', async () => {
    // Prepare
    const sent = await cli(['send', 'shopify', '--order-id', 'W-SKIP']);
    expect(sent.code, sent.stderr).toBe(0);
    await local.stack.waitForIdle();
    // Act
    const shown = await cli(['status', 'W-SKIP']);
    // Assess
    expect(shown.stdout).toContain('no affiliate signal (no click id, no affiliate tracking id)');
  });

  it('reconcile shows a stuck add’s detail whole, with the command that settles it', async () => {
    // Prepare: an add whose worker died 20 minutes ago, its message gone.
    const then = Date.now() - 20 * 60_000;
    await local.stack.ledger.create(
      record('W-STUCK', {
        state: 'adding',
        leaseOwner: 'a-worker-that-died',
        leaseUntil: then,
        updatedAt: new Date(then).toISOString(),
      }),
    );
    // Act
    const report = await cli(['reconcile', '--from', '1d']);
    // Assess
    expect(report.code).toBe(1);
    const row = report.stdout.split('\n').find((line) => line.startsWith('stuck_add')) ?? '';
    expect(row).toContain('connector reconcile --repair looks it up on the platform');
  });

  it('status of an unclear add whose message is gone points to reconcile --repair, not to a retry', async () => {
    // Prepare: the add got no clear answer a moment ago; nothing is left in the main queue.
    const now = Date.now();
    await local.stack.ledger.create(
      record('W-UNCLEAR', {
        state: 'adding',
        unclearAddAt: now - 5_000,
        leaseOwner: 'a-worker',
        leaseUntil: now + 60_000,
      }),
    );
    // Act
    const shown = await cli(['status', 'W-UNCLEAR'], { env: { ADD_VERIFY_SECONDS: '10' } });
    // Assess
    expect(shown.stdout).toContain('no clear answer');
    expect(shown.stdout).not.toContain('10 minutes');
    expect(shown.stdout).toContain('(ADD_VERIFY_SECONDS: 10 s)');
    expect(shown.stdout).toContain('no message in the main queue');
    expect(shown.stdout).toContain('--repair');
  });
});

describe('connector reservations of an order nobody knows', () => {
  it('says the ledger does not know the order (a mistyped id?), not only that nothing is reserved', async () => {
    // Act
    const listed = await cli(['reservations', 'W-NOBODY']);
    const json = await cli(['reservations', 'W-NOBODY', '--json']);
    // Assess
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain('order W-NOBODY is not in the ledger');
    expect(JSON.parse(json.stdout)).toMatchObject({ externalId: 'W-NOBODY', known: false });
  });
});

describe('connector doctor with the state file of a stack that was killed', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('tells to start the local stack for the queues and the ledger, not to check settings', async () => {
    // Prepare: every address of the file on a port where nothing listens any more.
    const dead = await new Promise<number>((resolve) => {
      const server = createServer();
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    const dir = mkdtempSync(join(tmpdir(), 'connector-stale-'));
    dirs.push(dir);
    const stale = JSON.stringify(localState(local.stack)).replace(
      /(127\.0\.0\.1|localhost):\d+/g,
      `127.0.0.1:${dead}`,
    );
    writeFileSync(join(dir, LOCAL_STATE_FILE), stale);
    // Act
    const doctor = await runCli(['doctor'], { cwd: dir });
    // Assess
    expect(doctor.code).toBe(1);
    const fixOf = (check: string) => {
      const lines = doctor.stdout.split('\n');
      const at = lines.findIndex((line) => line.startsWith(`✗ ${check} `));
      return lines[at + 1] ?? '';
    };
    for (const check of ['queue', 'dead-letter queue', 'ledger table']) {
      expect(fixOf(check), doctor.stdout).toContain('npm start');
      expect(fixOf(check)).not.toContain('AWS credentials');
    }
  }, 60_000);
});

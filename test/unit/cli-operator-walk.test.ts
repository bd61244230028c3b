import { describe, expect, it } from 'vitest';
import { cell } from '../../cli/io.ts';
import { run } from '../../cli/program.ts';
import { statusText } from '../../cli/status.ts';
import { runAccept } from '../../shared/accept/job.ts';
import { PermanentError } from '../../shared/errors.ts';
import type { OrderRecord } from '../../shared/ledger.ts';
import { acceptDeps, acceptingShop } from '../support/accept-deps.ts';
import { dueRecord } from '../support/due-record.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';
import { ScriptedPlatform } from '../support/scripted-accept-platform.ts';

/**
 * What a new operator read on the local stack and could not act on: texts cut before the part that
 * matters, a class name instead of the platform's words, a window that was not the one in effect.
 */
const PROGRAM = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const NOW = Date.parse('2026-11-23T12:00:00.000Z');
const CONVERSION = '65a1b2c3d4e5f60718293a4b';

function record(overrides: Partial<OrderRecord> = {}): OrderRecord {
  return {
    key: `${PROGRAM}#1001`,
    program: PROGRAM,
    externalId: '1001',
    source: 'shopify',
    state: 'added',
    version: 3,
    originalAmount: 5000,
    currentAmount: 5000,
    currency: 'EUR',
    refunds: {},
    createdAt: '2026-05-01T10:00:00.000Z',
    updatedAt: '2026-05-02T10:00:00.000Z',
    ...overrides,
  };
}

async function acceptOnce(platform: ScriptedPlatform, due: OrderRecord) {
  const ledger = new MemoryLedger(() => NOW);
  await ledger.create(structuredClone(due));
  const { deps, parked } = acceptDeps(ledger, platform, acceptingShop(PROGRAM), () => NOW);
  const run = await runAccept(deps, { limit: 10 });
  return { run, parked };
}

describe('the accept job’s reasons, as connector accept prints them', () => {
  it('a refused accept names the platform’s status and message within what the line shows, not a class name', async () => {
    // Prepare: the sandbox's own refusal, as the HTTP core words it.
    const message = `conversion ${CONVERSION} is refused and can no longer be accepted`;
    const platform = new ScriptedPlatform(
      () =>
        new PermanentError(
          `conversions.accept (POST /advertiser/conversions.accept) answered 422: ${message}`,
          {
            status: 422,
            platformMessage: message,
          },
        ),
    );
    // Act
    const { run, parked } = await acceptOnce(
      platform,
      dueRecord(PROGRAM, '1001', NOW, 40, { conversionId: `conv-1001` }),
    );
    // Assess: connector accept prints the detail cut at 120 characters.
    const [item] = run.items;
    expect(item?.result).toBe('failed');
    const shown = cell(item?.detail, 120);
    expect(shown).toContain(`422: ${message}`);
    expect(item?.detail).not.toContain('PermanentError');
    expect(parked[0]?.reason).not.toContain('PermanentError');
    expect(parked[0]?.reason).toContain('once handled, discard it');
  });

  it('a refund pending holds the conversion and says where that refund may be parked', async () => {
    // Prepare
    const due = dueRecord(PROGRAM, '1001', NOW, 40, {
      refunds: {
        'RF-1': {
          refundId: 'RF-1',
          origin: 'finance',
          amount: 100,
          full: false,
          status: 'pending',
          receivedAt: new Date(NOW - 3_600_000).toISOString(),
        },
      },
    });
    // Act
    const { run } = await acceptOnce(new ScriptedPlatform(), due);
    // Assess
    expect(run.items[0]?.result).toBe('held');
    expect(run.items[0]?.detail).toContain('refund RF-1 is pending');
    expect(run.items[0]?.detail).toContain('connector dlq list --external-id 1001');
  });
});

describe('connector status, the ledger’s reason', () => {
  it('shows a skip reason whole', () => {
    // Act
    const text = statusText({
      program: PROGRAM,
      externalId: '1001',
      record: record({
        state: 'skipped',
        skipReason: 'no affiliate signal (no click id, no affiliate tracking id)',
      }),
      conversion: undefined,
      differences: [],
    });
    // Assess
    expect(text).toContain('no affiliate signal (no click id, no affiliate tracking id)');
  });

  it('shows the platform’s reason of an error whole, past the route called', () => {
    // Prepare
    const error =
      'conversions.add (POST /advertiser/conversions.add) answered 422: rule 5ad000000000000000000202 is ' +
      'not active in program 5ad000000000000000000101 since 2026-04-30';
    // Act
    const text = statusText({
      program: PROGRAM,
      externalId: '1001',
      record: record({ state: 'failed', lastError: error }),
      conversion: undefined,
      differences: [],
    });
    // Assess
    expect(text).toContain('is not active in program 5ad000000000000000000101 since 2026-04-30');
  });
});

describe('connector status of an add without a clear answer', () => {
  const unclear = () => ({
    program: PROGRAM,
    externalId: '1001',
    record: record({
      state: 'adding',
      unclearAddAt: Date.parse('2026-05-01T10:00:00Z'),
      leaseUntil: Date.parse('2026-05-01T10:00:10Z'),
    }),
    conversion: undefined,
    differences: [],
  });

  it('states no window it does not know', () => {
    // Act
    const text = statusText(unclear());
    // Assess
    expect(text).not.toContain('10 minutes by default');
    expect(text).toContain('ADD_VERIFY_SECONDS');
  });

  it('states the window in effect when it is given', () => {
    // Act
    const text = statusText(unclear(), { verifyWindowSeconds: 10 });
    // Assess
    expect(text).toContain('10 s');
    expect(text).toContain('2026-05-01T10:00:10.000Z');
    expect(text).not.toContain('minutes');
  });

  it('with no message in the queue, does not promise a retry and points to reconcile --repair', () => {
    // Act
    const text = statusText(unclear(), { queuedMessages: 0 });
    // Assess
    expect(text).not.toContain('the worker asks the platform again');
    expect(text).toContain('connector reconcile');
    expect(text).toContain('--repair');
    expect(text).toContain('connector dlq list --external-id 1001');
  });
});

describe('an unknown command', () => {
  const io = () => {
    const out = { stdout: '', stderr: '' };
    return {
      out,
      io: {
        stdout: { write: (t: string) => (out.stdout += t) },
        stderr: { write: (t: string) => (out.stderr += t) },
        env: {},
        cwd: '/nonexistent',
      },
    };
  };

  it('with --help is an unknown command (exit 2), not the top-level help', async () => {
    // Prepare
    const top = io();
    const sub = io();
    // Act
    const topCode = await run(['stuck', '--help'], top.io);
    const subCode = await run(['dlq', 'lists', '-h'], sub.io);
    // Assess
    expect(topCode).toBe(2);
    expect(top.out.stderr).toContain("unknown command 'stuck'");
    expect(top.out.stdout).toBe('');
    expect(subCode).toBe(2);
    expect(sub.out.stderr).toContain("unknown command 'lists'");
  });

  it('leaves the help of known commands as it was (exit 0)', async () => {
    // Prepare
    const a = io();
    const b = io();
    const c = io();
    // Act
    const codes = [
      await run(['dlq', 'list', '--help'], a.io),
      await run(['help', 'dlq'], b.io),
      await run(['--help'], c.io),
    ];
    // Assess
    expect(codes).toEqual([0, 0, 0]);
    expect(a.out.stdout).toContain('Usage: connector dlq list');
    expect(b.out.stdout).toContain('Usage: connector dlq');
    expect(c.out.stdout).toContain('Usage: connector');
  });
});

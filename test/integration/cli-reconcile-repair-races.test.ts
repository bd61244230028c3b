import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { localStateDir, runCli } from '../support/cli.ts';
import { CLICK } from '../support/events.ts';
import { postRefund } from '../support/finance-refunds.ts';
import { sandboxConversions } from '../support/sandbox.ts';

/**
 * `reconcile --repair` attacked as an operator under pressure and as a race would: the order's
 * message still queued, a refund reserved meanwhile, two repairs at once, a pixel's conversion at
 * another amount, the platform failing halfway. Each ends with one conversion per order, no refund
 * lost or counted twice, and an exit code and output that say what was and was not settled.
 */
const IP = '203.0.113.7';
const LONG_AGO = 20 * 60_000;
const startedAt = new Date(Date.now() - 2 * 3_600_000).toISOString();

interface World {
  readonly stack: LocalStack;
  readonly program: string;
  cli(argv: readonly string[], env?: Record<string, string>): ReturnType<typeof runCli>;
  record(externalId: string): Promise<OrderRecord | undefined>;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function world(): Promise<World> {
  const stack = await startLocalStack({ port: 0, sandbox: { port: 0 }, visibilityBaseSeconds: 1 });
  const state = localStateDir(stack);
  cleanups.push(
    () => stack.close(),
    () => state.remove(),
  );
  const program = stack.sources.get('generic')?.program ?? '';
  return {
    stack,
    program,
    cli: (argv, env) => runCli(argv, { cwd: state.dir, ...(env ? { env } : {}) }),
    record: (externalId) => stack.ledger.get(ledgerKey(program, externalId)),
  };
}

/** As a worker leaves an order it died adding (its message gone or not): `adding`, lease long over. */
function stuck(program: string, externalId: string, fields: Partial<OrderRecord> = {}): OrderRecord {
  const then = Date.now() - LONG_AGO;
  return {
    key: ledgerKey(program, externalId),
    program,
    externalId,
    source: 'generic',
    state: 'adding',
    version: 0,
    kind: 'tracking',
    originalAmount: 4990,
    currentAmount: 4990,
    currency: 'EUR',
    refunds: {},
    leaseOwner: 'a-worker-that-died',
    leaseUntil: then,
    createdAt: new Date(then).toISOString(),
    updatedAt: new Date(then).toISOString(),
    ...fields,
  };
}

/** Makes the record of an order the worker added look as if its worker died before recording it. */
async function diedAfterAdd(w: World, externalId: string): Promise<void> {
  const added = await w.record(externalId);
  if (added?.state !== 'added') throw new Error(`${externalId} not added: ${JSON.stringify(added)}`);
  const { version, ...rest } = stuck(w.program, externalId);
  await w.stack.ledger.update({ ...added, ...rest, version: added.version, conversionId: undefined });
}

const sendOrder = async (w: World, externalId: string) => {
  const sent = await w.cli(['send', 'generic', '--order-id', externalId, '--click-id', CLICK, '--ip', IP]);
  if (sent.code !== 0) throw new Error(sent.stdout + sent.stderr);
};

describe('reconcile --repair of an order the pixel added (the platform has a conversion the ledger never recorded)', () => {
  it('adopts it, but says the refund held for the order is not applied and exits 1, instead of "repaired"', async () => {
    // Prepare: finance refunded 10.00 before the order came; a worker took the order (49.90 less
    // that refund: 39.90) and died before its add went out. The shop's pixel recorded 49.90.
    const w = await world();
    await w.stack.ledger.create(
      stuck(w.program, '7301', {
        currentAmount: 3990,
        refunds: {
          'RF-7301': {
            refundId: 'RF-7301',
            amount: 1000,
            full: false,
            origin: 'finance',
            status: 'pending',
            receivedAt: startedAt,
          },
        },
        awaitingSince: startedAt,
      }),
    );
    const pixel = w.stack.sandbox?.control.seedConversion({
      program: w.program,
      externalId: '7301',
      amount: 4990,
    });

    // Act
    const repaired = await w.cli(['reconcile', '--from', startedAt, '--repair', '--yes']);

    // Assess: the conversion is the order's, yet 49.90 stands on it where 39.90 is due.
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(1);
    expect(repaired.stdout).toMatch(/7301\s+added: the platform has conversion \S+/);
    expect(repaired.stdout).toContain('1 refund held for the order not applied');
    expect(repaired.stdout).toContain('send the order again or replay it');
    const after = await w.record('7301');
    expect(after).toMatchObject({ state: 'added', conversionId: pixel?.id, currentAmount: 4990 });
    expect(after?.refunds['RF-7301']?.status).toBe('pending');

    // The advice holds: the order sent again applies the refund to the pixel's conversion, once.
    await sendOrder(w, '7301');
    await w.stack.waitForIdle();
    expect(sandboxConversions(w.stack, '7301').map((c) => c.amount)).toEqual([3990]);
    expect((await w.record('7301'))?.refunds['RF-7301']?.status).toBe('applied');
    expect((await w.cli(['reconcile', '--from', startedAt])).code).toBe(0);
  });
});

describe('reconcile --repair while the order is still in the worker’s hands', () => {
  it('adds the order once when its message is still queued behind the repair', async () => {
    // Prepare: 7401's add never reached the platform; 7402's did. Both messages still queued.
    const w = await world();
    await w.stack.stopPolling();
    await w.stack.ledger.create(stuck(w.program, '7401'));
    await w.stack.ledger.create(stuck(w.program, '7402'));
    w.stack.sandbox?.control.seedConversion({ program: w.program, externalId: '7402', amount: 4990 });
    await sendOrder(w, '7401');
    await sendOrder(w, '7402');

    // Act
    const repaired = await w.cli(['reconcile', '--from', startedAt, '--repair', '--yes']);
    w.stack.startPolling();
    await w.stack.waitForIdle();

    // Assess: at the repair 7401 had no conversion (failed, exit 1); its queued message added it.
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(1);
    expect(repaired.stdout).toMatch(/^7401: failed: no conversion on the platform/m);
    expect(sandboxConversions(w.stack, '7401')).toHaveLength(1);
    expect(sandboxConversions(w.stack, '7402')).toHaveLength(1);
    expect((await w.record('7401'))?.state).toBe('added');
    expect((await w.record('7402'))?.state).toBe('added');
    expect((await w.cli(['reconcile', '--from', startedAt])).code).toBe(0);
  });

  it('loses no refund reserved by POST /refunds while the add was stuck, and counts it once', async () => {
    // Prepare: 7501 added, its worker's record left `adding`; finance refunds 10.00 meanwhile, and
    // the worker retries that refund (the order's add is "still being added").
    const w = await world();
    await sendOrder(w, '7501');
    await w.stack.waitForIdle();
    await diedAfterAdd(w, '7501');
    const reserved = await postRefund(w.stack, { externalId: '7501', refundId: 'RF-7501', amount: '10.00' });
    expect(reserved.status, reserved.text).toBe(202);

    // Act
    const repaired = await w.cli(['reconcile', '--from', startedAt, '--repair', '--yes']);
    await w.stack.waitForIdle();

    // Assess
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    expect(sandboxConversions(w.stack, '7501').map((c) => c.amount)).toEqual([3990]);
    const after = await w.record('7501');
    expect(after?.refunds['RF-7501']).toMatchObject({ status: 'applied', resultingAmount: 3990 });
    expect((await w.cli(['reservations', '7501', '--json'])).stdout).not.toContain('RF-7501');
    expect((await w.cli(['reconcile', '--from', startedAt])).code).toBe(0);
  });

  it('writes each stuck add once when two repairs run at once, and neither claims the other’s work', async () => {
    // Prepare
    const w = await world();
    await w.stack.ledger.create(stuck(w.program, '7601'));
    await w.stack.ledger.create(stuck(w.program, '7602'));
    w.stack.sandbox?.control.seedConversion({ program: w.program, externalId: '7602', amount: 4990 });
    const versions = async () => [(await w.record('7601'))?.version, (await w.record('7602'))?.version];
    const before = await versions();

    // Act
    const runs = await Promise.all([
      w.cli(['reconcile', '--from', startedAt, '--repair', '--yes']),
      w.cli(['reconcile', '--from', startedAt, '--repair', '--yes']),
    ]);

    // Assess: one write per record, and between the two runs each record is told repaired once.
    expect(await versions()).toEqual(before.map((v) => (v ?? 0) + 1));
    const told = runs.map((r) => r.stdout).join('\n');
    expect(told.match(/repaired (\d+) stuck add/g)?.map((m) => Number(m.match(/\d+/)?.[0]))).toSatisfy(
      (counts: number[]) => counts.reduce((a, b) => a + b, 0) === 2,
    );
    // The run that lost says another writer may have been a repair like itself, not only a worker.
    for (const r of runs.filter((run) => !run.stdout.includes('repaired 2 stuck adds'))) {
      expect(r.stdout).toMatch(/760[12]: unchanged: .*(by a worker or another repair)/);
    }
    expect(sandboxConversions(w.stack, '7602')).toHaveLength(1);
    expect(sandboxConversions(w.stack, '7601')).toHaveLength(0);
    expect((await w.record('7601'))?.state).toBe('failed');
    expect((await w.record('7602'))?.state).toBe('added');
  });
});

/** The sandbox behind a proxy that answers 503 to every Conversion info from the `failFrom`-th on. */
async function failingInfoProxy(target: string, failFrom: number): Promise<string> {
  let infos = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      if (req.url?.startsWith('/advertiser/conversions.info') && ++infos >= failFrom) {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ statusCode: 503, error: 'Service Unavailable', message: 'try later' }));
        return;
      }
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers)) {
        if (typeof value === 'string' && name !== 'host' && name !== 'connection') headers[name] = value;
      }
      const answer = await fetch(`${target}${req.url}`, {
        method: req.method,
        headers,
        ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
      });
      const body = Buffer.from(await answer.arrayBuffer());
      res.writeHead(answer.status, {
        'content-type': answer.headers.get('content-type') ?? 'application/json',
      });
      res.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('reconcile --repair with the platform failing halfway', () => {
  it('tells which stuck adds it repaired before the failure and which it did not, exit 1', async () => {
    // Prepare: two stuck adds whose conversions went through. The plan looks both up (infos 1 and
    // 2), the repair looks 7701 up again (3) and writes it; from the 4th on the platform answers 503.
    const w = await world();
    await w.stack.ledger.create(stuck(w.program, '7701'));
    await w.stack.ledger.create(stuck(w.program, '7702'));
    for (const externalId of ['7701', '7702'])
      w.stack.sandbox?.control.seedConversion({ program: w.program, externalId, amount: 4990 });
    const proxy = await failingInfoProxy(w.stack.platformUrl, 4);

    // Act
    const repaired = await w.cli(['reconcile', '--from', startedAt, '--repair', '--yes'], {
      AFFILIATE_BASE_URL: proxy,
      AFFILIATE_TOKEN: w.stack.sandbox?.token ?? '',
    });

    // Assess
    const told = repaired.stdout + repaired.stderr;
    expect(repaired.code, told).toBe(1);
    expect((await w.record('7701'))?.state).toBe('added');
    expect((await w.record('7702'))?.state).toBe('adding');
    expect(told).toContain('repaired 1 stuck add');
    expect(told).toMatch(/7702: not repaired: .*503/);
  });
});

describe('reconcile --repair with the platform failing while the conversions are read', () => {
  it('repairs nothing on a list it could not read, and says why (exit 1)', async () => {
    // Prepare
    const w = await world();
    await w.stack.ledger.create(stuck(w.program, '7711'));
    w.stack.sandbox?.control.setFaults({ errorRate: 1, routes: ['/advertiser/conversions.list'] });

    // Act
    const repaired = await w.cli(['reconcile', '--from', startedAt, '--repair', '--yes']);

    // Assess
    expect(repaired.code).toBe(1);
    expect(repaired.stderr).toMatch(/error: conversions\.list .*503/);
    expect((await w.record('7711'))?.state).toBe('adding');
  });
});

describe('reconcile --repair of an add without a clear answer, its verification window still running', () => {
  it('leaves it to the worker holding it: not listed, not looked up, not written', async () => {
    // Prepare: the worker's add timed out a minute ago; it holds the order until the window ends.
    const w = await world();
    const now = Date.now();
    await w.stack.ledger.create(
      stuck(w.program, '7721', {
        leaseOwner: 'a-worker-waiting-for-the-platform',
        leaseUntil: now + 9 * 60_000,
        unclearAddAt: now - 60_000,
      }),
    );
    const before = await w.record('7721');

    // Act
    const repaired = await w.cli(['reconcile', '--from', startedAt, '--repair', '--yes']);

    // Assess
    expect(repaired.code, repaired.stdout + repaired.stderr).toBe(0);
    expect(repaired.stdout).toContain('✓ no differences');
    expect(await w.record('7721')).toEqual(before);
    expect(w.stack.sandbox?.control.calls()['/advertiser/conversions.info']).toBeUndefined();
  });
});

describe('reconcile --repair --dry-run', () => {
  it('changes nothing on the platform nor in the ledger, whatever it plans', async () => {
    // Prepare
    const w = await world();
    await w.stack.ledger.create(stuck(w.program, '7801'));
    w.stack.sandbox?.control.seedConversion({ program: w.program, externalId: '7801', amount: 4990 });
    const before = await w.record('7801');
    const writes = () =>
      Object.entries(w.stack.sandbox?.control.calls() ?? {})
        .filter(([route]) => !/conversions\.(list|info)|advertisers\.me/.test(route))
        .reduce((sum, [, c]) => sum + c.total, 0);

    // Act
    const dry = await w.cli(['reconcile', '--from', startedAt, '--repair', '--dry-run']);
    const plain = await w.cli(['reconcile', '--from', startedAt]);

    // Assess
    expect(dry.code).toBe(1);
    expect(plain.code).toBe(1);
    expect(writes()).toBe(0);
    expect(await w.record('7801')).toEqual(before);
    expect(w.stack.sandbox?.control.conversions()).toHaveLength(1);
  });
});

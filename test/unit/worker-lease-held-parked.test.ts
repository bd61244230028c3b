import { describe, expect, it } from 'vitest';
import { ledgerKey } from '../../shared/ledger.ts';
import type { AddConversionInput, ConversionBackend, PlatformConversion } from '../../shared/ports.ts';
import { processBatch } from '../../shared/worker/batch.ts';
import { newRecord } from '../../shared/worker/flow.ts';
import { batchHarness, orderPlaced, PROGRAM, SOURCE, START, sqsRecord } from '../support/batch-harness.ts';

/**
 * An order whose ledger record is `adding` under a lease that has not ended: a worker is adding it,
 * or its add got no clear answer and the platform may still record it. A delivery of the order that
 * finds the lease held waits; when that is its queue's last receive, it is parked. The add under the
 * lease may well have gone through: the operator must replay the message (the ledger then adopts or
 * adds, once), never add the order by hand, which would make a second conversion.
 */

const MAX_RECEIVES = 6;

/** The platform, holding the conversions it was given; counts the adds. */
class Platform implements ConversionBackend {
  readonly adds: AddConversionInput[] = [];
  readonly stored = new Map<string, PlatformConversion>();

  async add(input: AddConversionInput): Promise<{ id: string | undefined }> {
    this.adds.push(input);
    const id = `conv-${this.stored.size + 1}`;
    this.stored.set(input.externalId, {
      id,
      externalId: input.externalId,
      amount: input.amount,
      status: 'pending',
    });
    return { id };
  }

  async find(_program: string, externalId: string): Promise<PlatformConversion | undefined> {
    return this.stored.get(externalId);
  }

  async updateAmount(): Promise<void> {}
  async refuse(): Promise<void> {}
  async accept(): Promise<void> {}
}

describe('an order parked on its last receive because the ledger’s lease on its add is held', () => {
  it.each([
    ['another worker', 'worker-2'],
    ['this worker, after an add without a clear answer', 'worker-1'],
  ])(
    'held by %s: the reason says that add may have gone through, to replay and not to add by hand',
    async (_who, leaseOwner) => {
      // Prepare: the lease runs past this invocation's deadline, so it cannot be waited out inline.
      const platform = new Platform();
      const h = batchHarness(platform, { maxReceiveCount: MAX_RECEIVES });
      await h.ledger.create(
        newRecord(h.deps, SOURCE, '1001', {
          state: 'adding',
          originalAmount: 2000,
          currentAmount: 2000,
          currency: 'EUR',
          leaseOwner,
          leaseUntil: START + 120_000,
        }),
      );
      const record = sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES });

      // Act
      const response = await h.clock.run(processBatch(h.deps, [record], START + 30_000));

      // Assess
      expect(response.batchItemFailures).toEqual([]);
      expect(platform.adds).toEqual([]);
      const reason = h.failures.parked[0]?.failure.reason ?? '';
      expect(reason).toMatch(
        /^gave up after 6 receives \(the queue's maxReceiveCount\), still failing transiently; /,
      );
      expect(reason).toMatch(/may have (been )?added|may have gone through/);
      expect(reason).toMatch(/replay it.*the ledger (adds|applies) (it|the order) once/);
      expect(reason).toMatch(/do not add (it|the order) by hand/);
    },
  );

  it('is added once when replayed, the add under the lease having gone through', async () => {
    // Prepare: another worker's add reached the platform, and that worker died before writing the ledger.
    const platform = new Platform();
    platform.stored.set('1001', { id: 'conv-other', externalId: '1001', amount: 2000, status: 'pending' });
    const h = batchHarness(platform, { maxReceiveCount: MAX_RECEIVES });
    await h.ledger.create(
      newRecord(h.deps, SOURCE, '1001', {
        state: 'adding',
        originalAmount: 2000,
        currentAmount: 2000,
        currency: 'EUR',
        leaseOwner: 'worker-2',
        leaseUntil: START + 120_000,
      }),
    );
    await h.clock.run(
      processBatch(
        h.deps,
        [sqsRecord('m1', orderPlaced('1001'), { receiveCount: MAX_RECEIVES })],
        START + 30_000,
      ),
    );
    const parked = h.failures.parked[0];

    // Act: `dlq replay` once the lease has ended.
    h.clock.time = START + 120_001;
    const replay = {
      ...sqsRecord('m2', orderPlaced('1001'), { receiveCount: 1 }),
      body: parked?.message.body ?? '',
    };
    const response = await h.clock.run(processBatch(h.deps, [replay], START + 150_000));

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(platform.adds).toEqual([]);
    expect(await h.ledger.get(ledgerKey(PROGRAM, '1001'))).toMatchObject({
      state: 'added',
      conversionId: 'conv-other',
    });
  });
});

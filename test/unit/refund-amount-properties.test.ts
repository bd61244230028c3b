import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { BasisLine, ConnectorEvent, ConnectorEventInput } from '../../shared/domain/events.ts';
import { countedRefunds, ledgerKey } from '../../shared/ledger.ts';
import type { AddConversionInput, ConversionBackend, PlatformConversion } from '../../shared/ports.ts';
import type { WorkerDeps } from '../../shared/worker/flow.ts';
import { processEvent } from '../../shared/worker/process-event.ts';
import { CLICK, workerEvent } from '../support/events.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/**
 * The worker's property over money: whatever refunds an order gets (its lines, a gross, a finance
 * amount), in whatever order with the order anywhere among them, after each one the conversion on
 * the platform and the ledger's current amount are the order's amount minus the counted refunds, or
 * the conversion is refused once they reach it. In memory: the ledger and a platform fake.
 */

const PROGRAM = '5ad000000000000000000101';
const NOW = Date.parse('2026-05-01T10:00:00.000Z');
const SOURCE = SourceConfig.parse({
  id: 'shop',
  platform: 'generic',
  program: PROGRAM,
  rule: '5ad000000000000000000201',
  secretRef: 'SHOP_SECRET',
});

/** The platform's conversions by external id: amount and status only. */
class Platform implements ConversionBackend {
  readonly conversions = new Map<
    string,
    { id: string; amount: number; status: PlatformConversion['status'] }
  >();

  async add(input: AddConversionInput): Promise<{ id: string }> {
    const id = `c${String(this.conversions.size + 1).padStart(23, '0')}`;
    this.conversions.set(input.externalId, { id, amount: input.amount, status: 'pending' });
    return { id };
  }
  async find(_program: string, externalId: string): Promise<PlatformConversion | undefined> {
    const c = this.conversions.get(externalId);
    return (
      c && { id: c.id, externalId, amount: c.amount, currency: 'EUR', status: c.status, isLocked: false }
    );
  }
  async updateAmount(_program: string, id: string, amount: number): Promise<void> {
    for (const c of this.conversions.values()) if (c.id === id) c.amount = amount;
  }
  async refuse(_program: string, id: string): Promise<void> {
    for (const c of this.conversions.values()) if (c.id === id) c.status = 'refused';
  }
  async accept(): Promise<void> {}
}

const lines = fc
  .uniqueArray(
    fc.record({
      unitNet: fc.integer({ min: 1, max: 30_000 }),
      unitTax: fc.integer({ min: 0, max: 6_000 }),
      quantity: fc.integer({ min: 1, max: 4 }),
    }),
    { minLength: 1, maxLength: 4, selector: (l) => l.unitNet + l.unitTax },
  )
  .map((ls) =>
    ls.map(
      (l, i): BasisLine => ({
        id: `${900 + i}`,
        net: l.unitNet * l.quantity,
        tax: l.unitTax * l.quantity,
        quantity: l.quantity,
      }),
    ),
  );

/** One refund: units of a line named, their gross alone, or a net amount from finance. */
const refundKind = fc.record({
  kind: fc.constantFrom('lines', 'gross', 'finance'),
  line: fc.nat(),
  quantity: fc.integer({ min: 1, max: 4 }),
  amount: fc.integer({ min: 1, max: 20_000 }),
});

describe('the conversion after refunds', () => {
  it('is the order’s amount minus the counted refunds after every refund, or refused once they reach it', async () => {
    await fc.assert(
      fc.asyncProperty(
        lines,
        fc.array(refundKind, { minLength: 1, maxLength: 6 }),
        fc.nat(),
        async (orderLines, refunds, orderAt) => {
          // Prepare
          const ledger = new MemoryLedger(() => NOW);
          const platform = new Platform();
          const deps: WorkerDeps = {
            ledger,
            sources: new Map([[SOURCE.id, SOURCE]]),
            backendFor: () => platform,
            now: () => NOW,
            workerId: 'w1',
            leaseMs: 60_000,
          };
          const amount = orderLines.reduce((s, l) => s + l.net, 0);
          const event = (fields: Partial<ConnectorEventInput> & Pick<ConnectorEventInput, 'type'>) =>
            workerEvent('shop', fields);
          const order = event({
            type: 'OrderPlaced',
            amount,
            currency: 'EUR',
            clickIds: [CLICK],
            buyerIp: '198.51.100.4',
            basis: {
              taxesIncluded: false,
              net: amount,
              tax: orderLines.reduce((s, l) => s + l.tax, 0),
              shipping: 500,
              lines: orderLines,
            },
          });
          const refundEvents = refunds.map((r, j): ConnectorEvent => {
            const line = orderLines[r.line % orderLines.length]!;
            const unitGross = (line.net + line.tax) / line.quantity;
            const base = { type: 'OrderRefunded' as const, refundId: `rf-${j}`, currency: 'EUR' };
            if (r.kind === 'finance') return event({ ...base, origin: 'finance', amount: r.amount });
            if (r.kind === 'gross') {
              const gross = unitGross * Math.min(r.quantity, line.quantity);
              return event({ ...base, amount: gross, gross });
            }
            return event({ ...base, amount: r.amount, lines: [{ id: line.id, quantity: r.quantity }] });
          });
          const at = orderAt % (refundEvents.length + 1);
          const deliveries = [...refundEvents.slice(0, at), order, ...refundEvents.slice(at)];
          // Act / Assess: after each delivery once the order is in
          for (const [i, delivery] of deliveries.entries()) {
            await processEvent(deps, delivery);
            if (i < at) continue;
            const record = (await ledger.get(ledgerKey(PROGRAM, '1001')))!;
            const counted = countedRefunds(record).reduce((s, r) => s + r.amount, 0);
            const left = record.originalAmount - counted;
            const conversion = platform.conversions.get('1001');
            expect(record.originalAmount).toBe(amount);
            if (left <= 0) {
              expect(record.currentAmount).toBe(0);
              expect(record.state === 'refused' || record.state === 'skipped').toBe(true);
              expect(conversion === undefined || conversion.status === 'refused').toBe(true);
            } else {
              expect(record.currentAmount).toBe(left);
              expect(conversion).toMatchObject({ amount: left, status: 'pending' });
            }
            if (record.state === 'refused') break;
          }
        },
      ),
      { numRuns: 150, seed: 1906 },
    );
  });
});

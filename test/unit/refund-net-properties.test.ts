import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { BasisLine, RefundBasis, RefundLine } from '../../shared/domain/events.ts';
import type { OrderRecord, RefundRecord } from '../../shared/ledger.ts';
import { HELD_RULES, netHeldRefunds, netRefund } from '../../shared/worker/refund-net.ts';

/**
 * Properties of turning refunds net against the order's recorded lines (docs/refund-amounts.md),
 * at the level of `netRefund` (the case-by-case examples are in refund-net.test.ts, the end-to-end
 * property per platform in test/integration/refund-properties.test.ts). Fixed seeds.
 */

const RUNS = { numRuns: 300 } as const;
const roundDiv = (a: number, b: number) => Math.floor((2 * a + b) / (2 * b));

/** Order lines: any net and tax (discounts spread unevenly over the units), 1 to 6 units. */
const basisLines = fc
  .array(
    fc.record({
      net: fc.integer({ min: 0, max: 200_000 }),
      tax: fc.integer({ min: 0, max: 40_000 }),
      quantity: fc.integer({ min: 1, max: 6 }),
    }),
    { minLength: 1, maxLength: 5 },
  )
  .map((lines) => lines.map((l, i): BasisLine => ({ id: `${14_000_000_000_000 + i}`, ...l })));

/** Lines of a few minor units each (samples, small parts), some of many units. */
const cheapLines = fc
  .array(
    fc.record({
      net: fc.integer({ min: 0, max: 5 }),
      tax: fc.integer({ min: 0, max: 2 }),
      quantity: fc.oneof(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 10 ** 9 })),
    }),
    { minLength: 1, maxLength: 3 },
  )
  .map((lines) => lines.map((l, i): BasisLine => ({ id: `${77 + i}`, ...l })));

function basisOf(lines: readonly BasisLine[], taxesIncluded: boolean): RefundBasis {
  return {
    taxesIncluded,
    net: lines.reduce((s, l) => s + l.net, 0),
    tax: lines.reduce((s, l) => s + l.tax, 0),
    shipping: 490,
    lines: [...lines],
    truncated: false,
  };
}

/**
 * Every unit of every line given to one of `count` refunds, in the refunds' order: quantities per
 * refund per line. `owners[i][u]` picks the refund of unit u of line i.
 */
const splits = fc.record({
  count: fc.integer({ min: 1, max: 6 }),
  owners: fc.array(fc.array(fc.nat(), { minLength: 6, maxLength: 6 }), { minLength: 5, maxLength: 5 }),
});
function split(lines: readonly BasisLine[], { count, owners }: { count: number; owners: number[][] }) {
  return Array.from({ length: count }, (_, j) =>
    lines.map((l, i) => owners[i]!.slice(0, l.quantity).filter((o) => o % count === j).length),
  ).filter((perLine) => perLine.some((q) => q > 0));
}

let n = 0;
function refund(fields: Partial<RefundRecord>): RefundRecord {
  n += 1;
  return {
    refundId: `r${n}`,
    amount: 0,
    full: false,
    origin: 'shop',
    receivedAt: new Date(Date.UTC(2026, 2, 2, 10, 0, 0, n)).toISOString(),
    status: 'pending',
    ...fields,
  };
}

/** Nets each refund against those before it, as the worker records them one after the other. */
function netInTurn(basis: RefundBasis, refunds: readonly RefundRecord[]): RefundRecord[] {
  const done: RefundRecord[] = [];
  for (const next of refunds) {
    netRefund(basis, next, done);
    done.push(next);
  }
  return done;
}

function expectEndsAtZero(basis: RefundBasis, done: readonly RefundRecord[]): void {
  let total = 0;
  for (const r of done) {
    expect(Number.isSafeInteger(r.amount) && r.amount >= 0).toBe(true);
    total += r.amount;
    expect(total).toBeLessThanOrEqual(basis.net);
  }
  expect(total).toBe(basis.net);
}

describe('refunds naming the order’s lines', () => {
  it('add up to the order’s amount exactly however the units are split, never passing it on the way', () => {
    fc.assert(
      fc.property(basisLines, fc.boolean(), splits, (lines, taxesIncluded, how) => {
        // Prepare: a refund per group of units, each line named once or (units one by one) several times
        const basis = basisOf(lines, taxesIncluded);
        const refunds = split(lines, how).map((perLine, j) =>
          refund({
            amount: 999_999,
            lines: lines.flatMap((l, i): RefundLine[] => {
              const q = perLine[i]!;
              if (q === 0) return [];
              return j % 2 === 0 || q === 1
                ? [{ id: l.id, quantity: q }]
                : [
                    { id: l.id, quantity: 1 },
                    { id: l.id, quantity: q - 1 },
                  ];
            }),
          }),
        );
        // Act
        const done = netInTurn(basis, refunds);
        // Assess
        expectEndsAtZero(basis, done);
      }),
      { ...RUNS, seed: 1901 },
    );
  });

  it('add up to the order’s amount when each line also states the money the shop gave it back (Shopify)', () => {
    fc.assert(
      fc.property(basisLines, fc.boolean(), splits, (lines, taxesIncluded, how) => {
        // Prepare: Shopify's `subtotal` and `total_tax` of q units of a line, each its share of the
        // line's money rounded on its own (in the order's pricing: with the tax when it is included)
        const basis = basisOf(lines, taxesIncluded);
        const refunds = split(lines, how).map((perLine) =>
          refund({
            lines: lines.flatMap((l, i): RefundLine[] => {
              const q = perLine[i]!;
              if (q === 0) return [];
              const money = taxesIncluded ? l.net + l.tax : l.net;
              return [
                {
                  id: l.id,
                  quantity: q,
                  amount: roundDiv(money * q, l.quantity),
                  tax: roundDiv(l.tax * q, l.quantity),
                },
              ];
            }),
          }),
        );
        // Act
        const done = netInTurn(basis, refunds);
        // Assess
        expectEndsAtZero(basis, done);
      }),
      { numRuns: 1000, seed: 1902 },
    );
  });

  it('are turned net the same when held before their order and netted on its arrival', () => {
    fc.assert(
      fc.property(basisLines, fc.boolean(), splits, (lines, taxesIncluded, how) => {
        // Prepare
        const basis = basisOf(lines, taxesIncluded);
        const make = () =>
          split(lines, how).map((perLine, j) =>
            refund({
              refundId: `held-${j}`,
              receivedAt: `2026-03-02T10:00:${String(j).padStart(2, '0')}.000Z`,
              lines: lines.flatMap((l, i) => (perLine[i]! > 0 ? [{ id: l.id, quantity: perLine[i]! }] : [])),
            }),
          );
        const inTurn = netInTurn(basis, make());
        const held = make().map((r) => ({ ...r, amountFrom: HELD_RULES }));
        // Delivered in reverse: the map's order is not the order of receipt.
        const record = {
          refundBasis: basis,
          refunds: Object.fromEntries([...held].reverse().map((r) => [r.refundId, r])),
        } as unknown as OrderRecord;
        // Act
        netHeldRefunds(record);
        // Assess
        expect(held.map((r) => record.refunds[r.refundId]?.amount)).toEqual(inTurn.map((r) => r.amount));
        expectEndsAtZero(basis, held);
      }),
      { ...RUNS, seed: 1903 },
    );
  });
});

describe('refunds stating only their gross', () => {
  /** Lines priced per unit (net and tax of one unit), with unit grosses no two lines share. */
  const unitLines = fc
    .uniqueArray(
      fc.record({
        unitNet: fc.integer({ min: 1, max: 50_000 }),
        unitTax: fc.integer({ min: 0, max: 10_000 }),
        quantity: fc.integer({ min: 1, max: 6 }),
      }),
      { minLength: 1, maxLength: 5, selector: (l) => l.unitNet + l.unitTax },
    )
    .map((lines) =>
      lines.map((l, i) => ({
        ...l,
        line: {
          id: `${315 + i}`,
          net: l.unitNet * l.quantity,
          tax: l.unitTax * l.quantity,
          quantity: l.quantity,
        } satisfies BasisLine,
      })),
    );

  it('end at the order’s amount when each is a few units of one line, or all that is left', () => {
    fc.assert(
      fc.property(unitLines, splits, fc.boolean(), (priced, how, lastIsRest) => {
        // Prepare: a gross per group of units of one line (a refund of two lines is two refunds)
        const lines = priced.map((p) => p.line);
        const basis = basisOf(lines, false);
        const parts = split(lines, how).flatMap((perLine) =>
          priced.flatMap((p, i) => (perLine[i]! > 0 ? [(p.unitNet + p.unitTax) * perLine[i]!] : [])),
        );
        // Optionally the last two refunds come as one: all that is left.
        const grosses =
          lastIsRest && parts.length >= 2 ? [...parts.slice(0, -2), parts.at(-2)! + parts.at(-1)!] : parts;
        const refunds = grosses.map((gross) => refund({ amount: gross, gross }));
        // Act
        const done = netInTurn(basis, refunds);
        // Assess
        expectEndsAtZero(basis, done);
      }),
      { ...RUNS, seed: 1904 },
    );
  });

  it('are approximated, not failed, when the gross is past what a line’s units can be guessed from', () => {
    // Prepare: the units of line A a gross of 30 trillion would be (gross × 3 / 0.01) pass 2^53; it
    // can be no share of any line, so it goes to the order's ratio (and the conversion is refused)
    const basis = basisOf(
      [
        { id: 'A', net: 1, tax: 0, quantity: 3 },
        { id: 'B', net: 10_000, tax: 1_900, quantity: 1 },
      ],
      false,
    );
    const next = refund({ gross: 3_002_399_751_580_331 });
    // Act
    netRefund(basis, next, []);
    // Assess
    expect(next.amountFrom).toMatch(/^approximate/);
    // 3 002 399 751 580 331 × 100.01 / 119.01, rounded
    expect(BigInt(next.amount)).toBe((3_002_399_751_580_331n * 10_001n * 2n + 11_901n) / (2n * 11_901n));
  });

  it('never take more than the gross paid back, whatever it is', () => {
    fc.assert(
      fc.property(
        fc.oneof(basisLines, cheapLines),
        fc.boolean(),
        fc.array(
          fc.oneof(
            fc.integer({ min: 0, max: 10 ** 6 }),
            fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
          ),
          {
            minLength: 1,
            maxLength: 6,
          },
        ),
        (lines, taxesIncluded, grosses) => {
          // Prepare
          const basis = basisOf(lines, taxesIncluded);
          const refunds = grosses.map((gross) => refund({ amount: gross, gross }));
          // Act
          const done = netInTurn(basis, refunds);
          // Assess
          for (const r of done) {
            expect(Number.isSafeInteger(r.amount)).toBe(true);
            expect(r.amount).toBeGreaterThanOrEqual(0);
            expect(r.amount).toBeLessThanOrEqual(r.gross!);
          }
        },
      ),
      { ...RUNS, seed: 1905 },
    );
  });
});

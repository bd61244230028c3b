import { describe, expect, it } from 'vitest';
import { pageProgress } from '../../cli/progress.ts';
import { shadowReport } from '../../cli/shadow-report.ts';
import type {
  Conversion,
  ConversionInfoQuery,
  ConversionsListQuery,
} from '../../shared/affiliate/schemas.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';
import { MemoryLedger } from '../support/memory-ledger.ts';

/** Issue 17, part 1: the report pages through the pixel's conversions and shows it on a terminal. */

const PROGRAM = '5ad000000000000000000101';
const FROM = new Date('2026-05-01T00:00:00.000Z');
const TO = new Date('2026-05-31T23:59:59.999Z');
const source = (id: string, mode: 'live' | 'shadow') =>
  SourceConfig.parse({
    id,
    platform: 'generic',
    program: PROGRAM,
    rule: '5ad000000000000000000201',
    secretRef: 'S',
    mode,
  });
const hex = (n: number) => n.toString(16).padStart(24, '0');

/** The platform's list: `count` pixel conversions `p0…`, 100.00 each, plus one added by a live source. */
class Platform {
  readonly pages: ConversionsListQuery[] = [];
  readonly lookups: string[] = [];
  readonly all: Conversion[];
  readonly elsewhere: Conversion[];
  constructor(count: number, elsewhere: Conversion[] = []) {
    this.elsewhere = elsewhere;
    this.all = Array.from({ length: count }, (_, i) => ({
      id: hex(i + 1),
      externalId: `p${i}`,
      amount: 10_000,
      currency: 'EUR',
      status: 'pending',
    }));
    this.all.push({ id: hex(99_999), externalId: 'live-1', amount: 500, currency: 'EUR', status: 'pending' });
  }
  async listConversions(query: ConversionsListQuery) {
    this.pages.push(query);
    const offset = Number(query.offset ?? 0);
    const limit = Number(query.limit ?? 100);
    return { total: this.all.length, data: this.all.slice(offset, offset + limit) };
  }
  async conversionInfo(query: ConversionInfoQuery) {
    this.lookups.push(query.externalId ?? '');
    return this.elsewhere.find((c) => c.externalId === query.externalId);
  }
}

async function ledgerWith(records: Partial<OrderRecord>[]): Promise<MemoryLedger> {
  const ledger = new MemoryLedger();
  for (const r of records) {
    await ledger.create({
      key: ledgerKey(PROGRAM, r.externalId ?? ''),
      program: PROGRAM,
      externalId: '',
      source: 'pilot',
      state: 'shadowed',
      version: 0,
      originalAmount: 10_000,
      currentAmount: 10_000,
      currency: 'EUR',
      refunds: {},
      createdAt: '2026-05-10T00:00:00.000Z',
      updatedAt: '2026-05-10T00:00:00.000Z',
      ...r,
    } as OrderRecord);
  }
  return ledger;
}

describe('shadowReport', () => {
  it('reads every page of the pixel’s conversions, reporting progress, and leaves a live source’s adds out', async () => {
    // Prepare: 1 500 pixel conversions (two pages of 1 000); p0 recorded by the shadow source too.
    const platform = new Platform(1_500);
    const ledger = await ledgerWith([
      { externalId: 'p0', shadow: true },
      { externalId: 'live-1', source: 'shop', state: 'added', conversionId: hex(99_999) },
    ]);
    const progress: [number, number][] = [];
    // Act
    const report = await shadowReport(
      ledger,
      platform,
      [source('pilot', 'shadow')],
      FROM,
      TO,
      (read, total) => progress.push([read, total]),
    );
    // Assess
    expect(platform.pages.map((p) => p.offset)).toEqual([0, 1_000]);
    expect(progress).toEqual([
      [1_000, 1_501],
      [1_501, 1_501],
    ]);
    expect(report.pixelConversions).toBe(1_500);
    expect(report.rows.filter((r) => r.kind === 'same').map((r) => r.externalId)).toEqual(['p0']);
    expect(report.rows.filter((r) => r.kind === 'only_pixel')).toHaveLength(1_499);
    expect(report.rows.some((r) => r.externalId === 'live-1')).toBe(false);
    expect(report.atStake).toEqual({ EUR: 1_499 * 10_000 });
  });

  it('looks a shadow order up by externalId before saying only the connector saw it', async () => {
    // Prepare: the pixel dated order s1 outside the period; s2 it never recorded.
    const platform = new Platform(0, [
      { id: hex(7), externalId: 's1', amount: 9_000, currency: 'EUR', status: 'accepted' },
    ]);
    const ledger = await ledgerWith([
      { externalId: 's1', shadow: true },
      { externalId: 's2', shadow: true },
      { externalId: 'old', shadow: true, createdAt: '2026-04-01T00:00:00.000Z' },
    ]);
    // Act
    const report = await shadowReport(ledger, platform, [source('pilot', 'shadow')], FROM, TO);
    // Assess
    expect(platform.lookups.sort()).toEqual(['s1', 's2']);
    expect(report.rows.map((r) => [r.kind, r.externalId, r.difference])).toEqual([
      ['only_connector', 's2', 10_000],
      ['amount_differs', 's1', 1_000],
      ['only_pixel', 'live-1', -500],
    ]);
    expect(report.shadowOrders).toBe(2);
  });
});

describe('pageProgress', () => {
  it('draws a bar on a terminal’s stderr and nothing on a pipe', () => {
    // Prepare
    let tty = '';
    let pipe = '';
    const io = (isTTY: boolean, sink: (t: string) => void) => ({
      stdout: { write: () => true },
      stderr: { isTTY, write: (t: string) => sink(t) },
      env: {},
      cwd: '.',
    });
    // Act
    const onTerminal = pageProgress(
      io(true, (t) => {
        tty += t;
      }),
      'pixel conversions',
    );
    onTerminal.page(1_000, 1_500);
    onTerminal.page(1_500, 1_500);
    onTerminal.stop();
    const onPipe = pageProgress(
      io(false, (t) => {
        pipe += t;
      }),
      'pixel conversions',
    );
    onPipe.page(1_000, 1_500);
    onPipe.stop();
    // Assess
    expect(tty).toContain('pixel conversions [');
    expect(tty).toContain('1000/1500');
    expect(pipe).toBe('');
  });
});

import { SourceConfig } from '../../shared/config/sources.ts';
import type { FinanceDeps } from '../../shared/finance.ts';
import type { EventQueue, Ledger, ReservationLedger } from '../../shared/ports.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';

/** The finance API key the unit tests of `POST /refunds` configure and send. */
export const FINANCE_KEY = 'finance-key-for-tests-0123456789abcdef';
/** The program of `FINANCE_SOURCES`' one source. */
export const FINANCE_PROGRAM = '0123456789abcdef01234567';

/** One Shopify source of `FINANCE_PROGRAM`. */
export const FINANCE_SOURCES: ReadonlyMap<string, SourceConfig> = new Map(
  [
    SourceConfig.parse({
      id: 'shopify',
      platform: 'shopify',
      program: FINANCE_PROGRAM,
      rule: '76543210fedcba9876543210',
      secretRef: 'SHOPIFY_SECRET',
    }),
  ].map((s) => [s.id, s]),
);

/**
 * What `submitFinanceRefund` needs in a unit test: `FINANCE_SOURCES`, the finance key in
 * `FINANCE_API_KEY`, the clock at 2026-06-01 12:00 UTC; the ledger, reservations and queue given.
 */
export function financeDeps(
  ports: { ledger: Pick<Ledger, 'get'>; reservations: ReservationLedger; queue: EventQueue },
  extra: Partial<FinanceDeps> = {},
): FinanceDeps {
  return {
    sources: FINANCE_SOURCES,
    ...ports,
    secrets: new EnvSecretStore({ FINANCE_API_KEY: FINANCE_KEY }),
    keyRef: 'FINANCE_API_KEY',
    now: () => new Date('2026-06-01T12:00:00.000Z'),
    ...extra,
  };
}

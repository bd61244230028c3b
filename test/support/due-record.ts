import { ledgerKey, type OrderRecord } from '../../shared/ledger.ts';

const DAY_MS = 86_400_000;

/**
 * An added order of `program`, created `days` before `now` and due for accept 30 days after that
 * (`extra` overrides any field): what the accept job's tests start from.
 */
export function dueRecord(
  program: string,
  externalId: string,
  now: number,
  days = 40,
  extra: Partial<OrderRecord> = {},
): OrderRecord {
  const iso = new Date(now - days * DAY_MS).toISOString();
  return {
    key: ledgerKey(program, externalId),
    program,
    externalId,
    source: 'shop',
    state: 'added',
    version: 0,
    conversionId: `conv-${externalId}`,
    originalAmount: 1000,
    currentAmount: 1000,
    refunds: {},
    acceptDueAt: new Date(now - (days - 30) * DAY_MS).toISOString(),
    createdAt: iso,
    updatedAt: iso,
    ...extra,
  };
}

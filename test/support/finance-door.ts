import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { makeHandler } from '../../functions/refunds.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import { type FinanceDeps, type FinanceOutcome, submitFinanceRefund } from '../../shared/finance.ts';
import type { HttpAnswer } from '../../shared/http/types.ts';
import { ledgerKey, type OrderRecord, type RefundRecord } from '../../shared/ledger.ts';
import type { EventQueue, Ledger, ReservationLedger } from '../../shared/ports.ts';
import { EnvSecretStore } from '../../shared/secrets.ts';
import { MemoryLedger } from './memory-ledger.ts';
import { RecordingQueue } from './recording-queue.ts';

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

/**
 * A refund of order 1001 as the worker records it: a partial 10.00 refund from finance, applied
 * (`overrides` replaces any field).
 */
export function recordedRefund(refundId: string, overrides: Partial<RefundRecord> = {}): RefundRecord {
  return {
    refundId,
    amount: 1_000,
    full: false,
    origin: 'finance',
    receivedAt: '2026-06-01T10:00:00.000Z',
    status: 'applied',
    ...overrides,
  };
}

/**
 * A ledger holding order 1001 of the Shopify source: USD 100.00, added, with the refunds given
 * recorded and taken off its current amount (`overrides` replaces any field of the record).
 */
export async function ledgerWithOrder(
  refunds: readonly RefundRecord[] = [],
  overrides: Partial<OrderRecord> = {},
): Promise<MemoryLedger> {
  const ledger = new MemoryLedger();
  await ledger.create({
    key: ledgerKey(FINANCE_PROGRAM, '1001'),
    program: FINANCE_PROGRAM,
    externalId: '1001',
    source: 'shopify',
    state: 'added',
    version: 0,
    conversionId: 'c'.repeat(24),
    originalAmount: 10_000,
    currentAmount: 10_000 - refunds.reduce((sum, r) => sum + r.amount, 0),
    currency: 'USD',
    refunds: Object.fromEntries(refunds.map((r) => [r.refundId, r])),
    createdAt: '2026-06-01T09:00:00.000Z',
    updatedAt: '2026-06-01T10:00:00.000Z',
    ...overrides,
  });
  return ledger;
}

/** One request of `submitRefund`: the door's answer, the queue it was given, its outcomes observed. */
export interface FinanceSubmission {
  readonly answer: HttpAnswer;
  readonly queue: RecordingQueue;
  readonly outcomes: FinanceOutcome[];
}

/**
 * Finance's refund `body`, of order 1001 unless it names another `externalId`, through
 * `submitFinanceRefund` with the finance key in `x-api-key`: `financeDeps` over the ledger and
 * reservations given and a queue of its own.
 */
export async function submitRefund(
  ports: { readonly ledger: Pick<Ledger, 'get'>; readonly reservations: ReservationLedger },
  body: Record<string, unknown>,
): Promise<FinanceSubmission> {
  const queue = new RecordingQueue();
  const outcomes: FinanceOutcome[] = [];
  const answer = await submitFinanceRefund(
    financeDeps({ ...ports, queue }, { observe: (outcome) => outcomes.push(outcome) }),
    { 'x-api-key': FINANCE_KEY },
    Buffer.from(JSON.stringify({ externalId: '1001', ...body })),
  );
  return { answer, queue, outcomes };
}

/** A submission's status and body, and how many events it queued. */
export function answerAndQueued(submission: FinanceSubmission): {
  status: number;
  body: Record<string, unknown>;
  queued: number;
} {
  const { answer, queue } = submission;
  return { status: answer.status, body: answer.body, queued: queue.events.length };
}

/**
 * `POST /refunds` as API Gateway hands it to the function: a JSON content type, then `headers`; an
 * object `body` as its JSON text, a `Buffer` as base64 of its exact bytes.
 */
export function refundsEvent(
  headers: Record<string, string>,
  body: Record<string, unknown> | Buffer,
): APIGatewayProxyEventV2 {
  const raw = Buffer.isBuffer(body);
  return {
    version: '2.0',
    routeKey: 'POST /refunds',
    rawPath: '/refunds',
    rawQueryString: '',
    headers: { 'content-type': 'application/json', ...headers },
    body: raw ? body.toString('base64') : JSON.stringify(body),
    isBase64Encoded: raw,
    requestContext: {} as APIGatewayProxyEventV2['requestContext'],
  } as APIGatewayProxyEventV2;
}

/**
 * `body` posted to `POST /refunds` (`refundsEvent`) through the handler wired with `financeDeps`
 * over an empty ledger: the handler's result and the queue it was given.
 */
export async function postToRefundsHandler(
  headers: Record<string, string>,
  body: Record<string, unknown>,
): Promise<{ result: APIGatewayProxyStructuredResultV2; queue: RecordingQueue }> {
  const ledger = new MemoryLedger();
  const queue = new RecordingQueue();
  const handler = makeHandler(financeDeps({ ledger, reservations: ledger, queue }));
  const result = await handler(refundsEvent(headers, body));
  return { result, queue };
}

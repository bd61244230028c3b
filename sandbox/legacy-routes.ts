import { BadInputError } from '../shared/errors.ts';
import {
  LEGACY_MAX_WEIGHT,
  LegacyConversionAddBody,
  LegacyConversionsQuery,
  LegacyPartnershipsQuery,
  LegacyRefuseBody,
} from '../shared/legacy/schemas.ts';
import { formatMoney, parseMoney } from '../shared/money.ts';
import { materialize, requireConversion, storeConversion, view } from './actions.ts';
import { HttpError, parseOr400 } from './http.ts';
import type { ApiRoute, RouteRequest } from './routes.ts';
import type { ConversionRecord } from './store.ts';
import type { StoredConversion } from './types.ts';
import { isoNow, type SandboxWorld, type SeededProgram, seededPrograms } from './world.ts';

// The legacy 2.0 interface (`/2.0/…`, HTTP Basic) over the same store as the current API, so the
// control API and the current routes see what the legacy routes add. Amounts are floats of major
// units on the wire and minor units in the store.
//
// How the sandbox answers what the document leaves open ("HTTP status codes on failure: not
// shown", "meaning of the numeric code values: not shown"):
// - action routes (add, accept, refuse) always answer 200 with `{ status, message, code }`:
//   `failed` for a request that cannot be right (invalid body 400, unknown program or conversion 404,
//   duplicate identifier 409), `aborted` for a state that forbids the action (precondition 422);
// - read routes answer 400 for an invalid query and 404 for an unknown program or conversion.

type ActionStatus = 'done' | 'aborted' | 'failed';
interface ActionAnswer {
  status: ActionStatus;
  message: string;
  code: number;
}

/** Refused action: answered 200 with a `status` rather than an HTTP error. */
class ActionRefusal extends Error {
  readonly status: 'aborted' | 'failed';
  readonly code: number;
  constructor(status: 'aborted' | 'failed', code: number, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Default weight of an affiliate in the seeded programs (0..12). */
const SEED_WEIGHT = 1;
/** Creation date of the seeded programs and partnerships. */
const SEED_CREATED_AT = '2024-01-01T00:00:00.000Z';

/** The legacy 2.0 routes: the advertiser half the connector uses, plus the program list. */
export const LEGACY_API_ROUTES: readonly ApiRoute[] = [
  {
    method: 'GET',
    path: '/2.0/advertiser',
    auth: 'basic',
    body: false,
    handle: (_request, world) => seededPrograms(world.seed).map(programSummary),
  },
  {
    method: 'GET',
    path: '/2.0/advertiser/{programId}',
    auth: 'basic',
    body: false,
    handle: ({ params }, world) => programDetail(readProgram(world, params)),
  },
  {
    method: 'GET',
    path: '/2.0/advertiser/{programId}/conversions',
    auth: 'basic',
    body: false,
    handle: ({ params, query }, world) => listConversions(readProgram(world, params), query, world),
  },
  {
    method: 'GET',
    path: '/2.0/advertiser/{programId}/conversions/{conversionId}',
    auth: 'basic',
    body: false,
    handle: ({ params }, world) => conversionDetail(readConversion(world, params), world),
  },
  {
    method: 'GET',
    path: '/2.0/advertiser/{programId}/conversions/{conversionId}/accept',
    auth: 'basic',
    body: false,
    handle: (request, world) => action(() => accept(request, world)),
  },
  {
    method: 'POST',
    path: '/2.0/advertiser/{programId}/conversions/{conversionId}/refuse',
    auth: 'basic',
    body: true,
    handle: (request, world) => action(() => refuse(request, world)),
  },
  {
    method: 'POST',
    path: '/2.0/advertiser/{programId}/conversions/add',
    auth: 'basic',
    body: true,
    handle: (request, world) => action(() => add(request, world)),
  },
  {
    method: 'GET',
    path: '/2.0/advertiser/{programId}/partnerships',
    auth: 'basic',
    body: false,
    handle: ({ params, query }, world) => listPartnerships(readProgram(world, params), query, world),
  },
];

function action(run: () => string): ActionAnswer {
  try {
    return { status: 'done', message: run(), code: 200 };
  } catch (error) {
    if (error instanceof ActionRefusal)
      return { status: error.status, message: error.message, code: error.code };
    if (error instanceof HttpError) return { status: 'failed', message: error.message, code: error.status };
    throw error;
  }
}

function add({ params, body }: RouteRequest, world: SandboxWorld): string {
  const program = actionProgram(world, params);
  const input = parseOr400(LegacyConversionAddBody, body);
  const rule = input.rule_id.toLowerCase();
  if (!program.rules.some((r) => r.id === rule)) {
    throw new ActionRefusal('failed', 400, `rule_id: ${rule} is not a rule of program ${program.id}`);
  }
  const index = world.seed.partnerships.indexOf(input.partnership_id.toLowerCase());
  if (index < 0) {
    throw new ActionRefusal(
      'failed',
      400,
      `partnership_id: ${input.partnership_id} is not a partnership of program ${program.id}`,
    );
  }
  const amount = minorOf(input.amount, program.currency, 'amount');
  // The body's commission is the conversion's ("total amount excluding tax of the commission"): kept
  // as given, 0 included, since the document names no rule that would compute it instead.
  const commission = minorOf(input.commission, program.currency, 'commission');
  const { store, settings } = world;
  if (settings.duplicates === 'reject' && store.withExternalId(program.id, input.identifier).length > 0) {
    throw new ActionRefusal('failed', 409, `a conversion with identifier ${input.identifier} already exists`);
  }
  const createdAt = isoNow(world);
  storeConversion(world, {
    program: program.id,
    rule,
    kind: 'manual',
    externalId: input.identifier,
    amount,
    currency: program.currency,
    // The current API's nearest field to the legacy custom variable.
    subId: input.custom_var ?? '',
    createdAt,
    affiliateTrackingId: world.seed.trackingIds[index] ?? null,
    partnership: world.seed.partnerships[index] ?? null,
    commission,
  });
  return 'conversion created';
}

function accept({ params }: RouteRequest, world: SandboxWorld): string {
  const record = actionConversion(world, params);
  const state = materialize(record, world);
  if (record.status !== 'pending' || state.isLocked) {
    throw new ActionRefusal(
      'aborted',
      422,
      `conversion ${record.id} is ${describeState(record, state.isLocked)}: only a pending conversion that is neither locked nor refused can be accepted`,
    );
  }
  record.status = 'accepted';
  record.acceptedAt = isoNow(world);
  world.store.changed();
  return `conversion ${record.id} accepted`;
}

function refuse({ params, body }: RouteRequest, world: SandboxWorld): string {
  const record = actionConversion(world, params);
  const input = parseOr400(LegacyRefuseBody, body);
  const state = materialize(record, world);
  if (record.status === 'refused' || state.isLocked) {
    throw new ActionRefusal(
      'aborted',
      422,
      `conversion ${record.id} is ${describeState(record, state.isLocked)}: only a pending conversion, or an accepted one that is not locked, can be refused`,
    );
  }
  record.status = 'refused';
  record.refuseReason = input.refuse_reason;
  record.refusedAt = isoNow(world);
  world.store.changed();
  return `conversion ${record.id} refused`;
}

function listConversions(program: SeededProgram, rawQuery: unknown, world: SandboxWorld): unknown {
  const query = parseOr400(LegacyConversionsQuery, rawQuery);
  const from = query.dateFrom === undefined ? undefined : Date.parse(query.dateFrom);
  const to = query.dateTo === undefined ? undefined : Date.parse(query.dateTo);
  const matches = world.store.conversions
    .filter((record) => record.program === program.id)
    .map((record) => ({ record, c: view(record, world) }))
    .filter(({ c }) => {
      const created = Date.parse(c.createdAt);
      return (
        (query.identifier === undefined || c.externalId === query.identifier) &&
        (query.partnershipId === undefined || c.partnership === query.partnershipId.toLowerCase()) &&
        (query.isPending === undefined || (c.status === 'pending') === (query.isPending === 1)) &&
        (query.isLocked === undefined || c.isLocked === (query.isLocked === 1)) &&
        (query.isRefused === undefined || (c.status === 'refused') === (query.isRefused === 1)) &&
        (from === undefined || created >= from) &&
        (to === undefined || created <= to)
      );
    });
  if (query.count === 1) return { count: matches.length };
  const direction = query.orderBy === 'asc' ? 1 : -1;
  matches.sort(
    (a, b) =>
      direction * (Date.parse(a.c.createdAt) - Date.parse(b.c.createdAt) || a.record.seq - b.record.seq),
  );
  const skip = query.skip ?? 0;
  return matches.slice(skip, skip + (query.limit ?? 20)).map(({ record, c }) => listItem(record, c, world));
}

function conversionDetail(record: ConversionRecord, world: SandboxWorld): unknown {
  const c = view(record, world);
  const program = seededPrograms(world.seed).find((p) => p.id === record.program);
  const rule = program?.rules.find((r) => r.id === record.rule);
  const index = record.partnership === null ? -1 : world.seed.partnerships.indexOf(record.partnership);
  return {
    ...listItem(record, c, world),
    commission_paid: 0,
    shared_between: 1,
    is_first: 0,
    cookie: null,
    advertiser_weight: null,
    advertiser_percent: null,
    from_revenue_sharing: 0,
    refuse_reason: c.refuseReason ?? '',
    rule: { id: record.rule, title: rule?.title ?? '' },
    // One line for the conversion's partnership, with the whole commission (nothing is shared).
    commissions:
      index < 0
        ? []
        : [
            {
              id: `${record.id.slice(0, 20)}c0de`,
              percent: 100,
              commission: Number(formatMoney(c.commission, c.currency)),
              cookie: c.createdAt,
              custom_var: c.subId || null,
              referrer: null,
              partnership: partnershipView(world, index),
            },
          ],
  };
}

function listPartnerships(_program: SeededProgram, rawQuery: unknown, world: SandboxWorld): unknown {
  const query = parseOr400(LegacyPartnershipsQuery, rawQuery);
  const all = world.seed.partnerships
    .map((_, index) => ({
      ...partnershipView(world, index),
      status: 1,
      weight: SEED_WEIGHT,
      url_param: null,
    }))
    .filter(
      (p) =>
        (query.partnershipId === undefined || p.id === query.partnershipId.toLowerCase()) &&
        (query.trackingId === undefined || p.tracking_id === query.trackingId),
    )
    .map((p) => ({ ...p, url_sharp_param: null, cpc: null, created_at: SEED_CREATED_AT }));
  if (query.count === 1) return { count: all.length };
  if (query.orderBy !== 'asc') all.reverse();
  const skip = query.skip ?? 0;
  return all.slice(skip, skip + (query.limit ?? 20));
}

function partnershipView(world: SandboxWorld, index: number) {
  const id = world.seed.partnerships[index] ?? '';
  return {
    id,
    tracking_id: world.seed.trackingIds[index] ?? 0,
    affiliateProfile: { id: `${id.slice(0, 20)}0f0f`, title: `Sandbox affiliate ${index + 1}` },
  };
}

function listItem(record: ConversionRecord, c: StoredConversion, world: SandboxWorld) {
  return {
    id: c.id,
    identifier: c.externalId,
    // The exact decimal, as a JSON number: what a real legacy server would serialize.
    amount: Number(formatMoney(c.amount, c.currency)),
    currency: c.currency,
    customer_id: c.customerId ?? '',
    payment: null,
    mode: c.kind === 'tracking' ? 'last' : 'manual',
    is_pending: c.status === 'pending' ? 1 : 0,
    locked_at: lockDate(record, c, world),
    refused_at: c.refusedAt,
    custom_var: c.subId || null,
    created_at: c.createdAt,
  };
}

/** `locked_at` is when the conversion locks: past once locked, future while accepted and unlocked. */
function lockDate(record: ConversionRecord, c: StoredConversion, world: SandboxWorld): string | null {
  if (c.lockedAt !== null) return c.lockedAt;
  if (record.lockSuspended || c.status !== 'accepted' || c.acceptedAt === null) return null;
  return new Date(Date.parse(c.acceptedAt) + world.settings.lockAfterMs).toISOString();
}

function programSummary(program: SeededProgram) {
  return {
    id: program.id,
    title: program.title,
    slug: program.title.toLowerCase().replaceAll(' ', '-'),
    url: 'https://shop.example.com',
  };
}

function programDetail(program: SeededProgram): unknown {
  return {
    ...programSummary(program),
    teaser: 'Sandbox program',
    description: 'A program of the local sandbox',
    terms: '',
    tags: null,
    mode: 'last',
    default_affiliate_weight: Math.min(SEED_WEIGHT, LEGACY_MAX_WEIGHT),
    advertiser_weight: 0,
    minimum_amount: 0,
    approve_affiliates: 0,
    authorize_brand_name: 0,
    authorize_text_link: 1,
    authorize_newsletter: 1,
    authorize_pop_up: 0,
    authorize_pop_under: 0,
    authorize_incentive_form: 0,
    authorize_buy_keywords: 0,
    authorize_coregistration: 0,
    created_at: SEED_CREATED_AT,
    rules: program.rules,
  };
}

function findProgram(world: SandboxWorld, params: Record<string, string>): SeededProgram | undefined {
  const wanted = (params['programId'] ?? '').toLowerCase();
  return seededPrograms(world.seed).find((p) => p.id === wanted);
}

function readProgram(world: SandboxWorld, params: Record<string, string>): SeededProgram {
  const program = findProgram(world, params);
  if (!program) throw new HttpError(404, `no program ${params['programId']} for this account`);
  return program;
}

function actionProgram(world: SandboxWorld, params: Record<string, string>): SeededProgram {
  const program = findProgram(world, params);
  if (!program) throw new ActionRefusal('failed', 404, `no program ${params['programId']} for this account`);
  return program;
}

function readConversion(world: SandboxWorld, params: Record<string, string>): ConversionRecord {
  const program = readProgram(world, params);
  return requireConversion(world, params['conversionId'] ?? '', program.id);
}

function actionConversion(world: SandboxWorld, params: Record<string, string>): ConversionRecord {
  const program = actionProgram(world, params);
  try {
    return requireConversion(world, params['conversionId'] ?? '', program.id);
  } catch {
    throw new ActionRefusal(
      'failed',
      404,
      `no conversion ${params['conversionId']} in program ${program.id}`,
    );
  }
}

function describeState(record: ConversionRecord, locked: boolean): string {
  if (record.status === 'refused') return 'refused';
  return locked ? `${record.status} and locked` : record.status;
}

/** A float of major units as exact minor units; more decimals than the currency has is refused. */
function minorOf(amount: number, currency: string, field: string): number {
  try {
    return parseMoney(String(amount), currency, { field });
  } catch (error) {
    if (error instanceof BadInputError) throw new ActionRefusal('failed', 400, error.message);
    throw error;
  }
}

import type * as z from 'zod';
import type {
  CommissionAdjustmentAddBody,
  ConversionAcceptBody,
  ConversionAddBody,
  ConversionInfoQuery,
  ConversionRefuseBody,
  ConversionsListQuery,
  ConversionUpdateBody,
  Currency,
} from '../shared/affiliate/schemas.ts';
import { requirePlatformCurrency } from './currencies.ts';
import { HttpError } from './http.ts';
import { randomHexId } from './ids.ts';
import { type ConversionRecord, effectiveState, viewConversion } from './store.ts';
import type { SeedConversionInput, StoredCommissionAdjustment, StoredConversion } from './types.ts';
import {
  findProgram,
  isoNow,
  isSeededPartnership,
  partnershipOfTrackingId,
  type SandboxWorld,
  type SeededProgram,
  seededPrograms,
} from './world.ts';

// One function per platform operation, shaped (input, world) => JSON answer. Inputs are already
// validated by the shared zod schemas; these add the rules that need the account's data.

/** GET /advertiser/advertisers.me */
export function advertiserInfo(world: SandboxWorld): unknown {
  const { seed } = world;
  return {
    statusCode: 200,
    advertiser: {
      id: seed.advertiser,
      name: 'Sandbox advertiser',
      programs: seededPrograms(seed),
      partnerships: seed.partnerships.map((id, i) => ({
        id,
        trackingId: seed.trackingIds[i],
        status: 'approved',
      })),
      groups: seed.groups.map((id) => ({ id })),
      users: seed.users.map((id) => ({ id })),
    },
  };
}

/** POST /advertiser/conversions.add */
export function addConversion(input: ConversionAddBody, world: SandboxWorld): unknown {
  requireRealDate(input.date);
  requirePlatformCurrency(input.currency);
  const program = requireProgram(world, input.program);
  const rule = input.rule.toLowerCase();
  if (!program.rules.some((r) => r.id === rule)) {
    const owner = seededPrograms(world.seed).find((p) => p.rules.some((r) => r.id === rule));
    const message = owner
      ? `rule ${rule} belongs to program ${owner.id}, not to program ${program.id}`
      : `rule ${rule} is not a rule of program ${program.id} (see /advertiser/advertisers.me)`;
    throw new HttpError(400, message, 'rule');
  }
  let partnership: string | null = null;
  if (input.kind === 'bonus') {
    if (!isSeededPartnership(world, input.partnership)) {
      throw new HttpError(
        400,
        `partnership ${input.partnership} is not a partnership of this advertiser`,
        'partnership',
      );
    }
    partnership = input.partnership.toLowerCase();
  }
  if (input.kind === 'manual') {
    const owner = partnershipOfTrackingId(world, input.affiliateTrackingId);
    if (owner === undefined) {
      throw new HttpError(
        400,
        `affiliateTrackingId ${input.affiliateTrackingId} is not the tracking id of a partnership of this advertiser`,
        'affiliateTrackingId',
      );
    }
    partnership = owner;
  }
  const { store, settings } = world;
  const duplicate = store.withExternalId(program.id, input.externalId).length > 0;
  if (duplicate && settings.duplicates === 'reject') {
    throw new HttpError(409, `a conversion with externalId ${input.externalId} already exists`, 'externalId');
  }
  const createdAt = isoNow(world);
  const record = storeConversion(world, {
    program: program.id,
    rule,
    kind: input.kind,
    externalId: input.externalId,
    amount: input.amount ?? 0,
    currency: input.currency ?? program.currency,
    customerId: input.customerId ?? null,
    subId: input.subId ?? '',
    createdAt,
    date: input.date ?? createdAt,
    cids: input.kind === 'tracking' ? input.cids.map((c) => c.toLowerCase()) : null,
    ip: input.kind === 'tracking' ? input.ip : null,
    voucher: input.voucher ?? '',
    product: input.product ?? null,
    paymentMethod: input.paymentMethod ?? null,
    affiliateTrackingId: input.kind === 'manual' ? input.affiliateTrackingId : null,
    partnership,
    bonus: input.kind === 'bonus' ? input.bonus : null,
    notify: input.notify ?? true,
  });
  // The real add answer is not known to carry the id (NOTES.md); 'bare' keeps clients honest.
  if (settings.addResponse === 'withId') return { statusCode: 200, conversion: view(record, world) };
  return { statusCode: 200, message: 'conversion created' };
}

/**
 * POST /_sandbox/conversions: a conversion as the platform's browser pixel records it, for comparing a
 * shadow source with it. Input already validated; the program must be seeded, the rule its own.
 */
export function seedConversion(input: SeedConversionInput, world: SandboxWorld): StoredConversion {
  const program = requireProgram(world, input.program);
  const rule = (input.rule ?? program.rules[0]?.id ?? '').toLowerCase();
  if (!program.rules.some((r) => r.id === rule)) {
    throw new HttpError(400, `rule: ${rule} is not a rule of program ${program.id}`, 'rule');
  }
  const createdAt = input.createdAt === undefined ? isoNow(world) : new Date(input.createdAt).toISOString();
  const status = input.status ?? 'pending';
  const record = storeConversion(world, {
    program: program.id,
    rule,
    kind: 'tracking',
    externalId: input.externalId,
    amount: input.amount,
    currency: (input.currency ?? program.currency) as Currency,
    status,
    refuseReason: status === 'refused' ? 'refused when seeded' : null,
    refusedAt: status === 'refused' ? createdAt : null,
    acceptedAt: status === 'accepted' ? createdAt : null,
    createdAt,
    notify: false,
    commission: input.commission ?? null,
  });
  return view(record, world);
}

/** GET /advertiser/conversions.info: the oldest conversion of the program that matches. */
export function conversionInfo(query: ConversionInfoQuery, world: SandboxWorld): unknown {
  const program = requireProgram(world, query.program);
  const candidates =
    query.externalId === undefined
      ? world.store.conversions.filter((c) => c.program === program.id)
      : world.store.withExternalId(program.id, query.externalId);
  const match = candidates
    .filter((c) => query.customerId === undefined || c.customerId === query.customerId)
    .sort((a, b) => a.seq - b.seq)[0];
  if (!match) {
    const by =
      query.externalId !== undefined ? `externalId ${query.externalId}` : `customerId ${query.customerId}`;
    throw new HttpError(404, `no conversion for ${by}`);
  }
  return { statusCode: 200, conversion: view(match, world) };
}

type ListQuery = z.output<typeof ConversionsListQuery>;

/** GET /advertiser/conversions.list: `total` counts the matches before paging. */
export function listConversions(query: ListQuery, world: SandboxWorld): unknown {
  const from = dateParam(query.from, 'from');
  const to = dateParam(query.to, 'to');
  const matches = world.store.conversions
    .map((record) => ({ record, conversion: view(record, world) }))
    .filter(({ conversion: c }) => {
      const created = Date.parse(c.createdAt);
      return (
        (query.program === undefined || c.program === query.program.toLowerCase()) &&
        (query.rule === undefined || c.rule === query.rule.toLowerCase()) &&
        (query.partnership === undefined || c.partnership === query.partnership.toLowerCase()) &&
        (query.status === undefined || c.status === query.status) &&
        (query.locked === undefined || c.isLocked === query.locked) &&
        (query.externalId === undefined || c.externalId === query.externalId) &&
        (query.customerId === undefined || c.customerId === query.customerId) &&
        (query.subId === undefined || c.subId === query.subId) &&
        (from === undefined || created >= from) &&
        (to === undefined || created <= to)
      );
    });
  const direction = query.sort === 'asc' ? 1 : -1;
  const orderBy = query.orderBy ?? 'createdAt';
  matches.sort((a, b) => {
    const primary = compareBy(orderBy, a.conversion, b.conversion);
    return direction * (primary !== 0 ? primary : a.record.seq - b.record.seq);
  });
  const offset = query.offset ?? 0;
  const limit = query.limit ?? 100;
  return {
    statusCode: 200,
    conversions: {
      total: matches.length,
      data: matches.slice(offset, offset + limit).map((m) => m.conversion),
    },
  };
}

/** POST /advertiser/conversions.accept */
export function acceptConversion(input: ConversionAcceptBody, world: SandboxWorld): unknown {
  const record = requireConversion(world, input.id, input.program);
  const state = materialize(record, world);
  if (state.isLocked) {
    throw new HttpError(
      422,
      `conversion ${record.id} is locked since ${state.lockedAt} and can no longer be accepted`,
    );
  }
  if (record.status === 'refused') {
    throw new HttpError(422, `conversion ${record.id} is refused and can no longer be accepted`);
  }
  // The platform's one stated rule for accept (legacy 2.0: "needs a conversion pending approval")
  // leaves no second accept: a retried accept whose first went through must be recognised, not 200.
  if (record.status === 'accepted') {
    throw new HttpError(
      422,
      `conversion ${record.id} is already accepted: only a pending conversion can be accepted`,
    );
  }
  record.status = 'accepted';
  record.acceptedAt = isoNow(world);
  world.store.changed();
  return { statusCode: 200, conversion: view(record, world) };
}

/** POST /advertiser/conversions.refuse */
export function refuseConversion(input: ConversionRefuseBody, world: SandboxWorld): unknown {
  const record = requireConversion(world, input.id, input.program);
  const state = materialize(record, world);
  if (state.isLocked) {
    throw new HttpError(
      422,
      `conversion ${record.id} is locked since ${state.lockedAt} and can no longer be refused`,
    );
  }
  if (record.status === 'refused') {
    throw new HttpError(
      422,
      `conversion ${record.id} is already refused (reason: ${record.refuseReason ?? 'none'})`,
    );
  }
  record.status = 'refused';
  record.refuseReason = input.reason;
  record.refusedAt = isoNow(world);
  world.store.changed();
  return { statusCode: 200, conversion: view(record, world) };
}

/** POST /advertiser/conversions.update: the platform changes amounts only while pending. */
export function updateConversionAmount(input: ConversionUpdateBody, world: SandboxWorld): unknown {
  const record = requireConversion(world, input.id);
  const state = materialize(record, world);
  if (record.status !== 'pending') {
    throw new HttpError(
      422,
      `conversion ${record.id} is ${record.status}: its amount can only be updated while pending`,
    );
  }
  if (state.isLocked) {
    throw new HttpError(
      422,
      `conversion ${record.id} is locked since ${state.lockedAt} and can no longer be updated`,
    );
  }
  record.amount = input.amount;
  record.amountHistory.push({ amount: input.amount, reason: input.reason, at: isoNow(world) });
  world.store.changed();
  return { statusCode: 200, conversion: view(record, world) };
}

/** POST /advertiser/commissionAdjustments.add */
export function addCommissionAdjustment(input: CommissionAdjustmentAddBody, world: SandboxWorld): unknown {
  requireRealDate(input.date);
  requirePlatformCurrency(input.currency);
  const program = requireProgram(world, input.program);
  if (!isSeededPartnership(world, input.partnership)) {
    throw new HttpError(
      400,
      `partnership ${input.partnership} is not a partnership of this advertiser`,
      'partnership',
    );
  }
  const { store, settings } = world;
  if (settings.duplicates === 'reject' && store.adjustments.some((a) => a.identifier === input.identifier)) {
    throw new HttpError(
      409,
      `a commission adjustment with identifier ${input.identifier} already exists`,
      'identifier',
    );
  }
  const createdAt = isoNow(world);
  const adjustment: StoredCommissionAdjustment = {
    id: freshId(world),
    type: input.type,
    program: program.id,
    partnership: input.partnership.toLowerCase(),
    identifier: input.identifier,
    commission: input.commission,
    comment: input.comment ?? null,
    currency: input.currency ?? program.currency,
    date: input.date ?? createdAt,
    status: input.status ?? 'accepted',
    createdAt,
  };
  store.adjustments.push(adjustment);
  store.changed();
  return { statusCode: 200, commissionAdjustment: structuredClone(adjustment) };
}

/** The API view of a record at the world's current time. */
export function view(record: ConversionRecord, world: SandboxWorld): StoredConversion {
  return viewConversion(record, world.now(), world.settings);
}

/**
 * Writes the clock-derived status (auto-accept) into the record before a change, so that the change
 * starts from what a reader would have seen. Returns the state including the lock.
 */
export function materialize(
  record: ConversionRecord,
  world: SandboxWorld,
): ReturnType<typeof effectiveState> {
  const state = effectiveState(record, world.now(), world.settings);
  record.status = state.status;
  record.acceptedAt = state.acceptedAt;
  return state;
}

/** The record of a conversion id, or 404 (also when it belongs to another program). */
export function requireConversion(world: SandboxWorld, id: string, program?: string): ConversionRecord {
  if (program !== undefined) requireProgram(world, program);
  const record = world.store.findConversion(id);
  if (!record || (program !== undefined && record.program !== program.toLowerCase())) {
    const where = program === undefined ? '' : ` in program ${program}`;
    throw new HttpError(404, `no conversion ${id}${where}`, 'id');
  }
  return record;
}

function requireProgram(world: SandboxWorld, id: string): SeededProgram {
  const program = findProgram(world, id);
  if (!program) {
    throw new HttpError(
      400,
      `program ${id} is not a program of this advertiser (see /advertiser/advertisers.me)`,
      'program',
    );
  }
  return program;
}

/** What a new conversion must be given; everything else starts as a fresh pending one. */
type NewConversion = Pick<
  ConversionRecord,
  'program' | 'rule' | 'kind' | 'externalId' | 'amount' | 'currency' | 'createdAt'
> &
  Partial<Omit<ConversionRecord, 'seq' | 'id'>>;

/** Stores a new conversion (a fresh id and sequence number, pending unless told), and returns it. */
export function storeConversion(world: SandboxWorld, fields: NewConversion): ConversionRecord {
  const record: ConversionRecord = {
    seq: world.store.nextSeq(),
    id: freshId(world),
    status: 'pending',
    refuseReason: null,
    refusedAt: null,
    acceptedAt: null,
    forcedLockedAt: null,
    lockSuspended: false,
    customerId: null,
    subId: '',
    date: fields.createdAt,
    cids: null,
    ip: null,
    voucher: '',
    product: null,
    paymentMethod: null,
    affiliateTrackingId: null,
    partnership: null,
    bonus: null,
    notify: true,
    amountHistory: [],
    ...fields,
  };
  world.store.addConversion(record);
  world.store.changed();
  return record;
}

function freshId(world: SandboxWorld): string {
  let id = randomHexId();
  while (world.store.hasId(id)) id = randomHexId();
  return id;
}

/**
 * A `date` sent must be a datetime that exists: the shared rule checks only its shape
 * (`YYYY-MM-DDTHH:mm:ss.sssZ`), which `2024-02-30T…` or `…T25:61:…` also have.
 */
function requireRealDate(value: string | undefined): void {
  if (value === undefined) return;
  const time = Date.parse(value);
  if (Number.isNaN(time) || new Date(time).toISOString() !== value) {
    throw new HttpError(400, `date: ${value} is not a real UTC datetime`, 'date');
  }
}

function dateParam(value: string | undefined, field: string): number | undefined {
  if (value === undefined) return undefined;
  const time = Date.parse(value);
  if (Number.isNaN(time))
    throw new HttpError(400, `${field}: must be a date such as 2024-01-31T00:00:00.000Z`, field);
  return time;
}

function compareBy(
  orderBy: NonNullable<ListQuery['orderBy']>,
  a: StoredConversion,
  b: StoredConversion,
): number {
  switch (orderBy) {
    case 'externalId':
      return a.externalId < b.externalId ? -1 : a.externalId > b.externalId ? 1 : 0;
    case 'amount':
      return a.amount - b.amount;
    case 'commissions':
      return a.commission - b.commission;
    case 'createdAt':
      return Date.parse(a.createdAt) - Date.parse(b.createdAt);
  }
}

import * as z from 'zod';
import { Cents } from '../shared/affiliate/schemas.ts';
import { materialize, requireConversion, seedConversion, view } from './actions.ts';
import type { FaultInjector } from './faults.ts';
import { HttpError, parseOr400 } from './http.ts';
import { parseFaultSettings, parseRuntimeOptions } from './options.ts';
import type { ForeignConsumer, ForeignLoad, RateLimiter } from './rate-limit.ts';
import type { Method, RouteRequest } from './routes.ts';
import type {
  CallCount,
  FaultSettings,
  RuntimeOptions,
  SandboxControl,
  SeedConversionInput,
  StoredConversion,
} from './types.ts';
import { isoNow, type SandboxSettings, type SandboxWorld } from './world.ts';

/** What the control needs from the running server. */
export interface ControlDeps {
  world: SandboxWorld;
  faults: FaultInjector;
  limiter: RateLimiter;
  foreign: ForeignConsumer;
  calls: Map<string, CallCount>;
  /** Restored by reset. */
  startFaults: FaultSettings;
  startSettings: SandboxSettings;
  /** Paths that `faults.routes` may name. */
  apiRoutePaths: () => readonly string[];
}

/** SandboxControl plus what only the control routes expose. */
export interface InternalControl extends SandboxControl {
  getOptions(): RuntimeOptions;
}

const SeedConversionBody = z.strictObject({
  program: z.string().min(1),
  externalId: z.string().min(1).max(256),
  amount: z.number().int('must be an integer of minor units').nonnegative().max(Number.MAX_SAFE_INTEGER),
  rule: z.string().min(1).optional(),
  currency: z
    .string()
    .regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code')
    .optional(),
  status: z.enum(['pending', 'accepted', 'refused']).optional(),
  createdAt: z.iso.datetime({ offset: true }).optional(),
  commission: z.number().int('must be an integer of minor units').nonnegative().optional(),
});

const ForeignLoadBody = z.strictObject({
  route: z.string().min(1),
  perSecond: z.number().nonnegative().max(10_000),
});

/** Builds the in-process control; the `/_sandbox/` routes call the same methods. */
export function createControl(deps: ControlDeps): InternalControl {
  const { world, faults, limiter, foreign, calls } = deps;
  const { store, settings } = world;

  function change(
    id: string,
    apply: (record: ReturnType<typeof requireConversion>) => void,
  ): StoredConversion {
    const record = requireConversion(world, id);
    materialize(record, world);
    apply(record);
    store.changed();
    return view(record, world);
  }

  function acceptNow(record: ReturnType<typeof requireConversion>): void {
    if (record.status === 'accepted') return;
    record.status = 'accepted';
    record.acceptedAt = isoNow(world);
    record.refuseReason = null;
    record.refusedAt = null;
  }

  return {
    reset() {
      store.clear();
      calls.clear();
      limiter.clear();
      foreign.set({ route: '', perSecond: 0 }, world.now());
      faults.set(deps.startFaults);
      Object.assign(settings, deps.startSettings);
    },
    setFaults(f) {
      faults.set(parseFaultSettings(f, deps.apiRoutePaths()));
    },
    getFaults: () => faults.get(),
    setForeignLoad(load) {
      const parsed = parseOr400(ForeignLoadBody, load);
      if (!deps.apiRoutePaths().includes(parsed.route))
        throw new HttpError(400, `route: ${parsed.route} is not a route of the sandbox`, 'route');
      foreign.set(parsed, world.now());
    },
    getForeignLoad: () => foreign.get(),
    setOptions(o) {
      const parsed = parseRuntimeOptions(o);
      for (const [key, value] of Object.entries(parsed)) {
        if (value !== undefined) Object.assign(settings, { [key]: value });
      }
    },
    getOptions: () => ({
      duplicates: settings.duplicates,
      addResponse: settings.addResponse,
      ratePerSecond: settings.ratePerSecond,
      lockAfterMs: settings.lockAfterMs,
    }),
    calls: () => structuredClone(Object.fromEntries(calls)),
    conversions: () => [...store.conversions].sort((a, b) => a.seq - b.seq).map((r) => view(r, world)),
    seedConversion: (input) => seedConversion(parseOr400(SeedConversionBody, input), world),
    accept: (id) => change(id, acceptNow),
    lock: (id) =>
      change(id, (record) => {
        // Only accepted conversions lock on the platform, so a pending one is accepted first.
        if (record.status === 'pending') acceptNow(record);
        record.forcedLockedAt = isoNow(world);
        record.lockSuspended = false;
      }),
    unlock: (id) =>
      change(id, (record) => {
        record.forcedLockedAt = null;
        record.lockSuspended = true;
      }),
    reopen: (id) =>
      change(id, (record) => {
        record.status = 'pending';
        record.acceptedAt = null;
        record.refuseReason = null;
        record.refusedAt = null;
        record.forcedLockedAt = null;
        record.lockSuspended = true;
      }),
    remove(id) {
      if (!store.removeConversion(id)) throw new HttpError(404, `no conversion ${id}`, 'id');
      store.changed();
    },
    setAmount(id, amount) {
      const valid = parseOr400(Cents, amount);
      return change(id, (record) => {
        record.amount = valid;
        record.amountHistory.push({ amount: valid, reason: 'set by sandbox control', at: isoNow(world) });
      });
    },
  };
}

export interface ControlRoute {
  method: Method;
  path: string;
  body: boolean;
  handle(request: RouteRequest, control: InternalControl): { status: number; body?: unknown };
}

const AmountBody = z.strictObject({ amount: Cents });
const id = (request: RouteRequest): string => request.params['id'] ?? '';

/** The `/_sandbox/` routes: no auth, no rate limit, no faults. */
export const CONTROL_ROUTES: readonly ControlRoute[] = [
  {
    method: 'POST',
    path: '/_sandbox/reset',
    body: false,
    handle: (_r, c) => {
      c.reset();
      return { status: 204 };
    },
  },
  { method: 'GET', path: '/_sandbox/faults', body: false, handle: (_r, c) => ok({ faults: c.getFaults() }) },
  {
    method: 'PUT',
    path: '/_sandbox/faults',
    body: true,
    handle: ({ body }, c) => {
      c.setFaults(body as FaultSettings);
      return ok({ faults: c.getFaults() });
    },
  },
  {
    method: 'GET',
    path: '/_sandbox/options',
    body: false,
    handle: (_r, c) => ok({ options: c.getOptions() }),
  },
  {
    method: 'PUT',
    path: '/_sandbox/options',
    body: true,
    handle: ({ body }, c) => {
      c.setOptions(body as RuntimeOptions);
      return ok({ options: c.getOptions() });
    },
  },
  {
    method: 'GET',
    path: '/_sandbox/foreign-load',
    body: false,
    handle: (_r, c) => ok({ foreignLoad: c.getForeignLoad() }),
  },
  {
    method: 'PUT',
    path: '/_sandbox/foreign-load',
    body: true,
    handle: ({ body }, c) => {
      c.setForeignLoad(body as unknown as ForeignLoad);
      return ok({ foreignLoad: c.getForeignLoad() });
    },
  },
  { method: 'GET', path: '/_sandbox/calls', body: false, handle: (_r, c) => ok({ calls: c.calls() }) },
  {
    method: 'GET',
    path: '/_sandbox/conversions',
    body: false,
    handle: (_r, c) => ok({ conversions: c.conversions() }),
  },
  {
    method: 'POST',
    path: '/_sandbox/conversions',
    body: true,
    handle: (r, c) => ok({ conversion: c.seedConversion(r.body as unknown as SeedConversionInput) }),
  },
  {
    method: 'POST',
    path: '/_sandbox/conversions/{id}/accept',
    body: false,
    handle: (r, c) => ok({ conversion: c.accept(id(r)) }),
  },
  {
    method: 'POST',
    path: '/_sandbox/conversions/{id}/lock',
    body: false,
    handle: (r, c) => ok({ conversion: c.lock(id(r)) }),
  },
  {
    method: 'POST',
    path: '/_sandbox/conversions/{id}/unlock',
    body: false,
    handle: (r, c) => ok({ conversion: c.unlock(id(r)) }),
  },
  {
    method: 'POST',
    path: '/_sandbox/conversions/{id}/reopen',
    body: false,
    handle: (r, c) => ok({ conversion: c.reopen(id(r)) }),
  },
  {
    method: 'PATCH',
    path: '/_sandbox/conversions/{id}',
    body: true,
    handle: (r, c) => ok({ conversion: c.setAmount(id(r), parseOr400(AmountBody, r.body).amount) }),
  },
  {
    method: 'DELETE',
    path: '/_sandbox/conversions/{id}',
    body: false,
    handle: (r, c) => {
      c.remove(id(r));
      return { status: 204 };
    },
  },
];

function ok(body: unknown): { status: number; body: unknown } {
  return { status: 200, body };
}

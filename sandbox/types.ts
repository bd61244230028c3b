import type { Currency } from '../shared/affiliate/schemas.ts';
import type { ShopFakeCredentials, ShopFakePlatform, ShopFakesControl } from './shops/types.ts';

/** Faults the sandbox injects into API routes (never into control routes). */
export interface FaultSettings {
  /** Share 0..1 of requests answered with `errorStatus` (after auth, before work). */
  errorRate?: number;
  /**
   * Status of an injected error; default 503. 422 is a business refusal (permanent for the connector),
   * for a parked message that a replay fixes once the fault is cleared.
   */
  errorStatus?: 500 | 502 | 503 | 422;
  /** Fixed added latency on every API request. */
  latencyMs?: number;
  /** Plus a uniform 0..jitterMs. */
  jitterMs?: number;
  /** Share 0..1 of requests never answered: the socket is held until the client gives up or `hangMs`. */
  hangRate?: number;
  /** How long a hung request holds its socket before the sandbox drops it; default 30 000. */
  hangMs?: number;
  /**
   * Share 0..1 of requests done late: not answered (held like a hang, until the client gives up or
   * `hangMs`), yet carried out `lateWriteMs` after they arrived, as a slow platform behind a proxy
   * records an add after its caller timed out.
   */
  lateWriteRate?: number;
  /** How long after the request a late write is carried out, on the sandbox's clock (`now`); default 20 000. */
  lateWriteMs?: number;
  /** The next N requests are answered 429 (a forced burst). */
  burst429?: number;
  /** `retry-after` announced during a forced burst; default 200. */
  burstRetryAfterMs?: number;
  /** Restrict faults to these route paths (default: all API routes). */
  routes?: string[];
  /** PRNG seed for the fault draws; default 1, so runs repeat. */
  seed?: number;
}

/** Fixed ids of the seeded advertiser account. */
export interface SeedIds {
  advertiser: string;
  /** Program i has currency EUR when i is even, USD when odd. */
  programs: string[];
  /** Two per program, in program order: rules[2i] and rules[2i + 1] belong to programs[i]. */
  rules: string[];
  /** Valid in every program; partnership i has tracking id trackingIds[i]. */
  partnerships: string[];
  groups: string[];
  users: string[];
  trackingIds: number[];
}

export interface SandboxOptions {
  /** 0 = any free port; main.ts defaults to SANDBOX_PORT or 4010. */
  port?: number;
  /** @default '127.0.0.1' */
  host?: string;
  /** Bearer token of the API routes. @default 'sandbox-token' */
  token?: string;
  /** User code of the legacy `/2.0/` routes (HTTP Basic user). @default 'sandbox-user' */
  legacyUserCode?: string;
  /** API key of the legacy `/2.0/` routes (HTTP Basic password). @default 'sandbox-key' */
  legacyApiKey?: string;
  /** Word in the rate-limit header names (`x-<vendor>-ratelimit-…`). @default 'svc' */
  vendor?: string;
  /** Requests per route per token per one-second window. @default 100 */
  ratePerSecond?: number;
  /** What a second add with the same program + externalId does. @default 'create' */
  duplicates?: 'create' | 'reject';
  /** Shape of the conversions.add answer. @default 'bare' */
  addResponse?: 'bare' | 'withId';
  /** An accepted conversion locks this long after acceptance. @default 20 days */
  lockAfterMs?: number;
  /** Pending conversions count as accepted this long after creation. @default never */
  autoAcceptAfterMs?: number;
  faults?: FaultSettings;
  /** JSON file loaded at start when present and rewritten after every change. */
  persistPath?: string;
  seed?: Partial<SeedIds>;
  /** Clock in epoch milliseconds, for tests; late writes land when it reaches their time. @default Date.now */
  now?: () => number;
  /** Credentials the shop API fakes accept. @default DEFAULT_SHOP_FAKE_CREDENTIALS */
  shops?: Partial<ShopFakeCredentials>;
}

/** Options that can change while the sandbox runs. */
export type RuntimeOptions = Pick<
  SandboxOptions,
  'duplicates' | 'addResponse' | 'ratePerSecond' | 'lockAfterMs'
>;

export type ConversionKind = 'tracking' | 'bonus' | 'manual';
export type ConversionStatusValue = 'pending' | 'accepted' | 'refused';

export interface AmountChange {
  amount: number;
  reason: string;
  at: string;
}

/** A conversion as the sandbox answers it (status and lock computed from the clock at read time). */
export interface StoredConversion {
  id: string;
  program: string;
  rule: string;
  kind: ConversionKind;
  externalId: string;
  amount: number;
  currency: Currency;
  status: ConversionStatusValue;
  refuseReason: string | null;
  refusedAt: string | null;
  isLocked: boolean;
  lockedAt: string | null;
  acceptedAt: string | null;
  customerId: string | null;
  subId: string;
  createdAt: string;
  date: string;
  cids: string[] | null;
  ip: string | null;
  voucher: string;
  product: string[] | null;
  paymentMethod: string | null;
  affiliateTrackingId: number | null;
  partnership: string | null;
  bonus: number | null;
  notify: boolean;
  amountHistory: AmountChange[];
  /**
   * Minor units: 10 % of the amount (half a unit rounded up), or the commission given when seeding or
   * by a legacy add.
   */
  commission: number;
}

/** A conversion recorded as the platform's browser pixel would (`POST /_sandbox/conversions`). */
export interface SeedConversionInput {
  /** A seeded program. */
  program: string;
  externalId: string;
  amount: number;
  /** @default the program's first rule */
  rule?: string;
  /** @default the program's currency */
  currency?: string;
  /** @default 'pending' */
  status?: ConversionStatusValue;
  /** @default now */
  createdAt?: string;
  /** @default 10 % of the amount, half a unit rounded up */
  commission?: number;
}

export interface StoredCommissionAdjustment {
  id: string;
  type: 'bonus' | 'fixed_fees';
  program: string;
  partnership: string;
  identifier: string;
  commission: number;
  comment: string | null;
  currency: Currency;
  date: string;
  status: 'accepted' | 'pending';
  createdAt: string;
}

export interface CallCount {
  total: number;
  /** By HTTP status, plus `hang` for requests that were never answered. */
  byStatus: Record<string, number>;
}

/** In-process mirror of the `/_sandbox/` control routes. Methods throw when the conversion is unknown. */
export interface SandboxControl {
  /** Empties conversions, adjustments, call counts and rate windows; restores start faults and options. */
  reset(): void;
  /** Replaces the fault settings (validated; throws naming the bad field). */
  setFaults(f: FaultSettings): void;
  /** Current fault settings; `burst429` is what remains of the burst. */
  getFaults(): FaultSettings;
  setOptions(o: Partial<RuntimeOptions>): void;
  /**
   * Another client of the same token takes `perSecond` requests per second of `route`'s budget
   * (0 stops it); what the connector sees in the rate-limit headers and 429s. Cleared by reset.
   */
  setForeignLoad(load: { route: string; perSecond: number }): void;
  getForeignLoad(): { route: string; perSecond: number } | null;
  calls(): Record<string, CallCount>;
  conversions(): StoredConversion[];
  /**
   * Records a conversion as the platform's browser pixel does (no click ids, no connector): the
   * "pixel" side of a shadow-mode comparison. Throws naming the bad field.
   */
  seedConversion(input: SeedConversionInput): StoredConversion;
  /** Accepts now, whatever the status. */
  accept(id: string): StoredConversion;
  /** Locks now (accepting a pending conversion first). */
  lock(id: string): StoredConversion;
  /** Unlocks and keeps it unlocked until `lock` is called again. */
  unlock(id: string): StoredConversion;
  /**
   * Sets it pending again, whatever the status: not accepted, not refused, unlocked until `lock` is
   * called again (the platform's support reopening a conversion).
   */
  reopen(id: string): StoredConversion;
  remove(id: string): void;
  /** Sets the amount whatever the status, recorded in amountHistory. */
  setAmount(id: string, amount: number): StoredConversion;
}

export interface RunningSandbox {
  /** Base URL without trailing slash, e.g. `http://127.0.0.1:4010`. */
  url: string;
  port: number;
  token: string;
  /** Credentials of the legacy `/2.0/` routes (HTTP Basic). */
  legacy: { userCode: string; apiKey: string };
  seed: SeedIds;
  control: SandboxControl;
  /** The fakes of the shop APIs (docs/backfill.md): base URL per platform, credentials, control. */
  shops: {
    /** The `shopApi.url` of a source reading the fake: `<url>/shopify`, `<url>/woocommerce`, `<url>/stripe`. */
    urls: Record<ShopFakePlatform, string>;
    credentials: ShopFakeCredentials;
    control: ShopFakesControl;
  };
  /** Stops listening, drops open sockets (hung requests included) and resolves promptly. */
  close(): Promise<void>;
}

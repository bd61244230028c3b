import type { UnattributedPolicy } from '../config/sources.ts';
import type { OrderPlaced } from '../domain/events.ts';

export type AttributionDecision =
  | { readonly kind: 'tracking'; readonly cids: string[]; readonly ip: string }
  | { readonly kind: 'manual'; readonly affiliateTrackingId: number; readonly viaPolicy: boolean }
  | { readonly kind: 'skip'; readonly reason: string };

const CLICK_ID = /^[0-9a-f]{24}$/i;

/**
 * Chooses the Conversion Add mode from the spec's rules: tracking needs click ids AND the buyer's IP;
 * manual needs an affiliate tracking id; the spec has no mode for a sale with neither, so the source's
 * policy decides (skip by default, or credit a house affiliate in manual mode).
 */
export function decideAttribution(event: OrderPlaced, policy: UnattributedPolicy): AttributionDecision {
  const cids = [...new Set(event.clickIds.filter((c) => CLICK_ID.test(c)).map((c) => c.toLowerCase()))];
  if (cids.length > 0 && event.buyerIp) return { kind: 'tracking', cids, ip: event.buyerIp };
  if (event.affiliateTrackingId !== undefined) {
    return { kind: 'manual', affiliateTrackingId: event.affiliateTrackingId, viaPolicy: false };
  }
  if (policy.mode === 'manual') {
    return { kind: 'manual', affiliateTrackingId: policy.affiliateTrackingId, viaPolicy: true };
  }
  let reason = 'no affiliate signal (no click id, no affiliate tracking id)';
  if (cids.length > 0) reason = 'click ids present but no buyer IP: tracking mode needs both';
  else if (event.clickIds.length > 0) reason = 'click ids present but none is 24 hexadecimal characters';
  return { kind: 'skip', reason };
}

/** The spec's datetime format for values sent: UTC with milliseconds. */
export function toApiDate(iso: string | undefined): string | undefined {
  if (!iso) return undefined;
  const time = Date.parse(iso);
  return Number.isNaN(time) ? undefined : new Date(time).toISOString();
}

import type { AcceptDeps } from '../../shared/accept/job.ts';
import { SourceConfig } from '../../shared/config/sources.ts';
import type { ConversionBackend, FailureAttributes } from '../../shared/ports.ts';

/**
 * The generic source `shop` of `program`, whose conversions are accepted 30 days after the order:
 * the return window `dueRecord` dates its records by.
 */
export function acceptingShop(program: string): SourceConfig {
  return SourceConfig.parse({
    id: 'shop',
    platform: 'generic',
    program,
    rule: 'bbbbbbbbbbbbbbbbbbbbbbbb',
    secretRef: 'S',
    acceptAfterDays: 30,
  });
}

/**
 * The accept job's dependencies for `source` alone, calling `platform`, with a 60 s lease; what it
 * parks is kept in `parked`, failure by failure.
 */
export function acceptDeps(
  ledger: AcceptDeps['ledger'],
  platform: ConversionBackend,
  source: SourceConfig,
  now: () => number,
): { deps: AcceptDeps; parked: FailureAttributes[] } {
  const parked: FailureAttributes[] = [];
  const deps: AcceptDeps = {
    ledger,
    sources: new Map([[source.id, source]]),
    backendFor: () => platform,
    failures: {
      park: async (_message, failure) => {
        parked.push(failure);
      },
    },
    now,
    leaseMs: 60_000,
  };
  return { deps, parked };
}

/**
 * What the Lambda bundles load in place of `@smithy/core/event-streams` (CONNECTOR_BUNDLING aliases
 * it here). The SDK's protocols import it on demand (`import()`), only for an operation whose input
 * or output is an event stream; no operation of the clients the functions bundle (SQS, DynamoDB,
 * Secrets Manager) has one (test/unit/no-event-streams.test.ts checks every command). Yet esbuild
 * bundles an `import()` of a module by wrapping that module, and every module it reaches, in a
 * function run on first use: about 150 of @smithy/core's modules, which then ran at load inside
 * those wrappers, each parsed twice. Without it each bundle is about 20 KiB smaller and the worker
 * loads about 7 ms sooner here (docs/benchmarks.md). A call that did reach it fails with this error
 * instead of sending or reading a stream. The CLI and the local stack run from source with the SDK
 * as it is.
 */

function leftOut(): Error {
  return new Error(
    "@smithy/core/event-streams: event streams are left out of this bundle (no operation of the connector's AWS clients uses one; see shared/adapters/no-event-streams.ts)",
  );
}

/** Stands in for the event stream codec: fails, as no operation here sends or reads a stream. */
export class EventStreamSerde {
  constructor(_options: unknown) {
    throw leftOut();
  }
}

/** Stands in for the event stream marshaller's provider: fails the same way. */
export function eventStreamSerdeProvider(_options: unknown): never {
  throw leftOut();
}

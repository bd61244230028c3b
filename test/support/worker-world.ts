import { afterAll, beforeAll } from 'vitest';
import { type Emulators, startEmulators } from '../../infra/local/emulators.ts';
import type { RuntimeOptions } from '../../sandbox/types.ts';
import { CurrentApiBackend } from '../../shared/affiliate/backend.ts';
import { AffiliateClient } from '../../shared/affiliate/client.ts';
import type { ConversionBackend } from '../../shared/ports.ts';
import { sandboxForTests, type TestSandbox } from './sandbox.ts';

/** What a worker talks to, in process, for one test file. */
export interface WorkerWorld {
  /** Dynalite (the ledger's table) and fauxqs. */
  readonly emulators: Emulators;
  readonly sandbox: TestSandbox;
  /** The current API's backend over the real client to `sandbox`. */
  readonly platform: ConversionBackend;
}

/**
 * The emulators and the platform sandbox (`sandboxForTests` with `options`) for one test file,
 * started before its tests and closed after, with the backend a worker calls the sandbox through.
 */
export function workerWorld(options: Partial<RuntimeOptions> = {}): WorkerWorld {
  const sandbox = sandboxForTests(options);
  let emulators: Emulators | undefined;
  let platform: ConversionBackend | undefined;
  beforeAll(async () => {
    emulators = await startEmulators();
    platform = new CurrentApiBackend(
      new AffiliateClient({ baseUrl: sandbox.url, token: sandbox.token, timeoutMs: 5_000 }),
    );
  });
  afterAll(async () => {
    await emulators?.close();
  });
  return {
    sandbox,
    get emulators() {
      if (!emulators) throw new Error('the emulators are started in beforeAll');
      return emulators;
    },
    get platform() {
      if (!platform) throw new Error('the backend is made in beforeAll');
      return platform;
    },
  };
}

import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { SOURCE_PLATFORMS } from '../../../shared/domain/platforms.ts';
import { adapterFor } from '../../../shared/platforms/registry.ts';

const REGISTRY = new URL('../../../shared/platforms/registry.ts', import.meta.url).href;
const FUNCTIONS = new URL('../../../functions/', import.meta.url);

/**
 * Imports `module` (the registry by default) in a fresh Node process that records every module it
 * loads, then runs `steps` (the registry is `registry`), and returns which adapter modules had been
 * loaded after the import and after each step.
 */
function adapterModulesLoaded(steps: readonly string[], module = REGISTRY): string[][] {
  const script = `
    import { registerHooks } from 'node:module';
    const loaded = new Set();
    registerHooks({ load(url, context, next) { loaded.add(url); return next(url, context); } });
    const adapters = () => [...loaded]
      .map((url) => /\\/shared\\/platforms\\/(${SOURCE_PLATFORMS.join('|')})\\.ts$/.exec(url)?.[1])
      .filter((name) => name !== undefined)
      .sort();
    const seen = [];
    await import(${JSON.stringify(module)});
    seen.push(adapters());
    const registry = await import(${JSON.stringify(REGISTRY)});
    for (const step of ${JSON.stringify(steps)}) {
      await new Function('registry', 'return (async () => { ' + step + ' })()')(registry);
      seen.push(adapters());
    }
    console.log(JSON.stringify(seen));
  `;
  const out = execFileSync(process.execPath, ['--input-type=module', '--no-warnings', '-e', script], {
    encoding: 'utf8',
  });
  return JSON.parse(out) as string[][];
}

describe('adapterFor', () => {
  it.each(SOURCE_PLATFORMS)('gives the %s adapter', async (platform) => {
    // Act / Assess
    expect((await adapterFor(platform)).platform).toBe(platform);
  });

  it('keeps the promise of each platform: later calls get it settled, not a new import', () => {
    // Act / Assess
    expect(adapterFor('stripe')).toBe(adapterFor('stripe'));
  });

  it('rejects a platform it has no adapter for', async () => {
    // Act / Assess
    await expect(adapterFor('magento' as 'generic')).rejects.toThrow('no adapter for platform magento');
  });

  it('loads an adapter (its schemas) only when a source of its platform first needs it', () => {
    // Arrange: a webhook function serves its sources' platforms; the others' schemas cost cold start.
    const steps = [
      "registry.subscriptionTopics({ platform: 'stripe' }); registry.subscriptionTopics({ platform: 'woocommerce' });",
      "await registry.adapterFor('woocommerce');",
      "await registry.adapterFor('woocommerce'); await registry.adapterFor('shopify');",
    ];

    // Act
    const loaded = adapterModulesLoaded(steps);

    // Assess
    expect(loaded).toEqual([[], [], ['woocommerce'], ['shopify', 'woocommerce']]);
  });

  it.each(['webhook.ts', 'catch-up.ts'])('leaves every adapter unloaded when %s is imported', (entry) => {
    // Act: the function's module initialisation, as a cold start runs it
    const [atImport] = adapterModulesLoaded([], new URL(entry, FUNCTIONS).href);

    // Assess
    expect(atImport).toEqual([]);
  });
});

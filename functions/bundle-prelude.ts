import { installSourceMappedStacks } from '../shared/adapters/source-mapped-stacks.ts';

/**
 * The first code of every function bundle (CONNECTOR_BUNDLING injects it with esbuild's `inject`),
 * not a function of its own: the bundle's stack traces name our TypeScript, its map read on the
 * first stack printed rather than at every cold start (shared/adapters/source-mapped-stacks.ts).
 * Only the bundles run it: the local stack and the tests run the sources, whose stacks already name
 * them.
 */
installSourceMappedStacks();

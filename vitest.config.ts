import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two files at a time: on a 2-core machine the default (one fewer than the cores) ran them one by
    // one, 450 s for the suite; most of their time is waiting on sockets, timers and child processes.
    maxWorkers: 2,
  },
});

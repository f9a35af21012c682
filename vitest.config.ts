import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The measured image's end-to-end test builds a Debian root and boots VMs: `npm run test:image` runs it alone.
    exclude: [...configDefaults.exclude, 'test/image/boot.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // At least two: on two cores vitest's default is one, and most of a file's time is spent waiting on a socket or a
    // child process, while the other core idles.
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});

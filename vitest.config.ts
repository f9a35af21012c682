import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The measured image's end-to-end test builds a Debian root and boots VMs: `npm run test:image` runs it alone.
    exclude: [...configDefaults.exclude, 'test/image/boot.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});

import { defineConfig } from 'vitest/config';

/** `npm run test:image`: the measured image built, booted under QEMU and verified (docs/image.md, "Test"), in order, alone. */
export default defineConfig({
  test: {
    root: new URL('../../', import.meta.url).pathname,
    include: ['test/image/**/*.test.ts'],
    testTimeout: 10 * 60 * 1000,
    hookTimeout: 45 * 60 * 1000,
    pool: 'forks',
    fileParallelism: false,
  },
});

import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';

/** The measured image's end-to-end test builds a Debian root and boots VMs: `npm run test:image` runs it alone. */
const IMAGE_BOOT = 'test/image/boot.test.ts';

/**
 * The files that start other programs (Redis, pebble, haproxy, a browser, gcc, `npm run build`, the built CLI,
 * `sigil serve` with its workers) or run long: each keeps a module graph of its own. Everything else is the quick
 * loop, `npm run test:unit` (README, "Tests").
 */
export const SYSTEM_TESTS = [
  'test/{architecture,build,cli,e2e,engine,fleet,trust-page}/**/*.test.ts',
  'test/verify/cli.test.ts',
  'test/tls/acme.test.ts',
  'test/ehbp/haproxy.test.ts',
  'test/attestation/gpu-nvml.test.ts',
  'test/attestation/sealed-keys.test.ts',
  // Multi-process: `sigil serve` started as its own process (and its workers); slowest by measurement.
  'test/workers/**/*.test.ts',
  'test/http/bounded-memory.test.ts',
  'test/http/shutdown.test.ts',
  'test/security/inspector-signal.test.ts',
  'test/tlog/log-workers.test.ts',
  // `sigil serve`, `sigil log verify` (ten times in log-refusals) or the image scripts as processes of their own.
  'test/tlog/log-{faults,fencing,mirror,refusals}.test.ts',
  'test/release/image-measure.test.ts',
  // 150,000 log entries: 10 s of CPU, 30 s at a load of 15.
  'test/tlog/log-memory.test.ts',
];

/** `npm test`: both projects; `npm run test:unit`: the `unit` project alone. */
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // At least two: on two cores vitest's default is one, and most of a file's time is spent waiting on a socket or a
    // child process, while the other core idles.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, IMAGE_BOOT, ...SYSTEM_TESTS],
          // One module graph per worker, not one per file: importing the sources again for each file was most of
          // the run. A file here must leave nothing behind in the process (README, "Tests").
          isolate: false,
        },
      },
      {
        extends: true,
        test: { name: 'system', include: SYSTEM_TESTS, exclude: [...configDefaults.exclude, IMAGE_BOOT] },
      },
    ],
  },
});

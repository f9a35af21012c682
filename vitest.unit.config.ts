import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig, mergeConfig } from 'vitest/config';
import base from './vitest.config.ts';

/**
 * `npm run test:unit`: the contributor's loop, at most 3 minutes on a shared 2-core machine (README, "Tests").
 * `npm test` runs everything, these included.
 */
export default mergeConfig(
  base,
  defineConfig({
    test: {
      // One module graph per worker, not one per file: importing the sources again for each file was most of the run.
      isolate: false,
      // At least two: on two cores vitest's default is one, and one core then idles while a test waits on a socket or a process.
      maxWorkers: Math.max(2, availableParallelism() - 1),
      exclude: [
        ...configDefaults.exclude,
        'test/image/boot.test.ts',
        // Redis, pebble, haproxy, a browser, gcc, the built CLI or `npm run build`.
        'test/{architecture,build,cli,e2e,engine,fleet,trust-page}/**',
        'test/verify/cli.test.ts',
        'test/tls/acme.test.ts',
        'test/ehbp/haproxy.test.ts',
        'test/attestation/gpu-nvml.test.ts',
        'test/attestation/sealed-keys.test.ts',
        // Multi-process: `sigil serve` started as its own process (and its workers); slowest by measurement.
        'test/workers/**',
        'test/http/bounded-memory.test.ts',
        'test/http/shutdown.test.ts',
        'test/security/inspector-signal.test.ts',
        'test/tlog/log-workers.test.ts',
        // `sigil serve`, `sigil log verify` (ten times in log-refusals) or the image scripts as processes of their own.
        'test/tlog/log-{faults,fencing,mirror,refusals}.test.ts',
        'test/release/image-measure.test.ts',
        // 150,000 log entries: 10 s of CPU, 30 s at a load of 15.
        'test/tlog/log-memory.test.ts',
      ],
    },
  }),
);

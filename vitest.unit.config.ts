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
      ],
    },
  }),
);

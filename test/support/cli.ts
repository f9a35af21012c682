import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * `node` arguments that run the `sigil` command from the TypeScript sources (through tsx's loader), so a
 * test of the CLI tests the code beside it, not whatever `npm run build` last left in dist/.
 * test/build/dist.test.ts runs the compiled bin/sigil.js.
 */
export const SIGIL_FROM_SOURCES = [
  '--import',
  pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href,
  fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url)),
];

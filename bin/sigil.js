#!/usr/bin/env node
// Runs the compiled JavaScript in dist/ (`npm run build`); nothing is transpiled at run time.
import { existsSync } from 'node:fs';

const main = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('sigil: dist/ is missing: run `npm run build` first.\n');
  process.exit(1);
}
const { main: run } = await import(main.href);
process.exitCode = await run(process.argv.slice(2));

#!/usr/bin/env node
// Bundles the trust page (src/trust-page) for browsers into dist/trust-page: index.html, trust/app.js, trust/styles.css.
// The verifier code is the one Node runs; node:crypto and Buffer are swapped for browser-ready equivalents at bundle time.
import { copyFile, mkdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadEsbuild } from './load-esbuild.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'src/trust-page');
const out = resolve(root, process.argv[2] ?? 'dist/trust-page');

await mkdir(join(out, 'trust'), { recursive: true });
const { build } = await loadEsbuild();
await build({
  entryPoints: [join(source, 'app.ts')],
  outfile: join(out, 'trust/app.js'),
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022'],
  minify: true,
  sourcemap: false,
  legalComments: 'linked',
  // xml-crypto (RIM signatures) asks for `crypto` and `util` without the node: prefix.
  alias: {
    'node:crypto': join(source, 'browser/node-crypto.ts'),
    crypto: join(source, 'browser/node-crypto.ts'),
    'node:buffer': join(source, 'browser/buffer-global.ts'),
    util: join(source, 'browser/node-util.ts'),
  },
  inject: [join(source, 'browser/buffer-global.ts')],
  logLevel: 'warning',
});
await copyFile(join(source, 'index.html'), join(out, 'index.html'));
await copyFile(join(source, 'styles.css'), join(out, 'trust/styles.css'));

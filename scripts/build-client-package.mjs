#!/usr/bin/env node
// Builds packages/client (@sigil/client, docs/connect.md "Install"): the verifier, the attested client and `sigil connect`
// bundled by esbuild from the same sources the proxy runs (src/verify, src/client, src/connect), with every npm package left
// external. It fails if the bundle needs a package packages/client/package.json does not list: that list is all it installs.
import { spawnSync } from 'node:child_process';
import { build, transform } from 'esbuild';
import { readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = join(root, 'packages/client');
const out = join(pkg, 'dist');
const manifest = JSON.parse(await readFile(join(pkg, 'package.json'), 'utf8'));

/** Data files bundled into the package rather than installed with theirs: @sigstore/tuf's seeds (its code fetches, and weighs 8 MB installed). */
const BUNDLED = ['@sigstore/tuf/seeds.json'];
const bundledData = {
  name: 'bundled-data',
  setup(b) {
    b.onResolve({ filter: /\.json$/ }, (args) => (BUNDLED.includes(args.path) ? { path: require.resolve(args.path) } : undefined));
  },
};

/**
 * Code bundled rather than installed, minified (comments are much of its weight, and the installed size has a budget):
 * zod/mini, the part of zod the reference-values schema uses (zod weighs 6 MB installed), and commander, the parser of
 * every sigil command sigil-connect shares (a CommonJS module: the banner gives its require of node's modules a `require`).
 */
const BUNDLED_CODE = ['zod/mini', 'commander'];
const bundledCode = {
  name: 'bundled-code',
  setup(b) {
    b.onResolve({ filter: /^(zod\/|commander$)/ }, (args) => (BUNDLED_CODE.includes(args.path) ? { path: require.resolve(args.path) } : undefined));
    b.onLoad({ filter: /[\\/]node_modules[\\/](commander|zod)[\\/].*\.c?js$/ }, async (args) => ({
      contents: (await transform(await readFile(args.path, 'utf8'), { minify: true, loader: 'js', legalComments: 'inline' })).code,
      loader: 'js',
    }));
  },
};

await rm(out, { recursive: true, force: true });
const result = await build({
  entryPoints: {
    client: join(root, 'src/client/index.ts'),
    verify: join(root, 'src/verify/index.ts'),
    connect: join(root, 'src/connect/start.ts'),
    'connect-cli': join(root, 'src/cli/connect.ts'),
  },
  outdir: out,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: ['node24'],
  packages: 'external',
  metafile: true,
  plugins: [bundledData, bundledCode],
  banner: { js: "import { createRequire as __sigilCreateRequire } from 'node:module'; const require = __sigilCreateRequire(import.meta.url);" },
  legalComments: 'linked',
  logLevel: 'warning',
});

const needed = new Set();
for (const output of Object.values(result.metafile.outputs)) {
  for (const imported of output.imports) {
    if (!imported.external || imported.path.startsWith('node:')) continue;
    const parts = imported.path.split('/');
    needed.add(imported.path.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]);
  }
}
const listed = new Set(Object.keys(manifest.dependencies ?? {}));
const missing = [...needed].filter((name) => !listed.has(name)).sort();
const unused = [...listed].filter((name) => !needed.has(name)).sort();
if (missing.length > 0 || unused.length > 0) {
  process.stderr.write(
    `build-client-package: packages/client/package.json must list exactly what the bundle imports: ` +
      `missing ${JSON.stringify(missing)}, not imported ${JSON.stringify(unused)}\n`,
  );
  process.exit(1);
}
// TypeScript declarations of the three entry points, from the same sources (packages/client/tsconfig.types.json).
const types = spawnSync(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(pkg, 'tsconfig.types.json')], { stdio: 'inherit' });
if (types.status !== 0) {
  process.stderr.write('build-client-package: the TypeScript declarations did not build\n');
  process.exit(1);
}
process.stdout.write(
  `build-client-package: ${Object.keys(result.metafile.outputs).length} files in packages/client/dist; dependencies: ${[...needed].sort().join(', ')}\n`,
);

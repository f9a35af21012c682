// npm run build's compile step: the library (dist/**/*.js, what `sigil/client` and `sigil/verify` export) and the
// artifact Sigil runs as (docs/attestation.md, "What is measured"): dist/sigil/, one bundle of Sigil's code and its
// production JavaScript dependencies (main.mjs and the chunks it imports when first needed), and
// dist/addons/koffi.node, the one native addon, loaded by absolute path.
// node-llama-cpp is optional: a proxy-only install (`npm install --omit=optional`) lacks its types, so the engine's
// sources compile against a stand-in declaration (scripts/proxy-only/) and `sigil engine` says at run time that the
// engine is not installed. It stays outside the bundle either way: the built-in engine loads it in its own process.
import { spawnSync } from 'node:child_process';
import { copyFile, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadEsbuild } from './load-esbuild.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = resolve(root, process.argv[2] ?? 'dist');
const require = createRequire(import.meta.url);

let project = 'tsconfig.build.json';
try {
  require.resolve('node-llama-cpp');
} catch {
  project = 'tsconfig.proxy-only.json';
  process.stderr.write('build: node-llama-cpp is not installed: building the proxy without the built-in engine\n');
}
const tsc = spawnSync(
  process.execPath,
  [require.resolve('typescript/bin/tsc'), '-p', join(root, project), '--outDir', out, '--tsBuildInfoFile', join(out, '.tsbuildinfo')],
  {
    stdio: 'inherit',
  },
);
if (tsc.status !== 0) process.exit(tsc.status ?? 1);

const src = join(root, 'src');
// The built-in engine's package (packages/engine, where node_modules links it): its sources map to dist/engine/, where
// copy-assets puts its files.
const engineSrc = join(dirname(require.resolve('@sigil/engine/package.json')), 'src');
const bundleDir = join(out, 'sigil');

/** Where a file beside the sources is in dist/: src/x under dist/x, the engine's packages/engine/src/x under dist/engine/x. */
function inDist(target) {
  if (target.startsWith(src + '/')) return join(out, relative(src, target));
  if (target.startsWith(engineSrc + '/')) return join(out, 'engine', relative(engineSrc, target));
  return target;
}
const sourceUrl = /new URL\((['"])(\.{1,2}\/[^'"]+)\1, import\.meta\.url\)/g;

/**
 * A `new URL('./x', import.meta.url)` written beside a source file is rewritten to name the same file seen from
 * dist/sigil/ (inDist: where tsc and copy-assets put it).
 */
const relocateUrls = {
  name: 'relocate-urls',
  setup(b) {
    b.onLoad({ filter: /[\\/]src[\\/].*\.ts$/ }, async (args) => {
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      const contents = text.replace(sourceUrl, (whole, quote, rel) => {
        const fromBundle = relative(bundleDir, inDist(resolve(dirname(args.path), rel)));
        return `new URL(${quote}${fromBundle.startsWith('.') ? fromBundle : `./${fromBundle}`}${quote}, import.meta.url)`;
      });
      return { contents, loader: 'ts' };
    });
  },
};

await rm(bundleDir, { recursive: true, force: true });
// esbuild's native binary, or esbuild-wasm where a proxy-only install (--omit=optional) dropped it.
const { build } = await loadEsbuild();
await build({
  absWorkingDir: root,
  entryPoints: { main: join(src, 'cli/main.ts') },
  outdir: bundleDir,
  outExtension: { '.js': '.mjs' },
  // What only a dynamic import reaches (a command, the built-in engine, which imports node-llama-cpp) goes in a
  // chunk beside main.mjs, evaluated when first imported; the launcher hashes every file of dist/sigil/ at launch.
  splitting: true,
  chunkNames: '[name]-[hash]',
  bundle: true,
  format: 'esm',
  platform: 'node',
  target: ['node24'],
  // The built-in engine's package loads in the engine's own process; koffi is loaded as dist/addons/koffi.node.
  external: ['node-llama-cpp', '@node-llama-cpp/*', 'koffi'],
  // Bundled CommonJS packages call require() for Node's own modules and name their folder.
  banner: {
    js: "import { createRequire as __sigilCreateRequire } from 'node:module'; const require = __sigilCreateRequire(import.meta.url);",
  },
  legalComments: 'eof',
  sourcemap: false,
  plugins: [relocateUrls],
  logLevel: 'warning',
});

// V8 keeps every module's source as a string for the life of the process, at one byte a character while the text
// is Latin-1 and two bytes otherwise: one `—` in a comment doubled a chunk's memory (about 5 MB for the four largest).
// esbuild writes code ASCII-only (its default charset) but keeps comments as written, so what is wider is in comments:
// spelled in ASCII there. A wide character found anywhere else stops the build rather than change code.
const WIDE = /[\u0100-\u{10ffff}]/gu;
const ASCII_FOR = { '\u2014': '--', '\u2013': '-', '\u2212': '-', '\u2026': '...', '\u2018': "'", '\u2019': "'", '\u201c': '"', '\u201d': '"' };
for (const name of await readdir(bundleDir)) {
  if (!name.endsWith('.mjs')) continue;
  const file = join(bundleDir, name);
  const text = await readFile(file, 'utf8');
  if (text.search(WIDE) === -1) continue;
  const narrowed = text.replace(WIDE, (char, at) => {
    const line = text.slice(text.lastIndexOf('\n', at - 1) + 1, at);
    const inBlockComment = text.lastIndexOf('/*', at) > text.lastIndexOf('*/', at);
    if (!inBlockComment && !line.includes('//')) {
      throw new Error(`build: ${name} has ${JSON.stringify(char)} outside a comment: ${JSON.stringify(line.slice(-60))}`);
    }
    return ASCII_FOR[char] ?? '?';
  });
  await writeFile(file, narrowed);
}

// koffi's native module for this platform, as koffi itself finds it (@koromix/koffi-<platform>-<arch>): an optional
// dependency of koffi, so a proxy-only install (--omit=optional) lacks it. That build then has no addon, and what needs
// it (NVML for GPU evidence, the SEV-SNP key request) says at use that koffi is not part of this build.
const triplet = `${process.platform}_${process.arch}`;
const fromKoffi = createRequire(require.resolve('koffi'));
const koffiPackage = `@koromix/koffi-${process.platform}-${process.arch}`;
await rm(join(out, 'addons'), { recursive: true, force: true });
await mkdir(join(out, 'addons'), { recursive: true });
let koffiRoot;
try {
  koffiRoot = dirname(fromKoffi.resolve(`${koffiPackage}/package.json`));
} catch {
  process.stderr.write(`build: ${koffiPackage} is not installed (an optional dependency): the artifact has no koffi addon, so no GPU evidence\n`);
}
if (koffiRoot !== undefined) await copyFile(join(koffiRoot, triplet, 'koffi.node'), join(out, 'addons/koffi.node'));

#!/usr/bin/env node
// Sigil's launcher (docs/attestation.md, "What is measured"). It reads the bundle dist/sigil.mjs once, hashes those
// bytes, and has Node evaluate that same buffer: a module load hook answers the bundle's URL from memory, so no later
// read of the file can differ from what was hashed. It hashes itself and the native addons too, and hands the
// listing to the bundle, which measures it as the code.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = new URL('../', import.meta.url);
const bundleUrl = new URL('dist/sigil.mjs', root).href;
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

let bundle;
try {
  bundle = readFileSync(new URL(bundleUrl));
} catch {
  process.stderr.write('sigil: dist/sigil.mjs is missing: run `npm run build` first.\n');
  process.exit(1);
}
let addons = [];
try {
  addons = readdirSync(new URL('dist/addons/', root)).map((name) => `dist/addons/${name}`);
} catch {
  // a build without native addons: GPU and SEV-SNP key requests then say koffi is missing
}
const files = [
  { path: 'bin/sigil.js', sha256: sha256(readFileSync(new URL(import.meta.url))) },
  { path: 'dist/sigil.mjs', sha256: sha256(bundle) },
  ...addons.map((path) => ({ path, sha256: sha256(readFileSync(new URL(path, root))) })),
].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
const listing = files.map((f) => `${f.sha256}  ${f.path}\n`).join('');

// A cluster worker or the engine's process runs this launcher again: it must run what its parent measured.
const parent = process.env.SIGIL_ARTIFACT_SHA256;
if ((process.env.NODE_UNIQUE_ID !== undefined || process.env.NODE_CHANNEL_FD !== undefined) && parent !== undefined && parent !== sha256(listing)) {
  process.stderr.write('sigil: the artifact on disk changed since the parent process measured it: refusing to run it.\n');
  process.exit(1);
}
process.env.SIGIL_ARTIFACT_SHA256 = sha256(listing);

registerHooks({
  load: (url, context, next) => (url === bundleUrl ? { format: 'module', source: bundle, shortCircuit: true } : next(url, context)),
});
Object.defineProperty(globalThis, Symbol.for('sigil.artifact'), { value: Object.freeze({ root: fileURLToPath(root), listing }) });
const { main } = await import(bundleUrl);
process.exitCode = await main(process.argv.slice(2));

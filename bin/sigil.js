#!/usr/bin/env node
// Sigil's launcher (docs/attestation.md, "What is measured: one artifact"). It reads every file of the bundle
// (dist/sigil/) once, hashes those bytes, and has Node evaluate those same buffers: a module load hook answers each
// bundle URL from memory and refuses any other file in that folder, so no later read of a file can differ from what
// was hashed. It hashes itself and the native addons too, and hands the listing to the bundle, which measures it.
import { createHash } from 'node:crypto';
import { closeSync, constants, existsSync, fstatSync, openSync, readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import * as nodeModule from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

// Node opens its inspector on SIGUSR1 unless the program listens for it: listen before reading a byte of the bundle
// (src/cli/ignore-sigusr1.ts takes over, with its message, once the bundle runs).
const ignoreUntilBundle = () => undefined;
process.on('SIGUSR1', ignoreUntilBundle);

// Node 24 LTS or later: older ones lack module.registerHooks, which evaluates the measured bytes (and are out of support).
const { registerHooks } = nodeModule;
if (typeof registerHooks !== 'function') {
  process.stderr.write(`sigil: needs Node 24 LTS or later; this is Node ${process.version} (README.md, "Set-up").\n`);
  process.exit(1);
}

const root = new URL('../', import.meta.url);
const bundleDir = new URL('dist/sigil/', root);
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');
const namesIn = (folder) => {
  try {
    return readdirSync(new URL(folder, root)).map((name) => `${folder}${name}`);
  } catch {
    return [];
  }
};

const refuse = (why) => {
  process.stderr.write(`sigil: ${why}: refusing to run unmeasured code.\n`);
  process.exit(1);
};
const kindOf = (stat) =>
  stat.isFIFO()
    ? 'a FIFO'
    : stat.isCharacterDevice() || stat.isBlockDevice()
      ? 'a device'
      : stat.isDirectory()
        ? 'a folder'
        : stat.isSocket()
          ? 'a socket'
          : 'not a regular file';
// One open that follows no link and waits on no FIFO, then the bytes of what was opened: what is hashed is what was read.
const readRegularFile = (path) => {
  let fd;
  try {
    fd = openSync(join(fileURLToPath(root), path), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if (err.code === 'ELOOP') refuse(`${path} is a link (Node would load what it points to, not the bytes measured)`);
    throw err;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) refuse(`${path} is ${kindOf(stat)}, not a regular file`);
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
};
// The bundle's folder is the one its URLs name: were it (or dist/) a link, Node would resolve its modules elsewhere.
if (existsSync(bundleDir) && realpathSync(bundleDir) !== join(realpathSync(root), 'dist/sigil'))
  refuse(`dist/sigil resolves outside the artifact (${realpathSync(bundleDir)})`);
const bundle = new Map(namesIn('dist/sigil/').map((path) => [new URL(path, root).href, readRegularFile(path)]));
if (!bundle.has(new URL('main.mjs', bundleDir).href)) {
  process.stderr.write('sigil: dist/sigil/main.mjs is missing: run `npm run build` first.\n');
  process.exit(1);
}
// The built-in engine's packages (node-llama-cpp, its dependencies and its prebuilt llama.cpp), where an install puts
// them beside the bundle (engine/node_modules: the measured image does, docs/image.md): part of the artifact, and the
// one place the bundle's import of node-llama-cpp resolves from. A link is measured by its target and may not leave.
const engineDir = fileURLToPath(new URL('engine/', root));
const engineFiles = [];
if (existsSync(join(engineDir, 'node_modules'))) {
  const engineReal = realpathSync(engineDir);
  for (const entry of readdirSync(engineDir, { recursive: true, withFileTypes: true })) {
    const full = join(entry.parentPath, entry.name);
    const path = relative(fileURLToPath(root), full);
    if (entry.isSymbolicLink()) {
      const target = realpathSync(full);
      if (target !== engineReal && !target.startsWith(engineReal + '/')) {
        process.stderr.write(`sigil: ${path} links outside engine/ (${target}): refusing to run unmeasured code.\n`);
        process.exit(1);
      }
      engineFiles.push({ path, bytes: Buffer.from(`link:${readlinkSync(full)}`) });
    } else if (entry.isFile()) engineFiles.push({ path, bytes: readRegularFile(path) });
    else if (!entry.isDirectory()) refuse(`${path} is ${kindOf(entry)}, neither a file, a folder nor a link inside engine/`);
  }
}
const files = [
  { path: 'bin/sigil.js', bytes: readFileSync(new URL(import.meta.url)) },
  ...[...bundle].map(([url, bytes]) => ({ path: fileURLToPath(url).slice(fileURLToPath(root).length), bytes })),
  ...namesIn('dist/addons/').map((path) => ({ path, bytes: readFileSync(new URL(path, root)) })),
  ...engineFiles,
].sort((a, b) => Buffer.compare(Buffer.from(a.path), Buffer.from(b.path)));
const listing = files.map((f) => `${sha256(f.bytes)}  ${f.path}\n`).join('');
const digest = sha256(listing);

// A cluster worker or the engine's process runs this launcher again: it must run what its parent measured.
const parent = process.env.SIGIL_ARTIFACT_SHA256;
if ((process.env.NODE_UNIQUE_ID !== undefined || process.channel !== undefined) && parent !== undefined && parent !== digest) {
  process.stderr.write('sigil: the artifact on disk changed since the parent process measured it: refusing to run it.\n');
  process.exit(1);
}
process.env.SIGIL_ARTIFACT_SHA256 = digest;

const engineParent = engineFiles.length > 0 ? new URL('engine/package.json', root).href : undefined;
registerHooks({
  resolve(specifier, context, next) {
    const fromBundle = context.parentURL?.startsWith(bundleDir.href) === true;
    // A module of the bundle is named by its URL as measured, never by where Node's resolver would realpath it.
    const inBundle = URL.canParse(specifier, context.parentURL) ? new URL(specifier, context.parentURL).href : undefined;
    if ((fromBundle || context.parentURL === undefined || specifier.startsWith(bundleDir.href)) && inBundle !== undefined && bundle.has(inBundle))
      return { url: inBundle, format: 'module', shortCircuit: true };
    if (engineParent !== undefined && fromBundle && (specifier === 'node-llama-cpp' || specifier.startsWith('node-llama-cpp/'))) {
      return next(specifier, { ...context, parentURL: engineParent });
    }
    return next(specifier, context);
  },
  load(url, context, next) {
    const source = bundle.get(url);
    if (source !== undefined) return { format: 'module', source, shortCircuit: true };
    if (url.startsWith(bundleDir.href)) throw new Error(`sigil: ${fileURLToPath(url)} was not in the bundle measured at launch`);
    return next(url, context);
  },
});
Object.defineProperty(globalThis, Symbol.for('sigil.artifact'), { value: Object.freeze({ root: fileURLToPath(root), listing }) });
const { main } = await import(new URL('main.mjs', bundleDir).href);
process.off('SIGUSR1', ignoreUntilBundle);
process.exitCode = await main(process.argv.slice(2));

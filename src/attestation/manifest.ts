/**
 * The manifest: one canonical JSON text naming everything that decides what Sigil does with a prompt (docs/attestation.md,
 * "The manifest"). Its SHA-384 is what each runtime event names, what the binding carries and what `sigil measure self`
 * prints. Everything in it is reproducible by an auditor from the same build, config and catalogue.
 */
import { createHash } from 'node:crypto';
import { sha256File } from '@sigil/engine/hash';
import * as nodeFs from 'node:fs/promises';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { MeasuredModel } from '../catalogue/weights.ts';
import type { LoadedConfig } from '../config/load.ts';
import { canonicalJson } from '../protocol/jcs.ts';
import { runningArtifact, type RunningArtifact } from './artifact.ts';
import { codeManifest, nodeModulesManifest, sha256Hex } from './file-manifest.ts';
import { measuredEnvironment, type ProcessRuntime } from './runtime-options.ts';

export const MANIFEST_KIND = 'sigil-manifest/1';

/** A catalogue model as the manifest names it: `measured` when Sigil hashed its weights and they matched. */
export type ManifestModel = MeasuredModel;

export interface Manifest {
  kind: typeof MANIFEST_KIND;
  sigil_version: string;
  /**
   * SHA-256 of the code listing (`sigil measure self --files`), and what it lists: `artifact` (bin/sigil.js,
   * dist/sigil/*, dist/addons/*, as the launcher hashed them), or the folder run from (`src`, or `dist` for the
   * compiled library), which hardware refuses.
   */
  code: { root: string; sha256: string };
  /** SHA-256 of the production node_modules listing; null for the artifact, which loads nothing from node_modules. */
  node_modules: { sha256: string } | null;
  /** The node binary that runs Sigil. */
  node: { version: string; sha256: string };
  exec_argv: string[];
  env: Record<string, string>;
  config_sha256: string;
  catalogue_sha256: string | null;
  /** The API keys file, relative to the configuration's folder (so two copies of one setup in two folders measure the same). */
  keys_file: string;
  /** SHA-256 of the trust-page listing (always, for the artifact); null when inside the code folder (covered by `code`) or absent. */
  trust_page_sha256: string | null;
  models: ManifestModel[];
}

export interface ManifestInputs {
  /** The code folder measured instead of the running code (tests); default: the running artifact or code folder. */
  codeDir?: string;
  runtime: ProcessRuntime;
  /** SHA-256 of the configuration bytes that were parsed (LoadedConfig.sourceSha256), not of the file as it is now. */
  configSha256: string;
  /** SHA-256 of the catalogue bytes that were parsed (Catalogue.sha256); null for a catalogue made in memory. */
  catalogueSha256: string | null;
  /** As the manifest names it: relative to the configuration's folder. */
  keysFile: string;
  trustPageDir: string | null;
  models: ManifestModel[];
  /** Extra environment variables the config names (e.g. a metrics token variable). */
  extraEnv?: readonly string[];
  /** Default: the running node binary. */
  nodeBinary?: string;
}

/** The folder of Sigil's running code without the launcher: `src/` from the sources, `dist/` for the compiled code or bundle. */
export function runningCodeDir(): string {
  return dirname(dirname(fileURLToPath(import.meta.url)));
}

/** What runs: the artifact the launcher measured, or a code folder read from disk (sources, compiled library; refused on hardware). */
export type RunningCode = { artifact: RunningArtifact } | { dir: string };

export const runningCode = (): RunningCode => {
  const artifact = runningArtifact();
  return artifact === undefined ? { dir: runningCodeDir() } : { artifact };
};

/** The listings the manifest hashes: `root` names what `code` lists; `nodeModules` is null for the artifact. */
export interface CodeListings {
  root: string;
  code: string;
  nodeModules: string | null;
  /** The package folder (package.json's); not measured. */
  packageRoot: string;
}

const listings = new Map<string, Promise<CodeListings>>();

/**
 * The code listings. The artifact's comes from the launcher, which hashed the bytes it then evaluated; a code folder
 * and node_modules are hashed from disk once per process.
 */
export function codeListings(code: RunningCode): Promise<CodeListings> {
  if ('artifact' in code) return Promise.resolve({ root: 'artifact', code: code.artifact.listing, nodeModules: null, packageRoot: code.artifact.root });
  const codeDir = code.dir;
  let pending = listings.get(codeDir);
  if (pending === undefined) {
    pending = Promise.all([codeManifest(codeDir), nodeModulesManifest(dirname(codeDir))]).then(([listing, nodeModules]) => ({
      root: basename(codeDir),
      code: listing,
      nodeModules,
      packageRoot: dirname(codeDir),
    }));
    pending.catch(() => listings.delete(codeDir));
    listings.set(codeDir, pending);
  }
  return pending;
}

const binaries = new Map<string, Promise<string>>();

/** The node binary's SHA-256, once per process: the binary running cannot change under it. */
function nodeBinarySha256(path: string): Promise<string> {
  let pending = binaries.get(path);
  if (pending === undefined) {
    pending = sha256File(path);
    pending.catch(() => binaries.delete(path));
    binaries.set(path, pending);
  }
  return pending;
}

const inside = (dir: string, parent: string) => resolve(dir).startsWith(resolve(parent) + '/');

export async function buildManifest(inputs: ManifestInputs): Promise<Manifest> {
  const running = inputs.codeDir === undefined ? runningCode() : { dir: inputs.codeDir };
  const listed = await codeListings(running);
  // The artifact lists no folder, so the trust page (static files under dist/trust-page) is always listed on its own.
  const codeDir = 'dir' in running ? running.dir : undefined;
  // Unconfigured, the page is served from dist/trust-page at the package root (src/http/routes/trust-page.ts).
  const trustPageDir = inputs.trustPageDir ?? join(listed.packageRoot, 'dist', 'trust-page');
  const [pkg, nodeSha, trustPage] = await Promise.all([
    nodeFs.readFile(join(listed.packageRoot, 'package.json'), 'utf8'),
    nodeBinarySha256(inputs.nodeBinary ?? process.execPath),
    codeDir !== undefined && inside(trustPageDir, codeDir) ? null : codeManifest(trustPageDir).catch(() => null),
  ]);
  return {
    kind: MANIFEST_KIND,
    sigil_version: (JSON.parse(pkg) as { version: string }).version,
    code: { root: listed.root, sha256: sha256Hex(listed.code) },
    node_modules: listed.nodeModules === null ? null : { sha256: sha256Hex(listed.nodeModules) },
    node: { version: process.version, sha256: nodeSha },
    exec_argv: [...inputs.runtime.execArgv],
    env: measuredEnvironment(inputs.runtime.env, inputs.extraEnv),
    config_sha256: inputs.configSha256,
    catalogue_sha256: inputs.catalogueSha256,
    keys_file: inputs.keysFile,
    trust_page_sha256: trustPage === null ? null : sha256Hex(trustPage),
    models: [...inputs.models].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
  };
}

/** The manifest's exact text (JCS) and its lowercase hex SHA-384. */
export function manifestDigest(manifest: Manifest): { text: string; sha384: string } {
  const text = canonicalJson(manifest);
  return { text, sha384: createHash('sha384').update(text, 'utf8').digest('hex') };
}

/**
 * The manifest of a configuration and the catalogue parsed with it (`catalogueSha256`: the bytes that were parsed, so
 * a file changed since cannot be measured in place of the one served): what start, every reload and `sigil measure
 * self` measure the same way.
 */
export function manifestOfConfig(
  config: LoadedConfig,
  catalogueSha256: string | null,
  runtime: ProcessRuntime,
  models: ManifestModel[],
  codeDir?: string,
): Promise<Manifest> {
  return buildManifest({
    ...(codeDir === undefined ? {} : { codeDir }),
    runtime,
    configSha256: config.sourceSha256,
    catalogueSha256,
    keysFile: relative(dirname(config.source), config.auth.keys_file),
    trustPageDir: config.trust_page?.dir ?? null,
    models,
    extraEnv: config.metrics.bearer_token_env === undefined ? [] : [config.metrics.bearer_token_env],
  });
}

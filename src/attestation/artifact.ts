/**
 * The artifact Sigil runs as (docs/attestation.md, "What is measured"): bin/sigil.js, the bundle dist/sigil/ and the
 * native addons under dist/addons. The launcher hashes each file, evaluates the bundle from the very bytes it hashed,
 * and hands over the listing; this module reads it. Run from the TypeScript sources or the compiled library, there is
 * no artifact.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { ArtifactError } from './artifact-error.ts';

export interface RunningArtifact {
  /** The package folder the artifact's paths are relative to; used to load files, never measured. */
  root: string;
  /** `sha256sum` lines of the artifact's files, paths relative to root, sorted bytewise. */
  listing: string;
}

const ARTIFACT = Symbol.for('sigil.artifact');

/** The artifact this process was launched from, or undefined when it runs from the sources or the compiled library. */
export function runningArtifact(): RunningArtifact | undefined {
  const value = (globalThis as Record<symbol, unknown>)[ARTIFACT] as Partial<RunningArtifact> | undefined;
  if (value === undefined || typeof value.root !== 'string' || typeof value.listing !== 'string') return undefined;
  return { root: value.root, listing: value.listing };
}

/** The launcher's path, which cluster workers and the engine's process run again. */
export const launcherPath = (artifact: RunningArtifact) => join(artifact.root, 'bin/sigil.js');

/** The artifact's files and their SHA-256, as the launcher measured them. */
export function artifactFiles(artifact: RunningArtifact): Map<string, string> {
  const files = new Map<string, string>();
  for (const line of artifact.listing.split('\n')) {
    const match = /^([0-9a-f]{64}) {2}(.+)$/.exec(line);
    if (match !== null) files.set(match[2]!, match[1]!);
  }
  return files;
}

const KOFFI_ADDON = 'dist/addons/koffi.node';

/**
 * koffi, the FFI NVML and the SEV-SNP key request use. From the artifact: its native module by absolute path, after
 * checking it still has the SHA-256 the launcher measured; elsewhere the installed package.
 */
export function loadKoffi(): typeof import('koffi') {
  const artifact = runningArtifact();
  const require = createRequire(import.meta.url);
  if (artifact === undefined) return require('koffi') as typeof import('koffi');
  const measured = artifactFiles(artifact).get(KOFFI_ADDON);
  if (measured === undefined) throw new ArtifactError(`koffi is not part of this build (${KOFFI_ADDON} is absent): rebuild with \`npm run build\``);
  const path = join(artifact.root, KOFFI_ADDON);
  const now = createHash('sha256').update(readFileSync(path)).digest('hex');
  if (now !== measured) throw new ArtifactError(`${KOFFI_ADDON} changed since Sigil measured it at launch: refusing to load it`);
  return require(path) as typeof import('koffi');
}

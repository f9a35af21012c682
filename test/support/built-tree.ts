import { cpSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { BUILD_INPUTS } from '../../scripts/build-inputs.mjs';

const ROOT = join(import.meta.dirname, '../..');

/**
 * A copy of the sources and the built-in engine's package in `work/name`, built with `npm run build`: the installed
 * packages linked one by one, @hpke copied so a test can plant a package inside it.
 */
export function buildTree(work: string, name: string): string {
  const dir = join(work, name);
  mkdirSync(dir);
  for (const entry of BUILD_INPUTS) cpSync(join(ROOT, entry), join(dir, entry), { recursive: true });
  mkdirSync(join(dir, 'node_modules'));
  for (const entry of readdirSync(join(ROOT, 'node_modules'))) {
    if (entry === '@hpke') cpSync(join(ROOT, 'node_modules', entry), join(dir, 'node_modules', entry), { recursive: true, dereference: true });
    else if (entry !== '@sigil') symlinkSync(join(ROOT, 'node_modules', entry), join(dir, 'node_modules', entry));
  }
  // The workspace packages as npm links them, the built-in engine to the copy's own.
  mkdirSync(join(dir, 'node_modules/@sigil'));
  symlinkSync(join(dir, 'packages/engine'), join(dir, 'node_modules/@sigil/engine'));
  execFileSync('npm', ['run', 'build'], { cwd: dir, stdio: 'ignore', env: { PATH: process.env.PATH! } });
  return dir;
}

/**
 * The files of a built tree that a deployment with the built-in engine ships (docs/attestation.md, "What is measured"):
 * the artifact, the trust page, the vocabulary the demo model is made from, and the repository's config/, copied to `dir`.
 */
export function copyArtifact(tree: string, dir: string): void {
  for (const entry of ['bin/sigil.js', 'dist/sigil', 'dist/addons', 'dist/trust-page', 'dist/engine/vocab', 'package.json'])
    cpSync(join(tree, entry), join(dir, entry), { recursive: true });
  cpSync(join(ROOT, 'config'), join(dir, 'config'), { recursive: true });
}

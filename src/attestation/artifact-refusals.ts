/**
 * On hardware, Sigil runs only as its measured artifact and refuses to start when code could come from anywhere else
 * (docs/attestation.md, "What is measured"): a node_modules folder Node would resolve packages from, NODE_PATH, a
 * global module folder, or a code file or folder this process could rewrite. Options that preload code (NODE_OPTIONS
 * --require/--import/--loader) are refused with the runtime options (runtime-options.ts).
 */
import { accessSync, constants, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { artifactFiles } from './artifact.ts';
import type { RunningCode } from './manifest.ts';

/** Node's global module folders (~/.node_modules, ~/.node_libraries, <prefix>/lib/node and NODE_PATH's), which require() searches last. */
const globalPaths = (): string[] => (createRequire(import.meta.url)('node:module') as { globalPaths: string[] }).globalPaths;

const writable = (path: string): boolean => {
  try {
    accessSync(path, constants.W_OK);
    return true;
  } catch {
    return false;
  }
};

/** `engine/a/b/c.js`'s folders: `engine`, `engine/a`, `engine/a/b`. */
function foldersAbove(file: string): string[] {
  const parts = file.split('/').slice(0, -1);
  return parts.map((_, i) => parts.slice(0, i + 1).join('/'));
}

/** Each way code could run from outside the measured artifact, named; empty when there is none. */
export function codeOutsideArtifact(code: RunningCode, env: NodeJS.ProcessEnv, moduleFolders: readonly string[] = globalPaths()): string[] {
  if (!('artifact' in code)) {
    // From the TypeScript sources (tests, development) the manifest lists src/ and node_modules; they need a loader
    // option on the command line, which is refused. The compiled library is not the artifact.
    return code.dir.endsWith('/src') ? [] : [`Sigil runs from ${code.dir}, not from its measured artifact (start it as bin/sigil.js after \`npm run build\`)`];
  }
  const { root } = code.artifact;
  const found: string[] = [];
  if (env.NODE_PATH !== undefined && env.NODE_PATH !== '') found.push(`NODE_PATH=${env.NODE_PATH} (Node would load packages from it)`);
  for (let dir = join(root, 'dist/sigil'); ; dir = dirname(dir)) {
    const folder = join(dir, 'node_modules');
    if (existsSync(folder)) found.push(`a node_modules folder at ${folder} (Node would resolve packages from it; the artifact loads none)`);
    if (dirname(dir) === dir) break;
  }
  for (const folder of moduleFolders) if (existsSync(folder)) found.push(`a global module folder at ${folder} (require() would search it)`);
  const files = [...artifactFiles(code.artifact).keys()];
  // The engine's files are read again when the engine loads them: their folders, too, must be beyond this process's reach.
  const engineFolders = new Set(files.filter((f) => f.startsWith('engine/')).flatMap((f) => foldersAbove(f)));
  const paths = [
    root,
    join(root, 'bin'),
    join(root, 'dist'),
    join(root, 'dist/sigil'),
    join(root, 'dist/addons'),
    ...[...engineFolders].sort().map((f) => join(root, f)),
    ...files.map((f) => join(root, f)),
  ];
  for (const path of paths) if (existsSync(path) && writable(path)) found.push(`${path} is writable by this process (the code could change under it)`);
  return found;
}

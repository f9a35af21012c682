/**
 * File listings in `sha256sum` format (`<hex>  <path>\n`, paths relative and sorted bytewise), so an auditor can
 * recompute each with coreutils: Sigil's code folder, the production packages under node_modules, the trust page.
 */
import { createHash } from 'node:crypto';
import * as nodeFs from 'node:fs/promises';
import { join } from 'node:path';
import { ArtifactError } from './artifact-error.ts';

const compareBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

async function listFiles(dir: string, prefix: string, seen: Set<string>): Promise<string[]> {
  const real = await nodeFs.realpath(dir);
  if (seen.has(real)) return [];
  seen.add(real);
  const out: string[] = [];
  for (const name of await nodeFs.readdir(dir)) {
    const path = join(dir, name);
    const rel = prefix === '' ? name : `${prefix}/${name}`;
    if (rel.includes('\n')) throw new ArtifactError(`the file name ${JSON.stringify(rel)} holds a newline, which the manifest cannot list`);
    const stat = await nodeFs.stat(path); // follows symbolic links, as `find -L` does
    if (stat.isDirectory()) out.push(...(await listFiles(path, rel, seen)));
    else if (stat.isFile()) out.push(rel);
  }
  return out;
}

/** Files read at once while hashing: enough to keep the disk and the thread pool busy, few enough for file handles. */
const READS_IN_FLIGHT = 32;

async function sha256Lines(root: string, files: string[]): Promise<string> {
  const sorted = [...files].sort(compareBytes);
  const digests = new Array<string>(sorted.length);
  let next = 0;
  const worker = async () => {
    while (next < sorted.length) {
      const i = next++;
      digests[i] = createHash('sha256')
        .update(await nodeFs.readFile(join(root, sorted[i]!)))
        .digest('hex');
    }
  };
  await Promise.all(Array.from({ length: Math.min(READS_IN_FLIGHT, sorted.length) }, worker));
  return sorted.map((rel, i) => `${digests[i]}  ${rel}\n`).join('');
}

/**
 * The code manifest: one line per regular file under `dir`, node_modules folders included (Node would load from them).
 * An auditor gets the same text from `cd dist && find -L . -type f -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum`.
 */
export async function codeManifest(dir: string): Promise<string> {
  return sha256Lines(dir, await listFiles(dir, '', new Set()));
}

/**
 * The package folders of the production install: every `node_modules/...` entry of package-lock.json that is not
 * `dev` and is installed here (optional packages for other platforms are not). Without a lock file (Sigil installed
 * as a dependency), every package folder found under node_modules.
 */
export async function productionPackages(packageRoot: string): Promise<string[]> {
  let lock: { packages?: Record<string, { dev?: boolean }> } | undefined;
  try {
    lock = JSON.parse(await nodeFs.readFile(join(packageRoot, 'package-lock.json'), 'utf8')) as typeof lock;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const candidates =
    lock?.packages !== undefined
      ? Object.entries(lock.packages)
          .filter(([path, entry]) => path.startsWith('node_modules/') && entry.dev !== true)
          .map(([path]) => path)
      : await installedPackages(packageRoot, 'node_modules');
  const present: string[] = [];
  for (const path of candidates) if (await isDirectory(join(packageRoot, path))) present.push(path);
  return present.sort(compareBytes);
}

async function isDirectory(path: string): Promise<boolean> {
  return nodeFs.stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

async function installedPackages(root: string, dir: string): Promise<string[]> {
  const out: string[] = [];
  const names = await nodeFs.readdir(join(root, dir)).catch(() => [] as string[]);
  for (const name of names) {
    if (name.startsWith('.')) continue;
    const path = `${dir}/${name}`;
    if (name.startsWith('@')) out.push(...(await installedPackages(root, path)));
    else {
      out.push(path);
      out.push(...(await installedPackages(root, `${path}/node_modules`)));
    }
  }
  return out;
}

/**
 * The production node_modules, file by file: one line per regular file of each production package, its nested
 * node_modules included whether the lock file names them or not, paths relative to the package root
 * (`node_modules/jose/...`).
 */
export async function nodeModulesManifest(packageRoot: string): Promise<string> {
  const packages = await productionPackages(packageRoot);
  // Each package is walked in its own order (its own `seen`), so walking them side by side changes no line.
  const files = await Promise.all(packages.map((pkg) => listFiles(join(packageRoot, pkg), pkg, new Set())));
  return sha256Lines(packageRoot, [...new Set(files.flat())]);
}

export const sha256Hex = (text: string | Uint8Array) => createHash('sha256').update(text).digest('hex');

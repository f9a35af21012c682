import { createHash } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { sha256File } from './hash-file.ts';

/**
 * A model's `model_hash`: `sha256:` + hex SHA-256 of the file, or, for a directory, of its manifest.
 *
 * The manifest lists the files that define a model (see `isManifestFile`), one line each,
 * `<sha256 hex><two spaces><relative path with '/'>\n`, sorted by path bytes: exactly what
 * `sha256sum` prints, so an auditor recomputes it with
 * `find . -name '.?*' -prune -o -type f \( -name '*.safetensors' -o -name '*.safetensors.index.json' -o -name 'tokenizer.model'
 * -o -name '*config*.json' -o -name '*tokenizer*.json' \) -print | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum | sha256sum`.
 */
export async function hashModel(path: string, onBytes?: (bytes: number) => void): Promise<string> {
  const info = await stat(path);
  if (!info.isDirectory()) return `sha256:${await sha256File(path, onBytes)}`;
  return `sha256:${createHash('sha256')
    .update(await modelManifest(path, onBytes))
    .digest('hex')}`;
}

/** The files a model's hash covers: the file itself, or the manifest files of a directory. */
export async function modelFiles(path: string): Promise<string[]> {
  if (!(await stat(path)).isDirectory()) return [path];
  return (await listFiles(path)).filter(isManifestFile).map((file) => join(path, file));
}

export async function modelManifest(directory: string, onBytes?: (bytes: number) => void): Promise<string> {
  const files = (await listFiles(directory)).filter(isManifestFile).sort(compareBytes);
  if (files.length === 0) throw new Error(`${directory}: no *.safetensors, config or tokenizer files to hash`);
  // Files are hashed side by side (the disk, not one core, sets the pace); the lines keep the sorted order.
  const digests = await Promise.all(files.map((file) => sha256File(join(directory, file), onBytes)));
  return files.map((file, i) => `${digests[i]}  ${file}\n`).join('');
}

export function isManifestFile(relativePath: string): boolean {
  const name = relativePath.slice(relativePath.lastIndexOf('/') + 1);
  if (name.endsWith('.safetensors') || name.endsWith('.safetensors.index.json') || name === 'tokenizer.model') return true;
  return name.endsWith('.json') && (name.includes('config') || name.includes('tokenizer'));
}

/** Relative '/'-separated paths of every regular file below `root`, skipping hidden files and folders. */
async function listFiles(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => relative(root, join(entry.parentPath, entry.name)).split(sep).join('/'))
    .filter((path) => !path.split('/').some((part) => part.startsWith('.')));
}

function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}
export { sha256File } from './hash-file.ts';

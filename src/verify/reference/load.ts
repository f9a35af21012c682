import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { parseReferenceValues, type ReferenceValues } from './reference-values.ts';

/** Reads a reference-values file; RIM paths in it are resolved against the file's own folder. Throws on I/O. */
export async function readReferenceValues(path: string): Promise<ReferenceValues> {
  const text = await readFile(path, 'utf8');
  const base = dirname(resolve(path));
  return parseReferenceValues(text, (rim) => resolve(base, rim));
}

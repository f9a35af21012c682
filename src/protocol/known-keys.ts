import type { z } from 'zod';

/** The keys a strict object of `schema` allows at `path` (array indices and record names walked through), or none. */
export function knownKeysAt(schema: z.core.$ZodType, path: readonly PropertyKey[]): string[] {
  let node: z.core.$ZodType | undefined = unwrap(schema);
  for (const step of path) {
    if (node === undefined) return [];
    const def = node._zod.def as unknown as Record<string, unknown> & { type: string };
    if (def.type === 'object') node = (def.shape as Record<string, z.core.$ZodType>)[String(step)];
    else if (def.type === 'array') node = def.element as z.core.$ZodType;
    else if (def.type === 'record') node = def.valueType as z.core.$ZodType;
    else return [];
    node = node === undefined ? undefined : unwrap(node);
  }
  const def = node?._zod.def as unknown as { type: string; shape?: Record<string, unknown> } | undefined;
  return def?.type === 'object' && def.shape !== undefined ? Object.keys(def.shape) : [];
}

/** Defaults, optionals and pipes around a schema, taken off. */
function unwrap(schema: z.core.$ZodType): z.core.$ZodType {
  let node = schema;
  for (;;) {
    const def = node._zod.def as unknown as { type: string; innerType?: z.core.$ZodType; in?: z.core.$ZodType };
    if (def.innerType !== undefined) node = def.innerType;
    else if (def.type === 'pipe' && def.in !== undefined) node = def.in;
    else return node;
  }
}

/** ` (did you mean 'x'?)` when a known key is close enough to `key` to be a typo of it, else nothing: the hint sigil.yaml and reference values share. */
export function didYouMean(key: string, known: readonly string[]): string {
  const near = closestKey(key, known);
  return near === undefined ? '' : ` (did you mean '${near}'?)`;
}

/** The candidate closest to `word` by edit distance, when it is close enough to be a typo (at most a third of its length, and 3). */
export function closestKey(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.min(3, Math.max(1, Math.floor(word.length / 3)));
  for (const candidate of candidates) {
    const distance = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (distance <= bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

/** Optimal-string-alignment distance: insertions, deletions, substitutions and swaps of neighbours cost 1. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

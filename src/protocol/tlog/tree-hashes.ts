import { EMPTY_ROOT, nodeHash } from './merkle.ts';

/**
 * RFC 9162 section 2.1 tree heads and proofs (PATH 2.1.3.1, SUBPROOF 2.1.4.1) computed from the hashes of
 * complete subtrees: `read(level, index)` is MTH(D[index * 2^level : (index + 1) * 2^level]). The log serves
 * proofs with these, and `sigil log verify` recomputes a root from tiles; proofs are checked by merkle.ts, not here.
 */
export type HashReader = (level: number, index: number) => Buffer;

/** The largest power of two strictly below n (n >= 2). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

/** MTH(D[start:end]) for a range the RFC's recursion reaches (start is a multiple of the split points above it). */
export function rangeHash(read: HashReader, start: number, end: number): Buffer {
  const n = end - start;
  const level = Math.log2(n);
  if (Number.isInteger(level) && start % n === 0) return read(level, start / n);
  const k = splitPoint(n);
  return nodeHash(rangeHash(read, start, start + k), rangeHash(read, start + k, end));
}

/** MTH(D[0:size]). */
export function rootHash(read: HashReader, size: number): Buffer {
  return size === 0 ? Buffer.from(EMPTY_ROOT) : rangeHash(read, 0, size);
}

/** PATH(index, D[0:size]): the audit path of the leaf at `index`. */
export function inclusionProof(read: HashReader, index: number, size: number): Buffer[] {
  const path = (m: number, start: number, end: number): Buffer[] => {
    const n = end - start;
    if (n === 1) return [];
    const k = splitPoint(n);
    return m < start + k ? [...path(m, start, start + k), rangeHash(read, start + k, end)] : [...path(m, start + k, end), rangeHash(read, start, start + k)];
  };
  return path(index, 0, size);
}

/** PROOF(size1, D[0:size2]): the consistency proof from the tree of size1 to the tree of size2. */
export function consistencyProof(read: HashReader, size1: number, size2: number): Buffer[] {
  if (size1 === 0 || size1 === size2) return [];
  const sub = (m: number, start: number, end: number, whole: boolean): Buffer[] => {
    const n = end - start;
    if (m === n) return whole ? [] : [rangeHash(read, start, end)];
    const k = splitPoint(n);
    return m <= k
      ? [...sub(m, start, start + k, whole), rangeHash(read, start + k, end)]
      : [...sub(m - k, start + k, end, false), rangeHash(read, start, start + k)];
  };
  return sub(size1, 0, size2, true);
}

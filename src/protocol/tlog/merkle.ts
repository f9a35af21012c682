import { hash, timingSafeEqual } from 'node:crypto';
import { TlogError } from './errors.ts';

/**
 * RFC 9162 section 2.1 Merkle tree hashing with SHA-256, and the verification of inclusion (2.1.3.2) and
 * consistency (2.1.4.2) proofs, written from the RFC's algorithms. Sizes and indexes are plain numbers:
 * exact up to 2^53 entries, far beyond any log this serves.
 */

export const HASH_BYTES = 32;
/** 0x01 || left || right, filled for each node hash: one one-shot SHA-256 over it costs less than a Hash object. */
const NODE_INPUT = Buffer.alloc(1 + 2 * HASH_BYTES, 0x01);

/** MTH({d}) = SHA-256(0x00 || d). */
export function leafHash(data: Uint8Array): Buffer {
  const input = Buffer.allocUnsafe(1 + data.length);
  input[0] = 0x00;
  input.set(data, 1);
  return hash('sha256', input, 'buffer');
}

/** MTH(D[n]) for an inner node: SHA-256(0x01 || left || right). */
export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  if (left.length !== HASH_BYTES || right.length !== HASH_BYTES) {
    const input = Buffer.allocUnsafe(1 + left.length + right.length);
    input[0] = 0x01;
    input.set(left, 1);
    input.set(right, 1 + left.length);
    return hash('sha256', input, 'buffer');
  }
  NODE_INPUT.set(left, 1);
  NODE_INPUT.set(right, 1 + HASH_BYTES);
  return hash('sha256', NODE_INPUT, 'buffer');
}

/** MTH({}) = SHA-256 of the empty string. */
export const EMPTY_ROOT = hash('sha256', '', 'buffer');

const isOdd = (x: number): boolean => x % 2 === 1;
const half = (x: number): number => Math.floor(x / 2);

function isHash(h: Uint8Array): boolean {
  return h.length === HASH_BYTES;
}

function sameHash(a: Uint8Array, b: Uint8Array): boolean {
  return isHash(a) && isHash(b) && timingSafeEqual(a, b);
}

function checkSize(name: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) throw new TlogError('ERR_TLOG_PROOF', `${name} ${n} is not a non-negative integer`);
}

/**
 * Throws ERR_TLOG_PROOF unless `proof` shows the leaf with hash `leaf` at `index` in the tree of `size`
 * leaves with root `root` (RFC 9162 section 2.1.3.2).
 */
export function verifyInclusion(index: number, size: number, leaf: Uint8Array, proof: readonly Uint8Array[], root: Uint8Array): void {
  checkSize('leaf index', index);
  checkSize('tree size', size);
  if (index >= size) throw new TlogError('ERR_TLOG_PROOF', `leaf index ${index} is not below tree size ${size}`);
  if (!isHash(leaf) || !isHash(root) || !proof.every(isHash)) throw new TlogError('ERR_TLOG_PROOF', 'a hash of the inclusion proof is not 32 bytes');
  let fn = index;
  let sn = size - 1;
  let r: Buffer = Buffer.from(leaf);
  for (const p of proof) {
    if (sn === 0) throw new TlogError('ERR_TLOG_PROOF', 'the inclusion proof is longer than the tree is deep');
    if (isOdd(fn) || fn === sn) {
      r = nodeHash(p, r);
      if (!isOdd(fn)) while (!isOdd(fn) && fn !== 0) [fn, sn] = [half(fn), half(sn)];
    } else {
      r = nodeHash(r, p);
    }
    [fn, sn] = [half(fn), half(sn)];
  }
  if (sn !== 0) throw new TlogError('ERR_TLOG_PROOF', 'the inclusion proof is shorter than the tree is deep');
  if (!sameHash(r, root)) throw new TlogError('ERR_TLOG_PROOF', `the inclusion proof of leaf ${index} does not lead to the root of the tree of ${size}`);
}

/**
 * Throws ERR_TLOG_PROOF unless `proof` shows the tree of `size1` leaves with root `root1` is a prefix of the
 * tree of `size2` leaves with root `root2` (RFC 9162 section 2.1.4.2; equal sizes need equal roots and no proof,
 * and the empty tree is a prefix of every tree).
 */
export function verifyConsistency(size1: number, size2: number, proof: readonly Uint8Array[], root1: Uint8Array, root2: Uint8Array): void {
  checkSize('first size', size1);
  checkSize('second size', size2);
  if (size2 < size1) throw new TlogError('ERR_TLOG_PROOF', `the second tree (${size2}) is smaller than the first (${size1})`);
  if (!isHash(root1) || !isHash(root2) || !proof.every(isHash)) throw new TlogError('ERR_TLOG_PROOF', 'a hash of the consistency proof is not 32 bytes');
  if (size1 === size2) {
    if (proof.length > 0) throw new TlogError('ERR_TLOG_PROOF', 'trees of equal size need an empty consistency proof');
    if (!sameHash(root1, root2)) throw new TlogError('ERR_TLOG_PROOF', `two different roots for the same tree size ${size1}: the log forked`);
    return;
  }
  if (size1 === 0) {
    if (proof.length > 0) throw new TlogError('ERR_TLOG_PROOF', 'the empty tree needs an empty consistency proof');
    return;
  }
  if (proof.length === 0) throw new TlogError('ERR_TLOG_PROOF', 'the consistency proof is empty');
  // A first tree of a power-of-two size is a complete subtree: its root starts the path.
  const path = Number.isInteger(Math.log2(size1)) && 2 ** Math.log2(size1) === size1 ? [root1, ...proof] : [...proof];
  let fn = size1 - 1;
  let sn = size2 - 1;
  while (isOdd(fn)) [fn, sn] = [half(fn), half(sn)];
  let fr: Buffer = Buffer.from(path[0]!);
  let sr: Buffer = Buffer.from(path[0]!);
  for (const c of path.slice(1)) {
    if (sn === 0) throw new TlogError('ERR_TLOG_PROOF', 'the consistency proof is longer than the tree is deep');
    if (isOdd(fn) || fn === sn) {
      fr = nodeHash(c, fr);
      sr = nodeHash(c, sr);
      if (!isOdd(fn)) while (!isOdd(fn) && fn !== 0) [fn, sn] = [half(fn), half(sn)];
    } else {
      sr = nodeHash(sr, c);
    }
    [fn, sn] = [half(fn), half(sn)];
  }
  if (sn !== 0) throw new TlogError('ERR_TLOG_PROOF', 'the consistency proof is shorter than the tree is deep');
  if (!sameHash(fr, root1))
    throw new TlogError('ERR_TLOG_PROOF', `the consistency proof does not lead to the root of the first tree (${size1}): the log forked`);
  if (!sameHash(sr, root2))
    throw new TlogError('ERR_TLOG_PROOF', `the consistency proof does not lead to the root of the second tree (${size2}): the log forked`);
}

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { leafHash, nodeHash, verifyConsistency, verifyInclusion, EMPTY_ROOT } from '../../../src/protocol/tlog/merkle.ts';
import { consistencyProof, inclusionProof, rootHash } from '../../../src/protocol/tlog/tree-hashes.ts';

const VECTORS = join(import.meta.dirname, '../../vectors/tlog');
const tree = JSON.parse(readFileSync(join(VECTORS, 'tree.json'), 'utf8')) as {
  leaf_inputs_hex: string[];
  root_hashes_hex: string[];
  node_hashes_hex: string[][];
};
const hex = (s: string) => Buffer.from(s, 'hex');
const b64 = (s: string) => Buffer.from(s, 'base64');

function jsonFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? jsonFiles(path) : name.endsWith('.json') ? [path] : [];
  });
}

interface InclusionVector {
  leafIdx: number;
  treeSize: number;
  root: string;
  leafHash: string;
  proof: string[] | null;
  desc: string;
  wantErr: boolean;
}
interface ConsistencyVector {
  size1: number;
  size2: number;
  root1: string;
  root2: string;
  proof: string[] | null;
  desc: string;
  wantErr: boolean;
}

const inclusion = jsonFiles(join(VECTORS, 'merkle/inclusion')).map((f) => ({ f, v: JSON.parse(readFileSync(f, 'utf8')) as InclusionVector }));
const consistency = jsonFiles(join(VECTORS, 'merkle/consistency')).map((f) => ({ f, v: JSON.parse(readFileSync(f, 'utf8')) as ConsistencyVector }));

/**
 * Where this verifier is deliberately stricter than the reference: these roots are 12 bytes ("don't care"), not
 * SHA-256 hashes, and a root that is not 32 bytes is refused before anything is compared.
 */
const STRICTER = new Set(['merkle/consistency/additional/sizes-are-equal-one-and-proof-is-empty.json']);

/** The reader of the RFC 6962 test tree, from the published complete-subtree hashes. */
const read = (level: number, index: number): Buffer => hex(tree.node_hashes_hex[level]![index]!);

describe('RFC 9162 hashing and proofs, against the transparency-dev/merkle vectors', () => {
  it('has the vectors (196 files)', () => {
    expect(inclusion.length + consistency.length).toBe(196);
  });

  it('hashes the test leaves to the published level-0 hashes, and pairs to the published parents', () => {
    expect(tree.leaf_inputs_hex.map((l) => leafHash(hex(l)).toString('hex'))).toEqual(tree.node_hashes_hex[0]);
    expect(nodeHash(read(0, 0), read(0, 1)).toString('hex')).toBe(tree.node_hashes_hex[1]![0]);
    expect(EMPTY_ROOT.toString('hex')).toBe(tree.root_hashes_hex[0]);
  });

  it('computes the published root of every tree size from 0 to 8', () => {
    expect(tree.root_hashes_hex.map((_, size) => rootHash(read, size).toString('hex'))).toEqual(tree.root_hashes_hex);
  });

  it.each(inclusion.map(({ f, v }) => [f.slice(VECTORS.length + 1), v] as const))('inclusion %s: accepted exactly when the vector says so', (_, v) => {
    const run = () => verifyInclusion(v.leafIdx, v.treeSize, b64(v.leafHash), (v.proof ?? []).map(b64), b64(v.root));
    if (v.wantErr) expect(run).toThrow(expect.objectContaining({ code: 'ERR_TLOG_PROOF' }));
    else expect(run).not.toThrow();
  });

  it.each(consistency.map(({ f, v }) => [f.slice(VECTORS.length + 1), v] as const))('consistency %s: accepted exactly when the vector says so', (name, v) => {
    const run = () => verifyConsistency(v.size1, v.size2, (v.proof ?? []).map(b64), b64(v.root1), b64(v.root2));
    if (v.wantErr || STRICTER.has(name)) expect(run).toThrow(expect.objectContaining({ code: 'ERR_TLOG_PROOF' }));
    else expect(run).not.toThrow();
  });

  it('builds the very proofs the happy-path vectors of the test tree publish', () => {
    const onTestTree = (root: string, size: number) => size <= 8 && b64(root).equals(hex(tree.root_hashes_hex[size]!));
    const happyInclusion = inclusion.filter(({ v }) => v.desc === 'happy path' && onTestTree(v.root, v.treeSize));
    const happyConsistency = consistency.filter(({ v }) => v.desc === 'happy path' && onTestTree(v.root2, v.size2) && v.size1 > 0);
    expect(happyInclusion.length).toBeGreaterThan(0);
    expect(happyConsistency.length).toBeGreaterThan(0);
    for (const { v } of happyInclusion) expect(inclusionProof(read, v.leafIdx, v.treeSize).map((h) => h.toString('base64'))).toEqual(v.proof ?? []);
    for (const { v } of happyConsistency) expect(consistencyProof(read, v.size1, v.size2).map((h) => h.toString('base64'))).toEqual(v.proof ?? []);
  });

  it('proves every leaf of every test tree and every pair of sizes, each proof accepted by the verifier and refused once altered', () => {
    for (let size = 1; size <= 8; size++) {
      const root = hex(tree.root_hashes_hex[size]!);
      for (let i = 0; i < size; i++) {
        const proof = inclusionProof(read, i, size);
        verifyInclusion(i, size, read(0, i), proof, root);
        if (proof.length > 0) {
          const bad = proof.map((h, j) => (j === 0 ? Buffer.from(h).fill(0, 0, 1) : h));
          expect(() => verifyInclusion(i, size, read(0, i), bad, root)).toThrow(/does not lead to the root/);
        }
      }
      for (let m = 1; m < size; m++) {
        const proof = consistencyProof(read, m, size);
        verifyConsistency(m, size, proof, hex(tree.root_hashes_hex[m]!), root);
        expect(() => verifyConsistency(m, size, proof, hex(tree.root_hashes_hex[m]!), hex(tree.root_hashes_hex[size - 1]!))).toThrow(
          /ERR_TLOG_PROOF|forked|lead/,
        );
      }
    }
  });
});

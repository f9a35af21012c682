import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sameMeasuredState, type MeasuredSide } from '../../src/fleet/measured-state.ts';
import type { AttestationDocumentV2 } from '../../src/protocol/attestation.ts';

const manifest = (config: string, catalogue: string) =>
  JSON.stringify({ kind: 'sigil-manifest/1', code: { root: 'src', sha256: 'c0de' }, config_sha256: config, catalogue_sha256: catalogue });
const sha384 = (text: string) => createHash('sha384').update(text).digest('hex');
const side = (text: string, published: string | null = text): MeasuredSide => ({
  doc: {
    tee: 'sev-snp',
    measurement: 'aa'.repeat(48),
    binding: { policy_hash: 'sha256:' + '11'.repeat(32), manifest_sha384: sha384(text) },
  } as unknown as AttestationDocumentV2,
  manifest: published,
});
const trusted = (manifests: string[] = []) => ({ measurements: new Set(['aa'.repeat(48)]), manifests: new Set(manifests) });

describe('sameMeasuredState compares the whole manifest', () => {
  const ours = side(manifest('c1', 'k1'));

  it('accepts the same manifest, and another one only when fleet.trusted_manifests lists it', () => {
    const theirs = side(manifest('c2', 'k1'));
    expect(sameMeasuredState(ours, side(manifest('c1', 'k1')), trusted())).toBeNull();
    expect(sameMeasuredState(ours, theirs, trusted([theirs.doc.binding.manifest_sha384!]))).toBeNull();
  });

  it('names each part that differs when both replicas published their manifest text, and says so in general words otherwise', () => {
    const theirs = side(manifest('c2', 'k2'));
    expect(sameMeasuredState(ours, theirs, trusted())).toBe(
      `the peer's manifest ${theirs.doc.binding.manifest_sha384} is not this replica's ${ours.doc.binding.manifest_sha384} nor one of fleet.trusted_manifests: the catalogue file, the configuration file differ`,
    );
    // A manifest text that is not the one the evidence names is not believed.
    const lying = side(manifest('c2', 'k2'), manifest('c1', 'k2'));
    expect(sameMeasuredState(ours, lying, trusted())).toMatch(/nor one of fleet\.trusted_manifests: its code, configuration, catalogue or models differ$/);
  });
});

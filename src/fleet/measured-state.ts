import { createHash } from 'node:crypto';
import type { AttestationDocumentV2 } from '../protocol/attestation.ts';

/** What a fleet trusts besides this replica's own state: the other version's values during a rolling upgrade. */
export interface TrustedStates {
  /** Launch measurements (lowercase hex): this replica's own and `fleet.trusted_measurements`. */
  measurements: ReadonlySet<string>;
  /** Manifest digests (lowercase hex SHA-384) besides this replica's own: `fleet.trusted_manifests`. */
  manifests: ReadonlySet<string>;
}

/** The manifest's fields in the words a refusal uses (docs/attestation.md, "The manifest"). */
const MANIFEST_FIELDS: Record<string, string> = {
  kind: 'the manifest format',
  sigil_version: 'the Sigil version',
  code: "Sigil's code",
  node_modules: 'its dependencies (node_modules)',
  node: 'the node binary',
  exec_argv: "node's options",
  env: 'the measured environment variables',
  config_sha256: 'the configuration file',
  catalogue_sha256: 'the catalogue file',
  keys_file: "the API keys file's path",
  trust_page_sha256: 'the trust page',
  models: 'the models or their weights',
};

const sha384 = (text: string) => createHash('sha384').update(text, 'utf8').digest('hex');

/** The manifest's fields that differ, in words, when both texts are the ones the digests name; else null. */
function manifestDifferences(ours: { sha384: string; text: string | null }, theirs: { sha384: string; text: string | null }): string[] | null {
  if (ours.text === null || theirs.text === null || sha384(ours.text) !== ours.sha384 || sha384(theirs.text) !== theirs.sha384) return null;
  let a: Record<string, unknown>;
  let b: Record<string, unknown>;
  try {
    a = JSON.parse(ours.text) as Record<string, unknown>;
    b = JSON.parse(theirs.text) as Record<string, unknown>;
  } catch {
    return null;
  }
  const fields = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  return fields.filter((f) => JSON.stringify(a[f]) !== JSON.stringify(b[f])).map((f) => MANIFEST_FIELDS[f] ?? f);
}

/** A side of the comparison: the evidence document, and the manifest text it names when the replica published one. */
export interface MeasuredSide {
  doc: AttestationDocumentV2;
  manifest: string | null;
}

/**
 * Whether a peer's evidence shows the same measured state as this replica's: the same TEE, a launch measurement
 * this replica trusts, the same policy (catalogue) hash and the same manifest (code, node_modules, node, options,
 * environment, configuration, catalogue, keys file path, trust page, models), or one listed as trusted. Returns
 * null when it does, else the difference, in words. The runtime events themselves differ between replicas (each
 * names its own start time); the verifier checks that the last one names this manifest and policy. The one place
 * a fleet decides "same state".
 */
export function sameMeasuredState(ours: MeasuredSide, theirs: MeasuredSide, trusted: TrustedStates): string | null {
  const [a, b] = [ours.doc, theirs.doc];
  if (b.tee !== a.tee) return `the peer runs on tee ${String(b.tee)}, this replica on ${a.tee}`;
  if (typeof b.measurement !== 'string' || !trusted.measurements.has(b.measurement.toLowerCase())) {
    return `the peer's launch measurement ${String(b.measurement)} is not this replica's nor one of fleet.trusted_measurements`;
  }
  if (b.binding?.policy_hash !== a.binding.policy_hash) {
    return `the peer serves another catalogue (policy hash ${String(b.binding?.policy_hash)}, this replica ${a.binding.policy_hash})`;
  }
  const mine = a.binding.manifest_sha384;
  const theirsSha = b.binding?.manifest_sha384;
  // Without hardware (tee none) a manifest is only each replica's word: development fleets are not held to it.
  if (mine === null || a.tee === 'none' || theirsSha === mine || (typeof theirsSha === 'string' && trusted.manifests.has(theirsSha.toLowerCase()))) return null;
  if (typeof theirsSha !== 'string') return 'the peer names no manifest: nothing says which code and configuration it runs';
  const differ = manifestDifferences({ sha384: mine, text: ours.manifest }, { sha384: theirsSha, text: theirs.manifest });
  const what =
    differ === null || differ.length === 0
      ? 'its code, configuration, catalogue or models differ'
      : `${differ.join(', ')} differ${differ.length === 1 ? 's' : ''}`;
  return `the peer's manifest ${theirsSha} is not this replica's ${mine} nor one of fleet.trusted_manifests: ${what}`;
}

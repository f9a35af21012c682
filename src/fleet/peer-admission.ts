import { calculateJwkThumbprint } from 'jose';
import { START_NONCE, type AttestationDocumentV2 } from '../protocol/attestation.ts';
import { verifyAttestationDocument } from '../verify/attestation.ts';
import { keyOriginCheck } from '../verify/key-origin.ts';
import { sameMeasuredState } from './measured-state.ts';

/** What a replica publishes in the registry: its public key and the start evidence that binds it. */
export interface PublishedKey {
  replica_id: string;
  kid: string;
  attestation: AttestationDocumentV2;
  published_at: string;
}

/** The public JWK as the JWKS serves it: only the fields a verifier uses. */
export interface PublicJwk {
  kty: 'EC';
  crv: 'P-256';
  x: string;
  y: string;
  kid: string;
  use: 'sig';
  alg: 'ES256';
}

export interface AdmissionPolicy {
  /** This replica's start evidence: a peer must show the same measured state. */
  ours: AttestationDocumentV2;
  /** Launch measurements whose keys this replica serves: its own, plus any the operator trusts (rolling upgrades). */
  measurements: ReadonlySet<string>;
  /** Without hardware evidence nothing proves who made a peer's key: such keys are admitted only when the operator says so. */
  admitUnattested: boolean;
  /** A peer whose binding declares a key loaded from a file (the operator may hold a copy) is refused unless this is set. */
  admitLoaded: boolean;
}

export type Admission = { jwk: PublicJwk } | { rejected: string };

/**
 * Decides whether a peer's key may enter this replica's JWKS. The peer's start evidence must bind
 * exactly its one key and show the same measured state as this replica (sameMeasuredState), and declare
 * that key made in the enclave or sealed to it (a loaded key only with `fleet.admit_loaded_keys`); on
 * hardware, its signature chain must verify up to AMD's or Intel's root. A replica without hardware
 * (tee none) admits only peers without hardware, and only with `fleet.admit_unattested_peers`. Redis
 * is thus not trusted with keys, only with carrying them; whether a key is live is decided by the
 * heartbeats it signs (key-registry.ts).
 */
export async function admitPeerKey(text: string, kid: string, policy: AdmissionPolicy): Promise<Admission> {
  let doc: PublishedKey;
  try {
    doc = JSON.parse(text) as PublishedKey;
  } catch {
    return { rejected: 'the registry entry is not JSON' };
  }
  const attestation = doc.attestation;
  const bound = attestation?.binding?.jwks?.keys;
  if (!Array.isArray(bound) || bound.length !== 1) return { rejected: 'the attestation document does not bind exactly one key' };
  const { kty, crv, x, y } = bound[0] as Record<string, unknown>;
  if (kty !== 'EC' || crv !== 'P-256' || typeof x !== 'string' || typeof y !== 'string') return { rejected: 'the bound key is not an EC P-256 key' };
  if ((await calculateJwkThumbprint({ kty, crv, x, y }, 'sha256')) !== kid) return { rejected: 'the kid is not the thumbprint of the bound key' };
  const different = sameMeasuredState(policy.ours, attestation, policy.measurements);
  if (different !== null) return { rejected: different };
  // The key's origin is decided here, with the fleet's own setting, on hardware or not; the hardware checks below skip it.
  const origin = keyOriginCheck(attestation.binding.key_origin, policy.admitLoaded, attestation.tee);
  if (!origin.ok) return { rejected: origin.detail.replace('(accept this only with sigil.accept_loaded_keys in the reference values)', '(set fleet.admit_loaded_keys to serve such keys)') };
  if (policy.ours.tee === 'none' && !policy.admitUnattested) {
    return { rejected: 'neither replica has hardware evidence, so nothing proves who made this key (set fleet.admit_unattested_peers to serve such keys)' };
  }
  if (policy.ours.tee !== 'none') {
    const checks = await verifyAttestationDocument(attestation, { jwks: { keys: [bound[0] as object] }, nonce: START_NONCE, expectedMeasurement: attestation.measurement });
    const failed = checks.filter((c) => !c.ok && c.name !== origin.name);
    if (failed.length > 0) return { rejected: failed.map((c) => c.detail).join('; ') };
  } else if (attestation.evidence !== null) {
    return { rejected: 'a tee none document carries evidence' };
  }
  return { jwk: { kty, crv, x, y, kid, use: 'sig', alg: 'ES256' } };
}

import { calculateJwkThumbprint } from 'jose';
import type { AttestationDocumentV2 } from '../protocol/attestation.ts';
import { verifyAttestationDocument, type TrustRoots } from '../verify/attestation.ts';
import { keyOriginCheck } from '../verify/key-origin.ts';
import { sameMeasuredState, type MeasuredSide, type TrustedStates } from './measured-state.ts';

/** What a replica publishes in the registry: its public key, the start evidence that binds it, and the manifest text it measured. */
export interface PublishedKey {
  replica_id: string;
  kid: string;
  attestation: AttestationDocumentV2;
  /** The manifest text (JCS) whose SHA-384 the evidence names, so a refusal can say which part differs; null without hardware. */
  manifest?: string | null;
  published_at: string;
}

/** A replica's answer to an admitting replica's challenge: evidence made now, for the nonce that replica chose. */
export interface FreshEvidence {
  /** The challenge's nonce, lowercase hex. */
  nonce: string;
  attestation: AttestationDocumentV2;
  manifest: string | null;
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
  /** This replica's measured state now (its start evidence, remade at each reload): a peer must show the same. */
  ours: () => MeasuredSide;
  /** Launch measurements and manifests trusted besides this replica's own (rolling upgrades). */
  trusted: TrustedStates;
  /** Without hardware evidence nothing proves who made a peer's key: such keys are admitted only when the operator says so. */
  admitUnattested: boolean;
  /** A peer whose binding declares a key loaded from a file (the operator may hold a copy) is refused unless this is set. */
  admitLoaded: boolean;
  /** The AMD and Intel roots a peer's evidence must chain to; the built-in ones unless a test brings its own. */
  roots?: TrustRoots;
}

export type Admission = { jwk: PublicJwk } | { rejected: string };

function parse<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

/**
 * Decides whether a peer's key may enter this replica's JWKS. On hardware the peer's evidence must be the answer
 * to `fresh.nonce`, a nonce this replica chose (so Redis cannot replay an old one), verify up to AMD's or Intel's
 * root, bind exactly the key `kid` names, and show the same measured state as this replica (sameMeasuredState). A
 * replica without hardware (tee none) compares the published start document, and admits it only with
 * `fleet.admit_unattested_peers`. Redis is thus not trusted with keys, only with carrying them; whether a key is
 * live is decided by the heartbeats it signs (key-registry.ts).
 */
export async function admitPeerKey(entryText: string, kid: string, policy: AdmissionPolicy, fresh?: { nonce: Uint8Array; answer: string }): Promise<Admission> {
  const entry = parse<PublishedKey>(entryText);
  if (entry === undefined || typeof entry !== 'object' || entry === null) return { rejected: 'the registry entry is not JSON' };
  const ours = policy.ours();
  let theirs: MeasuredSide;
  if (ours.doc.tee === 'none') {
    theirs = { doc: entry.attestation, manifest: null };
  } else {
    if (fresh === undefined) return { rejected: "the peer has not answered this replica's nonce with fresh evidence" };
    const answer = parse<FreshEvidence>(fresh.answer);
    if (answer === undefined || typeof answer !== 'object' || answer === null) return { rejected: "the answer to this replica's nonce is not JSON" };
    const manifest = typeof answer.manifest === 'string' ? answer.manifest : typeof entry.manifest === 'string' ? entry.manifest : null;
    theirs = { doc: answer.attestation, manifest };
  }
  const attestation = theirs.doc;
  const bound = attestation?.binding?.jwks?.keys;
  if (!Array.isArray(bound) || bound.length !== 1) return { rejected: 'the attestation document does not bind exactly one key' };
  const { kty, crv, x, y } = bound[0] as Record<string, unknown>;
  if (kty !== 'EC' || crv !== 'P-256' || typeof x !== 'string' || typeof y !== 'string') return { rejected: 'the bound key is not an EC P-256 key' };
  if ((await calculateJwkThumbprint({ kty, crv, x, y }, 'sha256')) !== kid) return { rejected: 'the kid is not the thumbprint of the bound key' };
  const different = sameMeasuredState(ours, theirs, policy.trusted);
  if (different !== null) return { rejected: different };
  // The key's origin is decided here, with the fleet's own setting, on hardware or not; the hardware checks below skip it.
  const origin = keyOriginCheck(attestation.binding.key_origin, policy.admitLoaded, attestation.tee);
  if (!origin.ok)
    return {
      rejected: origin.detail.replace(
        '(accept this only with sigil.accept_loaded_keys in the reference values)',
        '(set fleet.admit_loaded_keys to serve such keys)',
      ),
    };
  if (ours.doc.tee === 'none') {
    if (!policy.admitUnattested)
      return { rejected: 'neither replica has hardware evidence, so nothing proves who made this key (set fleet.admit_unattested_peers to serve such keys)' };
    if (attestation.evidence !== null) return { rejected: 'a tee none document carries evidence' };
  } else {
    const checks = await verifyAttestationDocument(attestation, {
      jwks: { keys: [bound[0] as object] },
      nonce: fresh!.nonce,
      expectedMeasurement: attestation.measurement,
      ...(policy.roots === undefined ? {} : { roots: policy.roots }),
    });
    const failed = checks.filter((c) => !c.ok && c.name !== origin.name);
    if (failed.length > 0) return { rejected: failed.map((c) => `${c.name}: ${c.detail}`).join('; ') };
  }
  return { jwk: { kty, crv, x, y, kid, use: 'sig', alg: 'ES256' } };
}
